"""Stop 39 (PROTOCOL_stop39.md): recomputation LLVM hoists out of a loop counted once.

Stop 38's development harness (rmw_dev_stop38.py: the 185 development logs, each with its own folder's
hardware.json; analytical alone, LOFO, LOTO and in-sample with the residual refitted per split) with
base = the code before this change (stop 38's features, BASE_CACHE) and new = the code now (NEW_CACHE;
TVM's per-store sums taken from BASE_CACHE).

Run from the repository root with the change in the code: python benchmarks/modes/hoist_dev_stop39.py
(--report FILE prints the table of a finished run)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("BASE_CACHE", "/tmp/s38/cache_rmw")
os.environ.setdefault("NEW_CACHE", "/tmp/s39/cache_hoist")
os.environ.setdefault("OUT", "benchmarks/modes/hoist_dev_stop39.json")
import rmw_dev_stop38 as harness  # noqa: E402

if __name__ == "__main__":
    if sys.argv[1:2] == ["--report"]:
        harness.report(json.load(open(sys.argv[2])))
    else:
        harness.main()
