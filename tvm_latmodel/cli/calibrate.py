"""``tvm-latmodel calibrate``: measure this CPU and write a hardware spec JSON.

``--rpc HOST:PORT:KEY`` times the same kernels on a board of an RPC
tracker's fleet (see README, "Tuning on a fleet"). Progress goes to stderr; a table of the measured numbers next to the
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
    p.add_argument("--rpc", default=None, metavar="HOST:PORT:KEY",
                   help="calibrate a board of this RPC tracker's fleet instead of this machine "
                        "(--target: an LLVM target JSON for the board's CPU; default this machine's)")
    p.add_argument("--rpc-timeout", type=float, default=60.0, metavar="S",
                   help="longest wait for the tracker and a free board, in seconds (default 60)")
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
        rows.append((f"  one core alone", f"{default.core_bandwidth_gbps(base, 1):.1f}",
                     f"{spec.core_bandwidth_gbps(level, 1):.1f}"))
    rows.append(("peak GFLOP/s", f"{default.peak_gflops:.1f}", f"{spec.peak_gflops:.1f}"))
    rows.append(("  one core alone", f"{default.core_peak_gflops(1):.1f}", f"{spec.core_peak_gflops(1):.1f}"))
    rows.append(("launch overhead us", f"{default.launch_overhead_s * 1e6:.2f}",
                 f"{spec.launch_overhead_s * 1e6:.2f}"))
    rows.append(("libm call cycles", f"{default.libm_call_cycles:.1f}", f"{spec.libm_call_cycles:.1f}"))
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    lines = [f"{r[0]:<{widths[0]}}  {r[1]:>{widths[1]}}  {r[2]:>{widths[2]}}" for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def run_calibrate(args) -> int:
    """Run a calibration, print the table, write the spec. Returns the exit status."""
    folder = os.path.dirname(os.path.abspath(args.output))
    rpc = getattr(args, "rpc", None)
    if rpc is not None:
        from ..rpc import parse_tracker

        tracker = parse_tracker(rpc)  # a malformed value fails before anything slow
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"{args.output}: output folder {folder} does not exist")
        spec, default = _calibrate_board(tracker, args)
    else:
        from ..hardware import HardwareSpec
        from ..hardware.calibrate import calibrate_host, check_host_target

        target = check_host_target(args.target or "host")
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"{args.output}: output folder {folder} does not exist")
        spec = calibrate_host(target, quick=args.quick, progress=True)
        default = HardwareSpec.from_target(target)
    print(f"{spec.name}: {spec.parallel_units} cores, {spec.vector_bits}-bit vectors"
          + (f" (board of {rpc})" if rpc is not None else ""))
    print(format_table(spec, default))
    load = spec.extra.get("calibration", {}).get("load_average_1min")
    if load is not None:
        print(f"(load average during calibration: {load:.2f})")
    spec.save(args.output)
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _calibrate_board(tracker, args):
    """Calibrate a free board of ``tracker``'s key through one RPC session."""
    from ..hardware import HardwareSpec
    from ..hardware.calibrate import calibrate_remote
    from ..rpc import request_session, tracker_summary
    from ..targets import host_target, parse_target

    target = parse_target(args.target) if args.target else host_target()
    if target.kind.name != "llvm":
        raise ValueError(f"cannot calibrate a {target.kind.name!r} board: give an LLVM target JSON for its CPU")
    if not args.target:
        print(f"[calibrate] no --target: building for this machine's CPU "
              f"({target.attrs.get('mcpu')}, {target.attrs.get('num-cores')} cores); give the board's "
              "LLVM target JSON if it differs", file=sys.stderr)
    tracker_summary(tracker, timeout_s=min(args.rpc_timeout, 10.0))  # unreachable tracker: fail fast
    print(f"[calibrate] asking the tracker for a board of {tracker} (waiting at most {args.rpc_timeout:g} s)",
          file=sys.stderr, flush=True)
    # One session for the whole calibration; the board ends it after 15 minutes.
    session = request_session(tracker, wait_s=args.rpc_timeout, session_timeout_s=900.0)
    try:
        spec = calibrate_remote(session, target, quick=args.quick, progress=True, board=str(tracker))
    finally:
        del session
    return spec, HardwareSpec.from_target(target)
