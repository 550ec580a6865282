"""Building blocks of the networks, in ``tvm.relax.frontend.nn``.

Inference form throughout: batch normalisation is folded into the
convolution before it (a convolution with a bias), as deployment compilers
do, so a block is ``conv (+bias) -> activation``. Every block here has a
PyTorch twin with the same attribute names in :mod:`.torch_twins`, so the
two share one state dict.

TVM 0.27's ``nn.op`` has no pooling ops; :func:`max_pool2d` and
:func:`global_avg_pool` emit Relax's own ``nn.max_pool2d`` and
``nn.adaptive_avg_pool2d`` through ``nn.core.wrap_nested``, the helper
``nn.op`` itself uses.
"""

from __future__ import annotations

import math

from tvm import relax
from tvm.relax.frontend import nn
from tvm.relax.frontend.nn import op
from tvm.relax.frontend.nn.core import wrap_nested

ACTIVATIONS = ("relu", "relu6", "none")


def _activate(x: nn.Tensor, activation: str) -> nn.Tensor:
    if activation == "relu":
        return op.relu(x)
    if activation == "relu6":
        return op.relu6(x)
    if activation == "none":
        return x
    raise ValueError(f"unknown activation {activation!r}; known: {', '.join(ACTIVATIONS)}")


def max_pool2d(x: nn.Tensor, kernel: int, stride: int, padding: int = 0) -> nn.Tensor:
    """2-D max pooling over an NCHW tensor (Relax ``nn.max_pool2d``).

    Parameters
    ----------
    x : nn.Tensor
        Input, (N, C, H, W).
    kernel, stride, padding : int
        Square window, stride and padding (padded cells never win the max).

    Returns
    -------
    nn.Tensor
    """
    pooled = relax.op.nn.max_pool2d(
        x._expr,  # pylint: disable=protected-access
        pool_size=(kernel, kernel),
        strides=(stride, stride),
        padding=(padding, padding),
    )
    return wrap_nested(pooled, "max_pool2d")


def adaptive_avg_pool2d(x: nn.Tensor, size: tuple[int, int]) -> nn.Tensor:
    """Average-pool an NCHW tensor to ``size`` (Relax ``nn.adaptive_avg_pool2d``).

    Parameters
    ----------
    x : nn.Tensor
        Input, (N, C, H, W).
    size : tuple of int
        Output (height, width).

    Returns
    -------
    nn.Tensor
    """
    pooled = relax.op.nn.adaptive_avg_pool2d(x._expr, output_size=size)  # pylint: disable=protected-access
    return wrap_nested(pooled, "adaptive_avg_pool2d")


def global_avg_pool(x: nn.Tensor) -> nn.Tensor:
    """Average an NCHW tensor over its spatial axes: (N, C, H, W) -> (N, C).

    Parameters
    ----------
    x : nn.Tensor
        Input with static N and C.

    Returns
    -------
    nn.Tensor
    """
    batch, channels = int(x.shape[0]), int(x.shape[1])
    return op.reshape(adaptive_avg_pool2d(x, (1, 1)), [batch, channels])


class ConvAct(nn.Module):
    """Convolution with a bias (batch norm folded in), then an activation.

    Parameters
    ----------
    in_channels, out_channels, kernel, stride, groups : int
        As for a 2-D convolution; padding is ``kernel // 2``.
    activation : str
        ``relu``, ``relu6`` or ``none``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel: int,
        stride: int = 1,
        groups: int = 1,
        activation: str = "relu",
    ) -> None:
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}; known: {', '.join(ACTIVATIONS)}")
        self.activation = activation
        self.conv = nn.Conv2D(
            in_channels,
            out_channels,
            kernel,
            stride=stride,
            padding=kernel // 2,
            groups=groups,
            bias=True,
        )

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return _activate(self.conv(x), self.activation)


class BasicBlock(nn.Module):
    """ResNet basic block: two 3x3 convolutions and a shortcut.

    The shortcut is a strided 1x1 convolution when the shape changes.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int) -> None:
        self.conv1 = ConvAct(in_channels, out_channels, 3, stride=stride)
        self.conv2 = ConvAct(out_channels, out_channels, 3, activation="none")
        if stride != 1 or in_channels != out_channels:
            self.downsample = ConvAct(
                in_channels, out_channels, 1, stride=stride, activation="none"
            )
        else:
            self.downsample = None

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        shortcut = x if self.downsample is None else self.downsample(x)
        return op.relu(self.conv2(self.conv1(x)) + shortcut)


class InvertedResidual(nn.Module):
    """MobileNetV2 block: 1x1 expand, 3x3 depthwise, 1x1 linear project.

    The expansion is skipped when ``expand_ratio`` is 1; the residual is
    added when the stride is 1 and the channel count does not change.
    """

    def __init__(self, in_channels: int, out_channels: int, stride: int, expand_ratio: int) -> None:
        hidden = in_channels * expand_ratio
        self.use_residual = stride == 1 and in_channels == out_channels
        self.expand = (
            ConvAct(in_channels, hidden, 1, activation="relu6") if expand_ratio != 1 else None
        )
        self.depthwise = ConvAct(
            hidden, hidden, 3, stride=stride, groups=hidden, activation="relu6"
        )
        self.project = ConvAct(hidden, out_channels, 1, activation="none")

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = x if self.expand is None else self.expand(x)
        y = self.project(self.depthwise(y))
        return x + y if self.use_residual else y


class MultiHeadSelfAttention(nn.Module):
    """Multi-head self-attention over (batch, tokens, width), written out op by op.

    Separate ``q_proj``/``k_proj``/``v_proj``/``out_proj`` linears, scaled dot
    products, softmax; no fused attention kernel, so TVM sees (and tunes) the
    same batched matmuls as any transformer.
    """

    def __init__(self, width: int, heads: int) -> None:
        if width % heads:
            raise ValueError(f"width {width} is not a multiple of heads {heads}")
        self.width = width
        self.heads = heads
        self.q_proj = nn.Linear(width, width)
        self.k_proj = nn.Linear(width, width)
        self.v_proj = nn.Linear(width, width)
        self.out_proj = nn.Linear(width, width)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        batch, tokens = int(x.shape[0]), int(x.shape[1])
        head_width = self.width // self.heads

        def split_heads(t: nn.Tensor) -> nn.Tensor:  # (B, T, W) -> (B, H, T, W/H)
            return op.permute_dims(
                op.reshape(t, [batch, tokens, self.heads, head_width]), [0, 2, 1, 3]
            )

        q = split_heads(self.q_proj(x))
        k = split_heads(self.k_proj(x))
        v = split_heads(self.v_proj(x))
        scores = op.matmul(q, op.permute_dims(k, [0, 1, 3, 2])) * (1.0 / math.sqrt(head_width))
        context = op.matmul(op.softmax(scores, axis=-1), v)
        context = op.reshape(op.permute_dims(context, [0, 2, 1, 3]), [batch, tokens, self.width])
        return self.out_proj(context)


class TransformerEncoderLayer(nn.Module):
    """Post-norm transformer encoder layer (PyTorch's default): attention, then ReLU MLP."""

    def __init__(self, width: int, heads: int, ff_width: int) -> None:
        self.self_attn = MultiHeadSelfAttention(width, heads)
        self.norm1 = nn.LayerNorm(width)
        self.linear1 = nn.Linear(width, ff_width)
        self.linear2 = nn.Linear(ff_width, width)
        self.norm2 = nn.LayerNorm(width)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        x = self.norm1(x + self.self_attn(x))
        return self.norm2(x + self.linear2(op.relu(self.linear1(x))))


class MLP(nn.Module):
    """Linear layers with ReLU between them (none after the last)."""

    def __init__(self, widths: list[int]) -> None:
        if len(widths) < 2:
            raise ValueError("an MLP needs an input and an output width")
        self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:])])

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = op.relu(x)
        return x
