"""Small programs and networks shared by the tests (imported as ``toys``:
pytest puts this folder on ``sys.path``)."""

from __future__ import annotations

import tvm
from tvm import te
from tvm.relax.frontend import nn
from tvm.relax.frontend.nn import op

from tvm_latmodel.networks.layers import global_avg_pool
from tvm_latmodel.networks.stages import StageModule


def square_matmul(n: int) -> tvm.IRModule:
    """``C = A @ B`` on ``n x n`` float32 matrices, its PrimFunc named ``main``."""
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c]).with_attr("global_symbol", "main")})


class ToyEncoder(StageModule):
    """A 3x3 conv, ReLU and global average pool on a 1-channel 8x8 image: 4 features."""

    def __init__(self):
        super().__init__("encoder")
        self.conv = nn.Conv2D(1, 4, 3, padding=1)

    def forward(self, x):
        return global_avg_pool(op.relu(self.conv(x)))


class ToyFusion(StageModule):
    """Concatenates two encoders' features."""

    def __init__(self):
        super().__init__("fusion")

    def forward(self, a, b):
        return op.concat([a, b], dim=1)


class ToyHead(StageModule):
    """A linear layer from 8 fused features to 3 outputs."""

    def __init__(self):
        super().__init__("head")
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(x)
