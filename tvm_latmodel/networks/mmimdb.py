"""MM-IMDb (MMBench): movie genres from a poster and a plot text."""

from __future__ import annotations

from tvm import relax
from tvm.relax.frontend import nn
from tvm.relax.frontend.nn.core import wrap_nested

from .common import MLPHead, fused_width, make_fusion
from .inputs import InputSpec
from .layers import ConvAct, TransformerEncoderLayer, global_avg_pool, max_pool2d
from .stages import StageModule


class ImageCNN(StageModule):
    """VGG-style poster encoder: 3x3 convolution + ReLU + 2x2 max pooling per width,
    then global average pooling."""

    def __init__(self, widths: tuple[int, ...] = (32, 64, 128, 128)) -> None:
        super().__init__("encoder")
        in_channels = [3, *widths[:-1]]
        self.convs = nn.ModuleList([ConvAct(a, b, 3) for a, b in zip(in_channels, widths)])
        self.out_features = widths[-1]

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        for conv in self.convs:
            x = max_pool2d(conv(x), kernel=2, stride=2)
        return global_avg_pool(x)


class TextTransformer(StageModule):
    """Plot encoder: token and learned position embeddings, post-norm transformer
    layers, mean over tokens."""

    def __init__(self, vocab_size: int, seq_len: int, width: int, heads: int, layers: int) -> None:
        super().__init__("encoder")
        self.embedding = nn.Embedding(vocab_size, width)
        self.pos_embedding = nn.Parameter((1, seq_len, width))
        self.layers = nn.ModuleList(
            [TransformerEncoderLayer(width, heads, 2 * width) for _ in range(layers)]
        )
        self.out_features = width

    def forward(self, tokens: nn.Tensor) -> nn.Tensor:
        x = self.embedding(tokens) + self.pos_embedding
        for layer in self.layers:
            x = layer(x)
        return wrap_nested(relax.op.mean(x._expr, axis=[1]), "mean")  # pylint: disable=protected-access


class MMIMDb(nn.Module):
    """MM-IMDb: a CNN poster encoder and a transformer plot encoder, fusion, MLP head
    (23 genres, multi-label logits).

    MMBench feeds pre-extracted VGG and word2vec features; here the encoders
    are real but small: a 64x64 poster through four 3x3 convolutions (32 to
    128 channels), and 32 tokens through two 128-wide transformer layers with
    4 heads. ``fusion="tensor"`` takes the outer product of the two 128-wide
    features (16641 wide) into the head.

    Parameters
    ----------
    image_size : int
        Poster height and width.
    seq_len, vocab_size : int
        Plot length in tokens and vocabulary size.
    width, heads, layers : int
        Text transformer width, heads and depth.
    fusion : str
        ``concat`` (default) or ``tensor``.
    hidden, num_classes : int
        Head hidden width and number of genres.
    """

    def __init__(
        self,
        image_size: int = 64,
        seq_len: int = 32,
        vocab_size: int = 2000,
        width: int = 128,
        heads: int = 4,
        layers: int = 2,
        fusion: str = "concat",
        hidden: int = 128,
        num_classes: int = 23,
    ) -> None:
        self.image_encoder = ImageCNN()
        self.text_encoder = TextTransformer(vocab_size, seq_len, width, heads, layers)
        self.fusion = make_fusion(fusion)
        fused = fused_width(fusion, self.image_encoder.out_features, self.text_encoder.out_features)
        self.head = MLPHead([fused, hidden, num_classes])
        self.inputs = [
            InputSpec("image", (1, 3, image_size, image_size)),
            InputSpec("tokens", (1, seq_len), dtype="int64", high=vocab_size),
        ]

    def forward(self, image: nn.Tensor, tokens: nn.Tensor) -> nn.Tensor:
        return self.head(self.fusion(self.image_encoder(image), self.text_encoder(tokens)))
