"""The ``tvm-latmodel`` command.

Subcommands register themselves through ``add_parser(subparsers)`` functions
in their own modules; this file only wires them together. Results go to
stdout, progress and errors to stderr; the exit status is non-zero on failure.
"""

from __future__ import annotations

import argparse
import sys

# Modules that provide ``add_parser(subparsers)``; each sets ``func`` on its parser.
_SUBCOMMAND_MODULES = [
    "tvm_latmodel.cli.explain",
    "tvm_latmodel.cli.tune",
    "tvm_latmodel.cli.calibrate",
    "tvm_latmodel.cli.gpu",
    "tvm_latmodel.cli.replay",
    "tvm_latmodel.cli.fusion",
    "tvm_latmodel.cli.tune_network",
]


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="tvm-latmodel",
        description="Hybrid latency model (analytical modes x XGBoost residual) for TVM MetaSchedule.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in _SUBCOMMAND_MODULES:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError) as err:
        print(f"tvm-latmodel {args.command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
