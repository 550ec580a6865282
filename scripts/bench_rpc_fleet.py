"""Trials per minute when tuning through an RPC tracker with 1 board vs 2.

Starts a tracker and N ``tvm.exec.rpc_server`` processes on loopback (free
ports), runs ``tvm-latmodel tune --rpc ... --json`` (a fresh process and
work directory per configuration, same workload, budget and seed), stops
every process it started by pid, and writes ``benchmarks/rpc_fleet.json``:
per configuration the tuning wall time (``report.wall_s``, from the first
search round to the end), the process wall time (imports and set-up
included), trials per minute of both, and the seconds MetaSchedule spent in
the runner (measuring on the boards) per round, read from the work
directory's task-scheduler log.

On one machine the "boards" share its cores with the builder and the
search, so a second board only helps the measuring phase, and only when
the cores are not already busy.

Usage::

    nice -n 10 python scripts/bench_rpc_fleet.py [--workload GMM:1] [--trials 32] [--boards 1 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEY = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(argv, log_path):
    log = open(log_path, "wb")
    return subprocess.Popen([sys.executable, *argv], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def kill_tree(proc) -> None:
    """Kill ``proc`` and its descendants, by pid."""
    try:
        procs = psutil.Process(proc.pid).children(recursive=True) + [psutil.Process(proc.pid)]
    except psutil.NoSuchProcess:
        procs = []
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


def wait_boards(address: str, n: int, timeout_s: float = 180.0) -> None:
    from tvm_latmodel.rpc import FleetError, fleet_status

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if fleet_status(address, timeout_s=5).servers_free >= n:
                return
        except FleetError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{n} boards did not register with {address} within {timeout_s:.0f} s")


def runner_seconds(work_dir: str) -> list[int]:
    """Seconds between 'Sending N valid sample(s) to runner' and '[Updated]' in each round."""
    path = os.path.join(work_dir, "logs", "tvm.s_tir.meta_schedule.logging.task_scheduler.log")
    stamps = []
    start = None
    with open(path) as f:
        for line in f:
            m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)", line)
            if not m:
                continue
            t = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
            if "to runner" in line:
                start = t
            elif "[Updated]" in line and start is not None:
                stamps.append(int((t - start).total_seconds()))
                start = None
    return stamps


def run_config(boards: int, args, tmp: str) -> dict:
    port = free_port()
    address = f"127.0.0.1:{port}:{KEY}"
    procs = [spawn(["-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port),
                    "--port-end", str(port + 1)], os.path.join(tmp, f"tracker{boards}.log"))]
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the tracker did not start") from None
                time.sleep(0.3)
        for i in range(boards):
            sp = free_port()
            procs.append(spawn(["-m", "tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(sp),
                                "--port-end", str(sp + 1), "--tracker", f"127.0.0.1:{port}", "--key", KEY],
                               os.path.join(tmp, f"server{boards}-{i}.log")))
        wait_boards(address, boards)
        work_dir = os.path.join(tmp, f"wd-{boards}")
        cmd = ["tvm-latmodel", "tune", "--workload", args.workload, "--trials", str(args.trials),
               "--seed", str(args.seed), "--rpc", address, "--work-dir", work_dir, "--json"]
        print(f"[bench] {boards} board(s): {' '.join(cmd)}", file=sys.stderr, flush=True)
        load_before = os.getloadavg()[0]
        t0 = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        process_s = time.monotonic() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"tune failed ({proc.returncode}): {proc.stderr[-2000:]}")
        report = json.loads(proc.stdout)
        per_round = runner_seconds(work_dir)
        return {
            "boards": boards,
            "command": " ".join(cmd),
            "trials_measured": report["trials_measured"],
            "trials_failed": report["trials_failed"],
            "best_latency_us": report["best_latency_s"] * 1e6 if report["best_latency_s"] else None,
            "measured_on": report["measured_on"],
            "tuning_wall_s": report["wall_s"],
            "process_wall_s": process_s,
            "trials_per_minute_tuning": 60.0 * report["trials_measured"] / report["wall_s"],
            "trials_per_minute_process": 60.0 * report["trials_measured"] / process_s,
            "runner_s_per_round": per_round,
            "runner_s_total": sum(per_round),
            "load_average_1min_before": load_before,
            "load_average_1min_after": os.getloadavg()[0],
        }
    finally:
        for p in reversed(procs):
            kill_tree(p)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="GMM:1")
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--boards", type=int, nargs="+", default=[1, 2])
    ap.add_argument("-o", "--output", default=os.path.join(ROOT, "benchmarks", "rpc_fleet.json"))
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-rpc-") as tmp:
        for boards in args.boards:
            results.append(run_config(boards, args, tmp))
            r = results[-1]
            print(f"[bench] {boards} board(s): {r['trials_measured']} trials in {r['tuning_wall_s']:.0f} s "
                  f"({r['trials_per_minute_tuning']:.1f}/min tuning, {r['trials_per_minute_process']:.1f}/min "
                  f"process; runner {r['runner_s_total']} s)", file=sys.stderr, flush=True)
    doc = {
        "what": "tvm-latmodel tune --rpc: trials per minute with 1 vs 2 RPC servers on loopback, same machine",
        "workload": args.workload, "trials": args.trials, "seed": args.seed,
        "machine": {"logical_cpus": os.cpu_count(), "note": "2 cores shared with a background log recorder"},
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "command": "nice -n 10 python scripts/bench_rpc_fleet.py " + " ".join(sys.argv[1:]),
        "results": results,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    print(json.dumps({r["boards"]: round(r["trials_per_minute_tuning"], 2) for r in results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
