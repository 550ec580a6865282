"""Stage modules shared by the networks: ResNet pieces, classifier head, fusions."""

from __future__ import annotations

from tvm.relax.frontend import nn
from tvm.relax.frontend.nn import op

from .layers import MLP, BasicBlock, ConvAct, global_avg_pool, max_pool2d
from .stages import StageModule

FUSIONS = ("concat", "tensor")


class ResNetStem(StageModule):
    """ResNet stem: 7x7/2 convolution and 3x3/2 max pooling (spatial size / 4)."""

    def __init__(self, in_channels: int, width: int, stage: str = "encoder") -> None:
        super().__init__(stage)
        self.conv = ConvAct(in_channels, width, 7, stride=2)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return max_pool2d(self.conv(x), kernel=3, stride=2, padding=1)


class ResNetLayer(StageModule):
    """A run of :class:`BasicBlock`; the first one may stride and widen."""

    def __init__(
        self, in_channels: int, out_channels: int, blocks: int, stride: int, stage: str = "encoder"
    ) -> None:
        super().__init__(stage)
        self.blocks = nn.ModuleList(
            [
                BasicBlock(
                    in_channels if i == 0 else out_channels, out_channels, stride if i == 0 else 1
                )
                for i in range(blocks)
            ]
        )

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


class ClassifierHead(StageModule):
    """Global average pooling, then a linear classifier."""

    def __init__(self, in_channels: int, num_classes: int) -> None:
        super().__init__("head")
        self.fc = nn.Linear(in_channels, num_classes)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc(global_avg_pool(x))


class MLPHead(StageModule):
    """An MLP on fused features (the head of the multi-modal networks)."""

    def __init__(self, widths: list[int]) -> None:
        super().__init__("head")
        self.mlp = MLP(widths)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.mlp(x)


class ConcatFusion(StageModule):
    """Early-late fusion by concatenating modality features: (B, a), (B, b) -> (B, a+b)."""

    def __init__(self) -> None:
        super().__init__("fusion")

    def forward(self, a: nn.Tensor, b: nn.Tensor) -> nn.Tensor:
        return op.concat([a, b], dim=1)


class TensorFusion(StageModule):
    """Tensor fusion (Zadeh et al., 2017): the outer product of ``[a, 1]`` and ``[b, 1]``.

    (B, a), (B, b) -> (B, (a+1)(b+1)); the appended ones keep each
    modality's own features in the product.
    """

    def __init__(self) -> None:
        super().__init__("fusion")

    def forward(self, a: nn.Tensor, b: nn.Tensor) -> nn.Tensor:
        batch = int(a.shape[0])
        ones = op.ones([batch, 1], dtype=a.dtype)
        a1 = op.concat([a, ones], dim=1)
        b1 = op.concat([b, ones], dim=1)
        width_a, width_b = int(a1.shape[1]), int(b1.shape[1])
        outer = op.reshape(a1, [batch, width_a, 1]) * op.reshape(b1, [batch, 1, width_b])
        return op.reshape(outer, [batch, width_a * width_b])


def make_fusion(kind: str) -> StageModule:
    """The fusion stage module for ``kind`` (``concat`` or ``tensor``)."""
    if kind == "concat":
        return ConcatFusion()
    if kind == "tensor":
        return TensorFusion()
    raise ValueError(f"unknown fusion {kind!r}; known: {', '.join(FUSIONS)}")


def fused_width(kind: str, width_a: int, width_b: int) -> int:
    """Width of the fused feature vector for two modality widths."""
    if kind == "concat":
        return width_a + width_b
    if kind == "tensor":
        return (width_a + 1) * (width_b + 1)
    raise ValueError(f"unknown fusion {kind!r}; known: {', '.join(FUSIONS)}")
