"""AV-MNIST (MultiBench / MMBench): digits from an image and a spoken-digit spectrogram."""

from __future__ import annotations

from tvm.relax.frontend import nn
from tvm.relax.frontend.nn import op

from .common import MLPHead, fused_width, make_fusion
from .inputs import InputSpec
from .layers import ConvAct, max_pool2d
from .stages import StageModule


class LeNetEncoder(StageModule):
    """MultiBench's LeNet encoder: a 5x5 convolution, then 3x3 convolutions doubling the
    channels, each followed by ReLU and 2x2 max pooling; flattened at the end.

    Parameters
    ----------
    in_channels : int
        Input channels (1: grey image or spectrogram).
    channels : int
        Channels of the first convolution.
    additional_layers : int
        Number of 3x3 convolutions after the first one.
    input_size : int
        Height and width of the input.
    """

    def __init__(
        self, in_channels: int, channels: int, additional_layers: int, input_size: int
    ) -> None:
        super().__init__("encoder")
        convs = [ConvAct(in_channels, channels, 5)]
        for i in range(additional_layers):
            convs.append(ConvAct(channels * 2**i, channels * 2 ** (i + 1), 3))
        self.convs = nn.ModuleList(convs)
        size = input_size
        for _ in convs:
            size //= 2
        if size < 1:
            raise ValueError(f"input size {input_size} is too small for {len(convs)} poolings")
        self.out_features = channels * 2**additional_layers * size * size

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        for conv in self.convs:
            x = max_pool2d(conv(x), kernel=2, stride=2)
        return op.reshape(x, [int(x.shape[0]), self.out_features])


class AVMNIST(nn.Module):
    """AV-MNIST as in MultiBench's simple late fusion: two LeNet encoders, fusion, MLP head.

    The image encoder is ``LeNet(1, 6, 3)`` on a 28x28 grey digit (48
    features), the audio encoder ``LeNet(1, 6, 5)`` on a 112x112 spectrogram
    (192 features); concatenation gives MultiBench's 240-wide input of an
    ``MLP(240, 100, 10)`` head. Full size: nothing is reduced.

    Parameters
    ----------
    image_size, audio_size : int
        Input sizes (28 and 112 in MultiBench).
    channels : int
        First-layer channels of both encoders (6).
    fusion : str
        ``concat`` (default) or ``tensor`` (outer-product tensor fusion).
    hidden : int
        Hidden width of the head.
    num_classes : int
        Outputs (10 digits).
    """

    def __init__(
        self,
        image_size: int = 28,
        audio_size: int = 112,
        channels: int = 6,
        fusion: str = "concat",
        hidden: int = 100,
        num_classes: int = 10,
    ) -> None:
        self.image_encoder = LeNetEncoder(1, channels, 3, image_size)
        self.audio_encoder = LeNetEncoder(1, channels, 5, audio_size)
        self.fusion = make_fusion(fusion)
        width = fused_width(
            fusion, self.image_encoder.out_features, self.audio_encoder.out_features
        )
        self.head = MLPHead([width, hidden, num_classes])
        self.inputs = [
            InputSpec("image", (1, 1, image_size, image_size)),
            InputSpec("audio", (1, 1, audio_size, audio_size)),
        ]

    def forward(self, image: nn.Tensor, audio: nn.Tensor) -> nn.Tensor:
        return self.head(self.fusion(self.image_encoder(image), self.audio_encoder(audio)))
