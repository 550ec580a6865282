"""MobileNetV2 (Sandler et al., 2018) for image classification."""

from __future__ import annotations

from tvm.relax.frontend import nn

from .common import ClassifierHead
from .inputs import InputSpec
from .layers import ConvAct, InvertedResidual
from .stages import StageModule

#: (expansion t, output channels c, repeats n, first stride s), from the paper's Table 2.
INVERTED_RESIDUAL_SETTINGS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)


def _scaled(channels: int, width_mult: float, divisor: int = 8) -> int:
    """Channels times ``width_mult``, rounded to a multiple of ``divisor`` (torchvision's rule)."""
    scaled = max(divisor, int(channels * width_mult + divisor / 2) // divisor * divisor)
    if scaled < 0.9 * channels * width_mult:
        scaled += divisor
    return scaled


class MobileNetV2Features(StageModule):
    """The convolutional body: 3x3/2 stem, 17 inverted-residual blocks, 1x1 to 1280."""

    def __init__(self, width_mult: float = 1.0) -> None:
        super().__init__("encoder")
        channels = _scaled(32, width_mult)
        self.stem = ConvAct(3, channels, 3, stride=2, activation="relu6")
        blocks = []
        for expand, out, repeats, stride in INVERTED_RESIDUAL_SETTINGS:
            out_channels = _scaled(out, width_mult)
            for i in range(repeats):
                blocks.append(
                    InvertedResidual(channels, out_channels, stride if i == 0 else 1, expand)
                )
                channels = out_channels
        self.blocks = nn.ModuleList(blocks)
        self.out_channels = _scaled(1280, max(1.0, width_mult))
        self.last = ConvAct(channels, self.out_channels, 1, activation="relu6")

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.last(x)


class MobileNetV2(nn.Module):
    """MobileNetV2: inverted-residual body (``encoder``), pooled classifier (``head``).

    Full size by default (224x224, width 1.0): on this project's 2-core CPU
    the untuned build takes about 6 s and one untuned run about 0.25 s.

    Parameters
    ----------
    image_size : int
        Height and width of the input image (224 in the paper).
    width_mult : float
        Channel multiplier (1.0 in the paper).
    num_classes : int
        Classifier outputs.
    """

    def __init__(
        self, image_size: int = 224, width_mult: float = 1.0, num_classes: int = 1000
    ) -> None:
        self.features = MobileNetV2Features(width_mult)
        self.head = ClassifierHead(self.features.out_channels, num_classes)
        self.inputs = [InputSpec("image", (1, 3, image_size, image_size))]

    def forward(self, image: nn.Tensor) -> nn.Tensor:
        return self.head(self.features(image))
