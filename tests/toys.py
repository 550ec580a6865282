"""Small programs and networks shared by the tests (imported as ``toys``:
pytest puts this folder on ``sys.path``)."""

from __future__ import annotations

import tvm
from tvm import te
from tvm.relax.frontend import nn
from tvm.relax.frontend.nn import op
from tvm.script import tirx as T

from tvm_latmodel.networks.layers import global_avg_pool
from tvm_latmodel.networks.stages import StageModule


def square_matmul(n: int) -> tvm.IRModule:
    """``C = A @ B`` on ``n x n`` float32 matrices, its PrimFunc named ``main``."""
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c]).with_attr("global_symbol", "main")})


def tiled_matmul_schedule(mod: tvm.IRModule, fi: int, fj: int) -> tvm.s_tir.Schedule:
    """:func:`square_matmul` split by ``fi`` rows and ``fj`` columns, rows
    parallel, the column tile vectorized when it is at least 4 wide."""
    sch = tvm.s_tir.Schedule(mod)
    i, j, k = sch.get_loops(sch.get_sblock("C"))
    io, ii = sch.split(i, [None, fi])
    jo, ji = sch.split(j, [None, fj])
    sch.reorder(io, jo, k, ii, ji)
    if fj >= 4:
        sch.vectorize(ji)
    sch.parallel(io)
    return sch


def padded_sum(write_border: bool) -> tvm.IRModule:
    """``B[i] = P[i] + P[i + 2]`` over ``P``, ``A`` padded by one zero each side in an
    intermediate buffer. Without ``write_border`` the padding is never written,
    as in a wrong fused conv -> conv schedule: ``B``'s ends are whatever ``P``'s
    memory held."""

    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        P = T.sblock_alloc_buffer((10,), "float32")
        for i in range(10):
            with T.sblock("pad"):
                vi = T.axis.spatial(10, i)
                T.where(write_border or (1 <= i and i < 9))
                P[vi] = T.if_then_else(1 <= vi and vi < 9, A[vi - 1], T.float32(0))
        for i in range(8):
            with T.sblock("out"):
                vi = T.axis.spatial(8, i)
                B[vi] = P[vi] + P[vi + 2]

    return tvm.IRModule({"main": main})


def gpu_softmax_schedule(mod: tvm.IRModule, threads: int = 128) -> tvm.s_tir.Schedule:
    """Softmax (``SFM`` workloads) as four CUDA kernels, two of them with
    workspace buffers the host allocates."""
    sch = tvm.s_tir.Schedule(mod)
    for blk in sch.get_child_blocks(sch.get_sblock("root")):
        loops = sch.get_loops(blk)
        if sch.get(blk).name_hint in ("T_softmax_norm", "T_softmax_exp"):
            bx, tx = sch.split(sch.fuse(*loops), [None, threads])
        else:
            bx, tx = sch.split(loops[0], [None, 64])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    return sch


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
