"""The latency model: :mod:`.program` summarises a scheduled PrimFunc,
:mod:`.modes` turns a summary and a :class:`~tvm_latmodel.hardware.HardwareSpec`
into an analytical latency with named terms, :mod:`.residual` learns what the
analysis misses, :mod:`.cost_model` is the MetaSchedule adapter, and
:mod:`.registry` builds every model (ours and TVM's) by short name.

Submodules are imported on use: :mod:`.cost_model` pulls in TVM's
MetaSchedule, which the pure math does not need.
"""
