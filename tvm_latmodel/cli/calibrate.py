"""``tvm-latmodel calibrate``: measure this CPU and write a hardware spec JSON.

Progress goes to stderr; a table of the measured numbers next to the
defaults of :meth:`HardwareSpec.from_target` goes to stdout; the spec is
written with :meth:`HardwareSpec.save` and read back with
:meth:`HardwareSpec.load`.
"""

from __future__ import annotations

import os
import sys


def add_parser(subparsers) -> None:
    """Add the ``calibrate`` subcommand to an argparse ``subparsers`` object."""
    p = subparsers.add_parser(
        "calibrate",
        help="measure this CPU's bandwidths, peak FLOP/s and launch overhead",
        description=(
            "Time small TVM-built kernels on this machine (streaming reads per cache "
            "level and DRAM, an FMA micro-kernel, an empty parallel kernel) and write "
            "a calibrated hardware spec JSON. Run it on an otherwise idle machine."
        ),
    )
    p.add_argument("-o", "--output", default="hardware.json",
                   help="where to write the spec JSON (default: hardware.json)")
    p.add_argument("--target", default=None,
                   help="'host' (default) or an LLVM target JSON whose mcpu is this machine's CPU")
    p.add_argument("--quick", action="store_true",
                   help="shorter timings and a smaller DRAM working set (noisier, a few seconds)")
    p.set_defaults(func=run_calibrate)


def format_table(spec, default) -> str:
    """A plain-text table of ``spec``'s numbers next to ``default``'s."""
    rows = [("quantity", "default", "calibrated")]
    raw = spec.extra.get("calibration", {}).get("levels", {})
    for level, base in zip(spec.memory, default.memory):
        measured = raw.get(level.name, {}).get("bandwidth_gbps")
        value = f"{level.bandwidth_gbps:.1f}"
        if measured is not None and abs(measured - level.bandwidth_gbps) > 1e-9:
            value += f" (measured {measured:.1f})"
        rows.append((f"{level.name} bandwidth GB/s", f"{base.bandwidth_gbps:.1f}", value))
    rows.append(("peak GFLOP/s", f"{default.peak_gflops:.1f}", f"{spec.peak_gflops:.1f}"))
    rows.append(("launch overhead us", f"{default.launch_overhead_s * 1e6:.2f}",
                 f"{spec.launch_overhead_s * 1e6:.2f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}" for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def run_calibrate(args) -> int:
    """Run a calibration, print the table, write the spec. Returns the exit status."""
    from ..hardware.calibrate import calibrate_host, check_host_target
    from ..hardware import HardwareSpec

    target = check_host_target(args.target or "host")
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{args.output}: output folder {folder} does not exist")
    spec = calibrate_host(target, quick=args.quick, progress=True)
    default = HardwareSpec.from_target(target)
    print(f"{spec.name}: {spec.parallel_units} cores, {spec.vector_bits}-bit vectors")
    print(format_table(spec, default))
    load = spec.extra.get("calibration", {}).get("load_average_1min")
    if load is not None:
        print(f"(load average during calibration: {load:.2f})")
    spec.save(args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0
