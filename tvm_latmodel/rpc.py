"""Measure on a fleet of boards through TVM's RPC tracker.

A fleet is one tracker (``python -m tvm.exec.rpc_tracker``) and N boards,
each running ``python -m tvm.exec.rpc_server --tracker HOST:PORT --key KEY``.
Builds stay on this machine; each candidate's compiled module (a ``.tar`` of
object files, linked on the board) and its randomly filled inputs travel to a
free board, and the board sends its timings back.

TVM 0.27's own ``ms.runner.RPCRunner`` waits for a free board without any
bound (``TrackerSession.request`` blocks on the tracker's queue, and its
worker pool has no timeout), uses one board at a time by default, and
records a candidate whose board died mid-measurement as failed. The
:class:`FleetRunner` here measures with the same TVM functions
(``default_upload_module``, ``default_alloc_argument``,
``default_run_evaluator``), but

* waits at most ``wait_s`` for a free board, then fails the candidate with a
  message saying so;
* measures on as many boards at once as it has workers;
* retries a candidate once on another board when its board's connection
  drops (the board died or was unplugged) before the timings came back — a
  measurement is either returned whole by the board or not at all, so a
  retry never mixes timings, and a candidate that fails twice is recorded
  with MetaSchedule's 1e10 failure sentinel;
* bounds each candidate's whole measurement (queue waits and retries
  included), so a board that stops answering cannot hang a tuning run.

:func:`check_fleet` is the up-front check the CLI runs: tracker reachable,
speaking the tracker protocol, and a board with the key that accepts a
session within the timeout.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import struct
import sys
import time

__all__ = [
    "TrackerAddress",
    "FleetError",
    "FleetStatus",
    "parse_tracker",
    "fleet_status",
    "tracker_summary",
    "request_session",
    "check_fleet",
]  # and FleetRunner, defined on first use (it needs TVM; parsing --rpc does not)

#: Seconds a board may keep one session (the server kills it after that), and
#: the default wait for a free board.
DEFAULT_SESSION_TIMEOUT_S = 60.0


class FleetError(ValueError):
    """The tracker or its boards cannot be used (unreachable, no free board, ...).

    A ``ValueError``, so ``tvm-latmodel`` reports it as a usage error
    (exit status 2) with its message.
    """


@dataclasses.dataclass(frozen=True)
class TrackerAddress:
    """Where a fleet's tracker listens, and the key its boards registered with."""

    host: str
    port: int
    key: str

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}:{self.key}"


def parse_tracker(text: str) -> TrackerAddress:
    """Parse ``HOST:PORT:KEY`` (the ``--rpc`` value).

    ``HOST`` may be an IPv6 address in brackets (``[::1]:9190:rasp4``). The
    key is what the boards gave ``rpc_server --key``; it cannot hold a colon
    (the tracker itself splits ``server:KEY`` on colons).

    Raises
    ------
    ValueError
        Naming the part that is wrong.
    """
    usage = "give --rpc HOST:PORT:KEY, e.g. 127.0.0.1:9190:myboard"
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"empty --rpc value; {usage}")
    text = text.strip()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"--rpc {text!r}: unclosed '[' in the host; {usage}")
        host, rest = text[1:end], text[end + 1:]
        if not rest.startswith(":"):
            raise ValueError(f"--rpc {text!r}: expected ':PORT:KEY' after the host; {usage}")
        parts = rest[1:].split(":")
    else:
        host, *parts = text.split(":")
    if len(parts) != 2:
        what = "a port and a key" if not parts else ("a key" if len(parts) == 1 else "one host, port and key")
        raise ValueError(f"--rpc {text!r}: missing {what}; {usage}")
    port_text, key = parts
    if not host:
        raise ValueError(f"--rpc {text!r}: empty host; {usage}")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"--rpc {text!r}: port {port_text!r} is not a number; {usage}") from None
    if not 1 <= port <= 65535:
        raise ValueError(f"--rpc {text!r}: port {port} is outside 1..65535; {usage}")
    if not key or any(c.isspace() for c in key):
        raise ValueError(f"--rpc {text!r}: the key must be a non-empty word (what the boards gave "
                         f"rpc_server --key); {usage}")
    return TrackerAddress(host, port, key)


def _as_address(tracker) -> TrackerAddress:
    return tracker if isinstance(tracker, TrackerAddress) else parse_tracker(tracker)


# ----------------------------------------------------------------- the tracker
def _open_tracker(tracker: TrackerAddress, timeout_s: float) -> socket.socket:
    """A connected tracker socket (magic exchanged) whose reads time out."""
    from tvm.rpc import base

    try:
        sock = socket.create_connection((tracker.host, tracker.port), timeout=timeout_s)
    except OSError as err:
        raise FleetError(f"cannot reach the RPC tracker at {tracker.host}:{tracker.port}: {err} "
                         "(is `python -m tvm.exec.rpc_tracker` running there?)") from None
    try:
        sock.settimeout(timeout_s)
        sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
        magic = struct.unpack("<i", base.recvall(sock, 4))[0]
    except OSError as err:
        sock.close()
        raise FleetError(f"{tracker.host}:{tracker.port} accepted a connection but did not answer as an "
                         f"RPC tracker ({err})") from None
    if magic != base.RPC_TRACKER_MAGIC:
        sock.close()
        raise FleetError(f"{tracker.host}:{tracker.port} is not a TVM RPC tracker")
    return sock


def tracker_summary(tracker, *, timeout_s: float = 10.0) -> dict:
    """The tracker's summary (``{"queue_info": ..., "server_info": ...}``), within ``timeout_s``.

    Raises
    ------
    FleetError
        When the tracker cannot be reached or does not answer in time.
    """
    from tvm.rpc import base

    tracker = _as_address(tracker)
    sock = _open_tracker(tracker, timeout_s)
    try:
        base.sendjson(sock, [base.TrackerCode.SUMMARY])
        value = base.recvjson(sock)
    except OSError as err:
        raise FleetError(f"the RPC tracker at {tracker.host}:{tracker.port} did not answer: {err}") from None
    finally:
        sock.close()
    if not isinstance(value, list) or len(value) != 2 or value[0] != base.TrackerCode.SUCCESS:
        raise FleetError(f"the RPC tracker at {tracker.host}:{tracker.port} answered {value!r} to a summary")
    return value[1]


@dataclasses.dataclass(frozen=True)
class FleetStatus:
    """What the tracker said about the boards of one key."""

    tracker: TrackerAddress
    servers_free: int  # registered and idle (a board in a session is not listed)
    pending: int  # requests for this key in the tracker's queue (abandoned ones included)
    keys: tuple  # every key with an idle board

    def describe(self) -> str:
        keys = ", ".join(self.keys) if self.keys else "none"
        # The tracker keeps a request in its queue after the requester gave up
        # (until a board of that key turns up), so "queued" counts those too.
        return (f"{self.servers_free} idle board(s) with key {self.tracker.key!r} ({self.pending} request(s) "
                f"queued for it, abandoned ones included); keys with idle boards: {keys}")


def fleet_status(tracker, *, timeout_s: float = 10.0) -> FleetStatus:
    """Count the idle boards of ``tracker.key`` (see :class:`FleetStatus`)."""
    tracker = _as_address(tracker)
    summary = tracker_summary(tracker, timeout_s=timeout_s)
    keys = []
    free = 0
    for item in summary.get("server_info", []):
        key = str(item.get("key", "")).split(":", 1)[-1]
        keys.append(key)
        free += key == tracker.key
    queue = summary.get("queue_info", {}).get(tracker.key, {})
    return FleetStatus(tracker, free, int(queue.get("pending", 0)), tuple(sorted(set(keys))))


def request_session(tracker, *, wait_s: float, session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S):
    """An RPC session on a free board of ``tracker.key``, waiting at most ``wait_s``.

    The board ends the session after ``session_timeout_s``. A board the tracker
    hands out but that refuses the connection (it died after registering) is
    skipped and another one requested, within the same ``wait_s``.

    Raises
    ------
    FleetError
        No board became free within ``wait_s``, or the tracker is unreachable.
    """
    from tvm import rpc
    from tvm.rpc import base

    tracker = _as_address(tracker)
    deadline = time.monotonic() + wait_s
    last_error = None
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        sock = _open_tracker(tracker, max(remaining, 0.1))
        try:
            base.sendjson(sock, [base.TrackerCode.REQUEST, tracker.key, "", 1])
            sock.settimeout(max(deadline - time.monotonic(), 0.1))
            value = base.recvjson(sock)
        except OSError as err:  # socket.timeout included
            if isinstance(err, TimeoutError) or "timed out" in str(err):
                break
            last_error = err
            time.sleep(0.2)
            continue
        finally:
            # TVM's tracker keeps an abandoned request queued until a board of the
            # key turns up, then finds its connection closed and skips it.
            sock.close()
        if not isinstance(value, list) or value[0] != base.TrackerCode.SUCCESS:
            raise FleetError(f"the RPC tracker at {tracker.host}:{tracker.port} refused a request: {value!r}")
        url, port, matchkey = value[1]
        try:
            return rpc.connect(url, port, matchkey, session_timeout=session_timeout_s)
        except Exception as err:  # noqa: BLE001 (TVM raises its own error types)
            last_error = err  # a board that died after registering: ask for another one
            time.sleep(0.2)
    status = ""
    try:
        status = "; now " + fleet_status(tracker, timeout_s=5.0).describe()
    except FleetError:
        pass
    detail = f" (last error: {str(last_error).strip().splitlines()[-1]})" if last_error else ""
    raise FleetError(f"no board with key {tracker.key!r} became free at the RPC tracker "
                     f"{tracker.host}:{tracker.port} within {wait_s:g} s{detail}{status}")


def check_fleet(tracker, *, timeout_s: float = DEFAULT_SESSION_TIMEOUT_S) -> FleetStatus:
    """Check, before tuning, that a board of ``tracker.key`` can be used.

    Connects to the tracker (bounded by ``min(timeout_s, 10)``), then requests
    a session and opens the board's CPU (the wait bounded by ``timeout_s``),
    so an unreachable tracker, a wrong key, a fleet whose boards are all busy,
    and a board that registered an address this machine cannot reach are
    reported here with a message, not as a hang or as N failed trials. (The
    connection to the board itself is TVM's blocking connect: an address
    that drops packets, rather than refusing, takes the system's TCP connect
    timeout to fail.)

    Returns
    -------
    FleetStatus
        Counted before the probe session was opened.
    """
    tracker = _as_address(tracker)
    status = fleet_status(tracker, timeout_s=min(timeout_s, 10.0))
    session = request_session(tracker, wait_s=timeout_s, session_timeout_s=max(timeout_s, 10.0))
    try:
        dev = session.cpu(0)
        if not dev.exist:
            raise FleetError(f"the board given by {tracker} has no CPU device")
    finally:
        del session
    return status


# ----------------------------------------------------------------- the runner
def _lost_board(err: BaseException) -> bool:
    """Whether ``err`` says the board's end of the session went away.

    TVM 0.27 reports a board that died mid-session as ``InternalError: Check
    failed: (code == RPCCode::kReturn) is false: code=kShutdown`` (``code=1``
    on some paths); a plain socket error is the same event. An error raised
    *by* the board (a failing kernel, a missing function) comes back as an
    ``RPCError`` and is not a lost board.
    """
    if isinstance(err, (ConnectionError, BrokenPipeError, EOFError)):
        return True
    text = str(err).lower()
    if "rpccode::kreturn" in text and ("kshutdown" in text or "code=1" in text):
        return True
    return any(n in text for n in ("connection reset", "broken pipe", "socket closed"))


def _measure_on_fleet(tracker: TrackerAddress, wait_s: float, session_timeout_s: float, retries: int,
                      evaluator_config, alloc_repeat: int, artifact_path: str, device_type: str,
                      args_info) -> list:
    """Run one built candidate on a free board; runs in a runner worker process."""
    from tvm.s_tir.meta_schedule.runner import rpc_runner

    attempt = 0
    while True:
        session = None
        remote_path = None
        started = time.monotonic()
        try:
            session = request_session(tracker, wait_s=wait_s, session_timeout_s=session_timeout_s)
            started = time.monotonic()
            device = session.device(device_type, 0)
            remote_path = os.path.basename(artifact_path)
            rt_mod = rpc_runner.default_upload_module(session, artifact_path, remote_path)
            args = rpc_runner.default_alloc_argument(session, device, args_info, alloc_repeat)
            costs = rpc_runner.default_run_evaluator(session, rt_mod, device, evaluator_config, args)
            try:
                rpc_runner.default_cleanup(session, remote_path)
            except Exception:  # noqa: BLE001 the timings came back whole; a failed clean-up does not change them
                pass
            return costs
        except FleetError:
            raise
        except Exception as err:  # noqa: BLE001
            elapsed = time.monotonic() - started
            if elapsed >= 0.95 * session_timeout_s:
                raise RuntimeError(f"the board ended the session after {session_timeout_s:g} s "
                                   f"(the candidate runs too long for --rpc-timeout): {err}") from None
            if attempt >= retries or session is None or not _lost_board(err):
                raise
            attempt += 1
            first = str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
            print(f"tvm-latmodel: lost the connection to a board of {tracker} while measuring "
                  f"{os.path.basename(os.path.dirname(artifact_path)) or artifact_path} ({first}); "
                  f"retrying on another board ({attempt}/{retries})", file=sys.stderr, flush=True)
        finally:
            del session


def _make_fleet_runner_class():
    """Define FleetRunner lazily (it needs TVM, which the package imports lazily)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.runner.rpc_runner import RPCRunnerFuture
    from tvm.support.popen_pool import PopenPoolExecutor

    @derived_object
    class FleetRunner(ms.runner.PyRunner):
        """A MetaSchedule runner that measures on the boards of an RPC tracker.

        Parameters
        ----------
        tracker : TrackerAddress or str
            ``HOST:PORT:KEY`` of the tracker and the boards' key.
        workers : int
            Candidates measured at once (use the number of boards).
        session_timeout_s : float
            The board ends a session after this long (a candidate slower than
            that fails); also the longest wait for a free board.
        retries : int
            How many times a candidate whose board dropped the connection is
            tried again on another board.
        evaluator_config : ms.runner.EvaluatorConfig, optional
            ``number``, ``repeat``, ``min_repeat_ms`` of ``time_evaluator`` on the board.
        initializer : callable, optional
            Run in each worker process when it starts.
        """

        def __init__(self, tracker, *, workers: int = 1, session_timeout_s: float = DEFAULT_SESSION_TIMEOUT_S,
                     retries: int = 1, evaluator_config=None, alloc_repeat: int = 1, initializer=None) -> None:
            super().__init__()
            if workers < 1:
                raise ValueError(f"workers must be >= 1, got {workers}")
            self.tracker = _as_address(tracker)
            self.workers = int(workers)
            self.session_timeout_s = float(session_timeout_s)
            self.wait_s = float(session_timeout_s)
            self.retries = int(retries)
            self.evaluator_config = ms.runner.EvaluatorConfig._normalized(evaluator_config)
            self.alloc_repeat = int(alloc_repeat)
            # Every wait and session of every attempt, plus a margin for the upload.
            self.timeout_s = (self.retries + 1) * (self.wait_s + self.session_timeout_s) + 30.0
            self.pool = PopenPoolExecutor(max_workers=self.workers, timeout=self.timeout_s,
                                          initializer=initializer)

        def run(self, runner_inputs):
            futures = []
            for runner_input in runner_inputs:
                future = self.pool.submit(
                    _measure_on_fleet, self.tracker, self.wait_s, self.session_timeout_s, self.retries,
                    self.evaluator_config, self.alloc_repeat, str(runner_input.artifact_path),
                    str(runner_input.device_type), tuple(a.as_json() for a in runner_input.args_info))
                futures.append(RPCRunnerFuture(future=future, timeout_sec=self.timeout_s))
            return futures

    return FleetRunner


_FLEET_RUNNER = None


def __getattr__(name):
    global _FLEET_RUNNER
    if name == "FleetRunner":
        if _FLEET_RUNNER is None:
            _FLEET_RUNNER = _make_fleet_runner_class()
        return _FLEET_RUNNER
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
