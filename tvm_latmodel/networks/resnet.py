"""ResNet-18 (He et al., 2016) for image classification."""

from __future__ import annotations

from tvm.relax.frontend import nn

from .common import ClassifierHead, ResNetLayer, ResNetStem
from .inputs import InputSpec


class ResNet18(nn.Module):
    """ResNet-18: stem, four layers of two basic blocks, classifier.

    Stages: stem and layers are the ``encoder``, pooling and the classifier
    the ``head``; a single-modality network has no fusion stage.

    Full size by default (224x224, ImageNet): on this project's 2-core CPU
    the untuned build takes about 4 s and one untuned run about 2.3 s.
    ``image_size=112`` (about 0.65 s a run) or 64 are quicker; the kernels
    then have other shapes than the paper's network.

    Parameters
    ----------
    image_size : int
        Height and width of the input image. 224 is the ImageNet size.
    width : int
        Channels of the first layer (64 in the original; doubles per layer).
    num_classes : int
        Classifier outputs.
    """

    def __init__(self, image_size: int = 224, width: int = 64, num_classes: int = 1000) -> None:
        widths = [width, width * 2, width * 4, width * 8]
        self.stem = ResNetStem(3, width)
        self.layer1 = ResNetLayer(widths[0], widths[0], blocks=2, stride=1)
        self.layer2 = ResNetLayer(widths[0], widths[1], blocks=2, stride=2)
        self.layer3 = ResNetLayer(widths[1], widths[2], blocks=2, stride=2)
        self.layer4 = ResNetLayer(widths[2], widths[3], blocks=2, stride=2)
        self.head = ClassifierHead(widths[3], num_classes)
        self.inputs = [InputSpec("image", (1, 3, image_size, image_size))]

    def forward(self, image: nn.Tensor) -> nn.Tensor:
        x = self.stem(image)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.head(x)
