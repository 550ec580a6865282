"""PyTorch twins of the ``nn`` networks: same structure, same attribute names, same ops.

Imported only by :mod:`.torch_twins` (this module imports ``torch``). Each
class mirrors the class of the same name in :mod:`.layers`,
:mod:`.common` and the network modules, so a twin's ``state_dict`` keys are
exactly the ``Network.params`` names.
"""

# pylint: disable=missing-class-docstring,missing-function-docstring
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .common import fused_width
from .mobilenet import INVERTED_RESIDUAL_SETTINGS, _scaled


def _activate(x: torch.Tensor, activation: str) -> torch.Tensor:
    if activation == "relu":
        return F.relu(x)
    if activation == "relu6":
        return F.relu6(x)
    return x


def _global_avg_pool(x: torch.Tensor) -> torch.Tensor:
    return F.adaptive_avg_pool2d(x, 1).reshape(x.shape[0], x.shape[1])


class ConvAct(nn.Module):
    def __init__(self, in_channels, out_channels, kernel, stride=1, groups=1, activation="relu"):
        super().__init__()
        self.activation = activation
        self.conv = nn.Conv2d(
            in_channels,
            out_channels,
            kernel,
            stride=stride,
            padding=kernel // 2,
            groups=groups,
            bias=True,
        )

    def forward(self, x):
        return _activate(self.conv(x), self.activation)


class BasicBlock(nn.Module):
    def __init__(self, in_channels, out_channels, stride):
        super().__init__()
        self.conv1 = ConvAct(in_channels, out_channels, 3, stride=stride)
        self.conv2 = ConvAct(out_channels, out_channels, 3, activation="none")
        if stride != 1 or in_channels != out_channels:
            self.downsample = ConvAct(
                in_channels, out_channels, 1, stride=stride, activation="none"
            )
        else:
            self.downsample = None

    def forward(self, x):
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(self.conv2(self.conv1(x)) + shortcut)


class InvertedResidual(nn.Module):
    def __init__(self, in_channels, out_channels, stride, expand_ratio):
        super().__init__()
        hidden = in_channels * expand_ratio
        self.use_residual = stride == 1 and in_channels == out_channels
        self.expand = (
            ConvAct(in_channels, hidden, 1, activation="relu6") if expand_ratio != 1 else None
        )
        self.depthwise = ConvAct(
            hidden, hidden, 3, stride=stride, groups=hidden, activation="relu6"
        )
        self.project = ConvAct(hidden, out_channels, 1, activation="none")

    def forward(self, x):
        y = x if self.expand is None else self.expand(x)
        y = self.project(self.depthwise(y))
        return x + y if self.use_residual else y


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.width = width
        self.heads = heads
        self.q_proj = nn.Linear(width, width)
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)

    def forward(self, x):
        batch, tokens = x.shape[0], x.shape[1]
        head_width = self.width // self.heads

        def split_heads(t):
            return t.reshape(batch, tokens, self.heads, head_width).permute(0, 2, 1, 3)

        q = split_heads(self.q_proj(x))
        k = split_heads(self.k_proj(x))
        v = split_heads(self.v_proj(x))
        scores = torch.matmul(q, k.permute(0, 1, 3, 2)) * (1.0 / math.sqrt(head_width))
        context = torch.matmul(torch.softmax(scores, dim=-1), v)
        context = context.permute(0, 2, 1, 3).reshape(batch, tokens, self.width)
        return self.out_proj(context)


class TransformerEncoderLayer(nn.Module):
    def __init__(self, width, heads, ff_width):
        super().__init__()
        self.self_attn = MultiHeadSelfAttention(width, heads)
        self.norm1 = nn.LayerNorm(width, eps=1e-5)
        self.linear1 = nn.Linear(width, ff_width)
        self.linear2 = nn.Linear(ff_width, width)
        self.norm2 = nn.LayerNorm(width, eps=1e-5)

    def forward(self, x):
        x = self.norm1(x + self.self_attn(x))
        return self.norm2(x + self.linear2(F.relu(self.linear1(x))))


class MLP(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:])])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = F.relu(x)
        return x


# --- stage modules (common.py) -------------------------------------------------


class ResNetStem(nn.Module):
    def __init__(self, in_channels, width):
        super().__init__()
        self.conv = ConvAct(in_channels, width, 7, stride=2)

    def forward(self, x):
        return F.max_pool2d(self.conv(x), kernel_size=3, stride=2, padding=1)


class ResNetLayer(nn.Module):
    def __init__(self, in_channels, out_channels, blocks, stride):
        super().__init__()
        self.blocks = nn.ModuleList(
            [
                BasicBlock(
                    in_channels if i == 0 else out_channels, out_channels, stride if i == 0 else 1
                )
                for i in range(blocks)
            ]
        )

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


class ClassifierHead(nn.Module):
    def __init__(self, in_channels, num_classes):
        super().__init__()
        self.fc = nn.Linear(in_channels, num_classes)

    def forward(self, x):
        return self.fc(_global_avg_pool(x))


class MLPHead(nn.Module):
    def __init__(self, widths):
        super().__init__()
        self.mlp = MLP(widths)

    def forward(self, x):
        return self.mlp(x)


class ConcatFusion(nn.Module):
    def forward(self, a, b):
        return torch.cat([a, b], dim=1)


class TensorFusion(nn.Module):
    def forward(self, a, b):
        batch = a.shape[0]
        ones = torch.ones(batch, 1, dtype=a.dtype)
        a1 = torch.cat([a, ones], dim=1)
        b1 = torch.cat([b, ones], dim=1)
        outer = a1.reshape(batch, a1.shape[1], 1) * b1.reshape(batch, 1, b1.shape[1])
        return outer.reshape(batch, a1.shape[1] * b1.shape[1])


def make_fusion(kind):
    return ConcatFusion() if kind == "concat" else TensorFusion()


# --- networks -------------------------------------------------------------------


class ResNet18(nn.Module):
    def __init__(self, image_size=224, width=64, num_classes=1000):
        super().__init__()
        widths = [width, width * 2, width * 4, width * 8]
        self.stem = ResNetStem(3, width)
        self.layer1 = ResNetLayer(widths[0], widths[0], 2, 1)
        self.layer2 = ResNetLayer(widths[0], widths[1], 2, 2)
        self.layer3 = ResNetLayer(widths[1], widths[2], 2, 2)
        self.layer4 = ResNetLayer(widths[2], widths[3], 2, 2)
        self.head = ClassifierHead(widths[3], num_classes)

    def forward(self, image):
        x = self.stem(image)
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.head(x)


class MobileNetV2Features(nn.Module):
    def __init__(self, width_mult=1.0):
        super().__init__()
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

    def forward(self, x):
        x = self.stem(x)
        for block in self.blocks:
            x = block(x)
        return self.last(x)


class MobileNetV2(nn.Module):
    def __init__(self, image_size=224, width_mult=1.0, num_classes=1000):
        super().__init__()
        self.features = MobileNetV2Features(width_mult)
        self.head = ClassifierHead(self.features.out_channels, num_classes)

    def forward(self, image):
        return self.head(self.features(image))


class LeNetEncoder(nn.Module):
    def __init__(self, in_channels, channels, additional_layers, input_size):
        super().__init__()
        convs = [ConvAct(in_channels, channels, 5)]
        for i in range(additional_layers):
            convs.append(ConvAct(channels * 2**i, channels * 2 ** (i + 1), 3))
        self.convs = nn.ModuleList(convs)
        size = input_size
        for _ in convs:
            size //= 2
        self.out_features = channels * 2**additional_layers * size * size

    def forward(self, x):
        for conv in self.convs:
            x = F.max_pool2d(conv(x), kernel_size=2, stride=2)
        return x.reshape(x.shape[0], self.out_features)


class AVMNIST(nn.Module):
    def __init__(
        self, image_size=28, audio_size=112, channels=6, fusion="concat", hidden=100, num_classes=10
    ):
        super().__init__()
        self.image_encoder = LeNetEncoder(1, channels, 3, image_size)
        self.audio_encoder = LeNetEncoder(1, channels, 5, audio_size)
        self.fusion = make_fusion(fusion)
        width = fused_width(
            fusion, self.image_encoder.out_features, self.audio_encoder.out_features
        )
        self.head = MLPHead([width, hidden, num_classes])

    def forward(self, image, audio):
        return self.head(self.fusion(self.image_encoder(image), self.audio_encoder(audio)))


class ImageCNN(nn.Module):
    def __init__(self, widths=(32, 64, 128, 128)):
        super().__init__()
        in_channels = [3, *widths[:-1]]
        self.convs = nn.ModuleList([ConvAct(a, b, 3) for a, b in zip(in_channels, widths)])
        self.out_features = widths[-1]

    def forward(self, x):
        for conv in self.convs:
            x = F.max_pool2d(conv(x), kernel_size=2, stride=2)
        return _global_avg_pool(x)


class TextTransformer(nn.Module):
    def __init__(self, vocab_size, seq_len, width, heads, layers):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, width)
        self.pos_embedding = nn.Parameter(torch.zeros(1, seq_len, width))
        self.layers = nn.ModuleList(
            [TransformerEncoderLayer(width, heads, 2 * width) for _ in range(layers)]
        )
        self.out_features = width

    def forward(self, tokens):
        x = self.embedding(tokens) + self.pos_embedding
        for layer in self.layers:
            x = layer(x)
        return x.mean(dim=1)


class MMIMDb(nn.Module):
    def __init__(
        self,
        image_size=64,
        seq_len=32,
        vocab_size=2000,
        width=128,
        heads=4,
        layers=2,
        fusion="concat",
        hidden=128,
        num_classes=23,
    ):
        super().__init__()
        self.image_encoder = ImageCNN()
        self.text_encoder = TextTransformer(vocab_size, seq_len, width, heads, layers)
        self.fusion = make_fusion(fusion)
        fused = fused_width(fusion, self.image_encoder.out_features, self.text_encoder.out_features)
        self.head = MLPHead([fused, hidden, num_classes])

    def forward(self, image, tokens):
        return self.head(self.fusion(self.image_encoder(image), self.text_encoder(tokens)))


class FusionTransformer(nn.Module):
    def __init__(self, channels, feature_size, anchors, heads, layers):
        super().__init__()
        self.channels = channels
        self.feature_size = feature_size
        self.anchors = min(anchors, feature_size)
        self.pos_embedding = nn.Parameter(torch.zeros(1, 2 * self.anchors**2, channels))
        self.layers = nn.ModuleList(
            [TransformerEncoderLayer(channels, heads, 4 * channels) for _ in range(layers)]
        )

    def _tokens(self, x):
        if self.anchors != self.feature_size:
            x = F.adaptive_avg_pool2d(x, (self.anchors, self.anchors))
        return x.reshape(1, self.channels, self.anchors**2).permute(0, 2, 1)

    def _feature_map(self, tokens):
        x = tokens.permute(0, 2, 1).reshape(1, self.channels, self.anchors, self.anchors)
        if self.anchors != self.feature_size:
            x = F.interpolate(
                x, size=(self.feature_size, self.feature_size), mode="bilinear", align_corners=False
            )
        return x

    def forward(self, image, lidar):
        x = torch.cat([self._tokens(image), self._tokens(lidar)], dim=1) + self.pos_embedding
        for layer in self.layers:
            x = layer(x)
        image_tokens, lidar_tokens = torch.chunk(x, 2, dim=1)
        return image + self._feature_map(image_tokens), lidar + self._feature_map(lidar_tokens)


class GlobalPool(nn.Module):
    def forward(self, x):
        return _global_avg_pool(x)


class SumFusion(nn.Module):
    def forward(self, a, b):
        return a + b


class WaypointHead(nn.Module):
    def __init__(self, in_features, waypoints):
        super().__init__()
        self.waypoints = waypoints
        self.mlp = MLPHead([in_features, 256, 128, 64, 2 * waypoints])

    def forward(self, x):
        return self.mlp(x).reshape(1, self.waypoints, 2)


class TransFuser(nn.Module):
    def __init__(
        self,
        image_size=128,
        lidar_size=128,
        width=32,
        blocks_per_layer=1,
        anchors=4,
        heads=4,
        transformer_layers=1,
        waypoints=4,
    ):
        super().__init__()
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

    def forward(self, image, lidar):
        x, y = self.image_stem(image), self.lidar_stem(lidar)
        for image_layer, lidar_layer, fusion in zip(
            self.image_layers, self.lidar_layers, self.fusions
        ):
            x, y = fusion(image_layer(x), lidar_layer(y))
        return self.head(self.join(self.image_pool(x), self.lidar_pool(y)))


TWINS = {
    "resnet18": ResNet18,
    "mobilenetv2": MobileNetV2,
    "avmnist": AVMNIST,
    "mmimdb": MMIMDb,
    "transfuser": TransFuser,
}
