"""Stop 45: the model's verdict on which loops TVM's ``UnrollLoop`` leaves rolled, against TVM's own lowering.

For every record of the given logs, the program is lowered by ``tvm.compile``'s own pipeline up to and
including ``UnrollLoop`` (the compile is stopped there: no code generation), and the serial loops of extent
> 1 left in the IR are counted by loop-variable name. The model's verdict (``program._Walker``, the walk
``summarize`` makes) names the serial loops of extent > 1 it leaves rolled. A record agrees when the two
multisets of names are equal. ``tvm_latmodel`` is imported from the working directory (run it from a tree's
root to check that tree; the path is printed). Records are taken in file order, ``--per-log`` of each log.

    python benchmarks/modes/tvm_unroll_check_stop45.py [--per-log N] LOG_DIR ...
"""
import argparse
import os
import sys
import warnings
from collections import Counter

sys.path.insert(0, os.getcwd())  # the tree it is run from, not the installed package
import tvm  # noqa: E402
import tvm_latmodel  # noqa: E402
from tvm_latmodel.model import program  # noqa: E402
from tvm_latmodel.replay import find_databases, load_database  # noqa: E402


class _Stop(Exception):
    pass


def _loops(stmt, out):
    """(name, extent, kind, loop variable handle) of every For under ``stmt``."""
    name = type(stmt).__name__
    if name == "For":
        out.append((str(stmt.loop_var.name), int(stmt.extent), int(stmt.kind), stmt.loop_var.__chandle__()))
        _loops(stmt.body, out)
    elif name == "SeqStmt":
        for x in stmt.seq[:]:
            _loops(x, out)
    elif name == "IfThenElse":
        _loops(stmt.then_case, out)
        if stmt.else_case is not None:
            _loops(stmt.else_case, out)
    elif name == "SBlockRealize":
        if stmt.block.init is not None:
            _loops(stmt.block.init, out)
        _loops(stmt.block.body, out)
    elif hasattr(stmt, "body"):
        _loops(stmt.body, out)
    return out


def tvm_rolled(mod, target) -> Counter:
    got = {}

    @tvm.instrument.pass_instrument
    class Grab:
        def run_after_pass(self, m, info):
            if info.name.endswith("UnrollLoop"):
                got["mod"] = m
                raise _Stop()

    try:
        with tvm.transform.PassContext(opt_level=3, instruments=[Grab()]):
            tvm.compile(mod, target=target)
    except Exception:  # noqa: BLE001 - the stop raised above, wrapped by TVM
        pass
    if "mod" not in got:
        raise RuntimeError("the pipeline did not reach UnrollLoop")
    (func,) = [f for _, f in got["mod"].functions.items()]
    # ForKind: 0 serial, 1 parallel, 2 vectorized, 3 unrolled, 4 thread binding
    return Counter(n for n, e, k, _ in _loops(func.body, []) if k == 0 and e > 1)


def model_rolled(mod) -> Counter:
    body = program._prim_func(mod).body
    w = program._Walker(False)
    w.stmt(body)
    names = {h: (n, e, k) for n, e, k, h in _loops(body, [])}
    out = Counter()
    for h, (n, e, k) in names.items():
        idx = w.var_env[h][1]
        if k == 0 and e > 1 and not w.unrolled.get(idx, False):
            out[n] += 1
    return out


def main():
    warnings.simplefilter("ignore")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--per-log", type=int, default=64)
    args = ap.parse_args()
    print(f"tvm_latmodel from {os.path.dirname(tvm_latmodel.__file__)}")
    agree = total = 0
    for log in args.logs:
        (db,) = find_databases(log)
        (task,) = load_database(db, name=os.path.basename(log.rstrip("/")))
        a = n = 0
        wrong = []
        for i, c in enumerate(task.candidates()[: args.per_log]):
            t, m = tvm_rolled(c.sch.mod, task.target), model_rolled(c.sch.mod)
            n += 1
            if t == m:
                a += 1
            elif len(wrong) < 2:
                wrong.append(f"record {i}: TVM {dict(t)} model {dict(m)}")
        agree, total = agree + a, total + n
        print(f"{os.path.basename(log.rstrip('/'))}: {a}/{n}" + ("; " + "; ".join(wrong) if wrong else ""), flush=True)
    print(f"all: {agree}/{total} records agree")


if __name__ == "__main__":
    main()
