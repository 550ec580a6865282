"""TransFuser (Prakash et al., CVPR 2021): driving waypoints from a camera image and LiDAR."""

from __future__ import annotations

from tvm.relax.frontend import nn
from tvm.relax.frontend.nn import op

from .common import MLPHead, ResNetLayer, ResNetStem
from .inputs import InputSpec
from .layers import TransformerEncoderLayer, adaptive_avg_pool2d, global_avg_pool
from .stages import StageModule


class FusionTransformer(StageModule):
    """TransFuser's fusion block at one scale.

    Both feature maps (C channels) are average-pooled to an ``anchors x
    anchors`` grid, their 2 * anchors^2 tokens (plus a learned position
    embedding) go through transformer layers together, and each modality's
    tokens are reshaped back, bilinearly upsampled and added to its map.
    """

    def __init__(
        self, channels: int, feature_size: int, anchors: int, heads: int, layers: int
    ) -> None:
        super().__init__("fusion")
        self.channels = channels
        self.feature_size = feature_size
        self.anchors = min(anchors, feature_size)
        self.pos_embedding = nn.Parameter((1, 2 * self.anchors**2, channels))
        self.layers = nn.ModuleList(
            [TransformerEncoderLayer(channels, heads, 4 * channels) for _ in range(layers)]
        )

    def _tokens(self, x: nn.Tensor) -> nn.Tensor:  # (1, C, S, S) -> (1, A*A, C)
        if self.anchors != self.feature_size:
            x = adaptive_avg_pool2d(x, (self.anchors, self.anchors))
        return op.permute_dims(op.reshape(x, [1, self.channels, self.anchors**2]), [0, 2, 1])

    def _feature_map(self, tokens: nn.Tensor) -> nn.Tensor:  # (1, A*A, C) -> (1, C, S, S)
        x = op.reshape(
            op.permute_dims(tokens, [0, 2, 1]), [1, self.channels, self.anchors, self.anchors]
        )
        if self.anchors != self.feature_size:
            x = op.interpolate(
                x, size=(self.feature_size, self.feature_size), mode="bilinear", align_corners=False
            )
        return x

    def forward(self, image: nn.Tensor, lidar: nn.Tensor) -> tuple[nn.Tensor, nn.Tensor]:
        x = op.concat([self._tokens(image), self._tokens(lidar)], dim=1) + self.pos_embedding
        for layer in self.layers:
            x = layer(x)
        image_tokens, lidar_tokens = op.split(x, 2, axis=1)
        return image + self._feature_map(image_tokens), lidar + self._feature_map(lidar_tokens)


class GlobalPool(StageModule):
    """Global average pooling of an encoder's last map: (1, C, H, W) -> (1, C)."""

    def __init__(self) -> None:
        super().__init__("encoder")

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return global_avg_pool(x)


class SumFusion(StageModule):
    """TransFuser's final join: the sum of the two pooled feature vectors."""

    def __init__(self) -> None:
        super().__init__("fusion")

    def forward(self, a: nn.Tensor, b: nn.Tensor) -> nn.Tensor:
        return a + b


class WaypointHead(StageModule):
    """MLP from the joined features to ``waypoints`` (x, y) points."""

    def __init__(self, in_features: int, waypoints: int) -> None:
        super().__init__("head")
        self.waypoints = waypoints
        self.mlp = MLPHead([in_features, 256, 128, 64, 2 * waypoints])

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return op.reshape(self.mlp(x), [1, self.waypoints, 2])


class TransFuser(nn.Module):
    """TransFuser: image and LiDAR ResNet encoders with transformer fusion after each layer.

    As in the paper, a fusion transformer joins the two encoders after each
    of their four layers and the pooled features are summed before the head.
    Reduced for a 2-core CPU: both encoders are ResNet-shaped with
    ``blocks_per_layer`` basic blocks per layer (default 1, a ResNet-10; the
    paper uses a ResNet-34 for the image and a ResNet-18 for LiDAR) and
    ``width`` channels at the first layer (default 32, paper 64); inputs are
    128x128 (paper 256x256), the anchor grid is 4x4 (paper 8x8) and each
    scale has one transformer layer (paper 8, 4 heads). The GRU waypoint
    decoder is replaced by an MLP. The default still fuses at all four
    scales, so it compiles 77 distinct kernels: about 6 s of untuned build
    (more when the machine is shared) and 0.3 s a run on this 2-core CPU.

    Parameters
    ----------
    image_size, lidar_size : int
        Camera image and LiDAR bird's-eye-view (2-channel histogram) sizes;
        both must be equal.
    width : int
        Channels of the first ResNet layer (doubling per layer).
    blocks_per_layer : int
        Basic blocks per ResNet layer.
    anchors : int
        Side of the token grid each feature map is pooled to.
    heads, transformer_layers : int
        Attention heads and layers of each fusion transformer.
    waypoints : int
        Predicted (x, y) waypoints.
    """

    def __init__(
        self,
        image_size: int = 128,
        lidar_size: int = 128,
        width: int = 32,
        blocks_per_layer: int = 1,
        anchors: int = 4,
        heads: int = 4,
        transformer_layers: int = 1,
        waypoints: int = 4,
    ) -> None:
        if image_size != lidar_size:
            raise ValueError(
                "TransFuser fuses maps of equal size: image_size must equal lidar_size"
            )
        if image_size % 32:
            raise ValueError(f"image_size {image_size} must be a multiple of 32")
        widths = [width * 2**i for i in range(4)]
        self.image_stem = ResNetStem(3, width)
        self.lidar_stem = ResNetStem(2, width)
        self.image_layers = nn.ModuleList(
            [
                ResNetLayer(widths[max(i - 1, 0)], widths[i], blocks_per_layer, 1 if i == 0 else 2)
                for i in range(4)
            ]
        )
        self.lidar_layers = nn.ModuleList(
            [
                ResNetLayer(widths[max(i - 1, 0)], widths[i], blocks_per_layer, 1 if i == 0 else 2)
                for i in range(4)
            ]
        )
        self.fusions = nn.ModuleList(
            [
                FusionTransformer(
                    widths[i], image_size // 2 ** (i + 2), anchors, heads, transformer_layers
                )
                for i in range(4)
            ]
        )
        self.image_pool = GlobalPool()
        self.lidar_pool = GlobalPool()
        self.join = SumFusion()
        self.head = WaypointHead(widths[3], waypoints)
        self.inputs = [
            InputSpec("image", (1, 3, image_size, image_size)),
            InputSpec("lidar", (1, 2, lidar_size, lidar_size)),
        ]

    def forward(self, image: nn.Tensor, lidar: nn.Tensor) -> nn.Tensor:
        x, y = self.image_stem(image), self.lidar_stem(lidar)
        for image_layer, lidar_layer, fusion in zip(
            self.image_layers, self.lidar_layers, self.fusions
        ):
            x, y = fusion(image_layer(x), lidar_layer(y))
        return self.head(self.join(self.image_pool(x), self.lidar_pool(y)))
