"""Subcommand ``fusion-plan``: which larger fusion groups of a network are predicted to pay."""

from __future__ import annotations

import json
import sys
import warnings


def add_parser(sub) -> None:
    p = sub.add_parser(
        "fusion-plan",
        help="predict, per larger fusion group of a network, whether fusing it pays",
        description="Fuse NETWORK as TVM does, find larger groups (MobileNetV2 bottlenecks, "
        "attention, concat -> linear, conv -> conv), fuse each with FuseOpsByPattern + FuseTIR, "
        "predict the fused and split forms with the hybrid model (best of N sampled schedules) "
        "and decide fuse or split. Nothing is measured.",
    )
    p.add_argument("network", help="a network name (see tvm_latmodel.networks.list_networks)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--samples", type=int, default=8, help="schedules sampled per PrimFunc (default 8)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--target", default=None, help="host (default), a GPU preset or a target JSON dict")
    p.add_argument("--patterns", default=None,
                   help="comma-separated pattern names (default all: bottleneck, attention, "
                   "concat_linear, conv_conv)")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                   help="a network option, e.g. image_size=64 (repeatable)")
    p.add_argument("--no-build-check", action="store_true",
                   help="do not lower each fused group with tvm.compile, nor run its sampled schedules against its loop nest, before predicting it")
    p.set_defaults(func=_cmd_fusion_plan)


def _parse_options(items: list[str]) -> dict:
    options = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--option wants KEY=VALUE, got {item!r}")
        value: object = text
        for cast in (int, float):
            try:
                value = cast(text)
                break
            except ValueError:
                continue
        options[key.strip()] = value
    return options


def _cmd_fusion_plan(args) -> int:
    from ..networks import get_network, list_networks

    if args.network not in list_networks():
        raise ValueError(f"unknown network {args.network!r}; known networks: {', '.join(list_networks())}")
    if args.samples < 1:
        raise ValueError("--samples must be at least 1")
    from ..fusion import FusionFallbackWarning, FusionPlanner, print_plan
    from ..fusion.patterns import resolve_patterns
    from ..targets import parse_target

    patterns = None if args.patterns is None else [p.strip() for p in args.patterns.split(",") if p.strip()]
    resolve_patterns(patterns)  # unknown names fail (exit 2) before any work
    target = parse_target(args.target)
    network = get_network(args.network, seed=args.seed, **_parse_options(args.option))

    def progress(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    planner = FusionPlanner(target, samples=args.samples, seed=args.seed, patterns=patterns,
                            check_build=not args.no_build_check, progress=progress)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", FusionFallbackWarning)
        plan = planner.plan(network)
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    if args.json:
        print(json.dumps(plan.to_json()))
    else:
        print_plan(plan)
    return 0
