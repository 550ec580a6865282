"""What the model knows of a machine: :class:`HardwareSpec` (cores or SMs,
vector lanes, peak rates, bandwidth and size per memory level), built from a
TVM target, a GPU preset (``presets/*.json``) or measured by
:mod:`.calibrate`."""

from .spec import GPU_PRESETS, SPEC_FORMAT, SPEC_FORMAT_VERSION, HardwareSpec, MemoryLevel, load_hardware

__all__ = ["GPU_PRESETS", "SPEC_FORMAT", "SPEC_FORMAT_VERSION", "HardwareSpec", "MemoryLevel", "load_hardware"]
