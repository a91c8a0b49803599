"""Launch `python -m pylog broker ...` with timers around replication (benchmark only, bench/cluster_profile.py).

Wraps, without changing what they do, and counts cumulatively:
- follower side: `ReplicaFetcher._fetch` (one fetch round: request, leader's wait, response, append), the
  round trip inside it (`PeerConnection.request_raw`), `ReplicaFetcher._apply` (append of what came back)
  and the record bytes per response (empty responses counted apart);
- leader side: `broker.apis.fetch._read_all` for follower fetches (how often, bytes served), the follower
  fetches that long-polled and how long they waited (`_long_poll`), and acks=all: the time from the
  append (`Replication.wait_replicated`) to the release of the produce (its future done), or
  "immediate" when the high watermark had already passed.
Every 0.5 s the totals go to DIR/probe-<pid>.json; the caller subtracts two snapshots. The measurement
costs a few microseconds per call; never use this wrapper for throughput figures.
With --recheck it also replaces the fetch long poll by `_long_poll_rechecked` (an experiment: see there).
Usage (as a wrapper): python bench/_replication_probe.py DIR [--recheck] <python> -m pylog broker ...
"""
from __future__ import annotations

import asyncio
import json
import os
import runpy
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import broker.apis.fetch as fetch_api  # noqa: E402
from broker.replication import manager, peer_connection, replica_fetcher  # noqa: E402

BUCKETS_MS = (0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 1e9)


class Timer:
    """Count, total and a histogram (milliseconds) of one kind of interval."""

    def __init__(self) -> None:
        self.count = 0
        self.total_ms = 0.0
        self.hist = [0] * len(BUCKETS_MS)

    def add(self, ms: float) -> None:
        self.count += 1
        self.total_ms += ms
        for i, edge in enumerate(BUCKETS_MS):
            if ms <= edge:
                self.hist[i] += 1
                break

    def doc(self) -> dict[str, Any]:
        return {"count": self.count, "total_ms": self.total_ms, "hist": list(self.hist)}


TIMERS: dict[str, Timer] = {k: Timer() for k in (
    "follower_fetch_round", "follower_round_trip", "follower_apply", "leader_replica_long_poll",
    "leader_acks_all_wait")}
COUNTS: dict[str, int] = {k: 0 for k in (
    "follower_responses_with_data", "follower_responses_empty", "follower_bytes", "leader_replica_reads",
    "leader_replica_bytes", "leader_acks_all_immediate", "leader_acks_all_waited", "long_poll_recheck_hits")}


def _wrap_async(fn: Callable[..., Any], timer: str) -> Callable[..., Any]:
    async def wrapped(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return await fn(*a, **kw)
        finally:
            TIMERS[timer].add((time.perf_counter() - t0) * 1000)
    return wrapped


replica_fetcher.ReplicaFetcher._fetch = _wrap_async(replica_fetcher.ReplicaFetcher._fetch,  # type: ignore[method-assign]
                                                    "follower_fetch_round")
peer_connection.PeerConnection.request_raw = _wrap_async(  # type: ignore[method-assign]
    peer_connection.PeerConnection.request_raw, "follower_round_trip")

_apply = replica_fetcher.ReplicaFetcher._apply


def _apply_timed(self: Any, fp: Any, records: Any, high_watermark: int, leader_log_start: int) -> None:
    n = len(records) if records is not None else 0
    COUNTS["follower_responses_with_data" if n else "follower_responses_empty"] += 1
    COUNTS["follower_bytes"] += n
    t0 = time.perf_counter()
    try:
        _apply(self, fp, records, high_watermark, leader_log_start)
    finally:
        TIMERS["follower_apply"].add((time.perf_counter() - t0) * 1000)


replica_fetcher.ReplicaFetcher._apply = _apply_timed  # type: ignore[method-assign]

_read_all = fetch_api._read_all


def _read_all_counted(ctx: Any, fc: Any, max_bytes: int, read_uncommitted: bool, replica_id: int = -1) -> Any:
    out = _read_all(ctx, fc, max_bytes, read_uncommitted, replica_id)
    if replica_id >= 0:
        COUNTS["leader_replica_reads"] += 1
        COUNTS["leader_replica_bytes"] += out[1]
    return out


fetch_api._read_all = _read_all_counted
_long_poll = fetch_api._long_poll
RECHECK = "--recheck" in sys.argv[1:3]


async def _long_poll_timed(ctx: Any, req: Any, fc: Any, max_bytes: int, min_bytes: int, deadline: float,
                           read_uncommitted: bool, replica_id: int) -> Any:
    t0 = time.perf_counter()
    try:
        inner = _long_poll_rechecked if RECHECK else _long_poll
        return await inner(ctx, req, fc, max_bytes, min_bytes, deadline, read_uncommitted, replica_id)
    finally:
        if replica_id >= 0:
            TIMERS["leader_replica_long_poll"].add((time.perf_counter() - t0) * 1000)




async def _long_poll_rechecked(ctx: Any, req: Any, fc: Any, max_bytes: int, min_bytes: int, deadline: float,
                               read_uncommitted: bool, replica_id: int) -> Any:
    """The experiment of `--recheck` (not the shipped code): `_long_poll` that registers its waiter and then
    reads again before it waits, so an append between the handler's first read and the start of this task
    (the waiter was not registered yet: a lost wake-up) is seen at once instead of at max_wait."""
    keys = list(fc.wanted)
    first = True
    while True:
        remaining = deadline - time.monotonic()
        if remaining > 0:
            fut = ctx.replicas.waiter(keys)
            try:
                if first:
                    first = False
                    topics, total, any_error = fetch_api._read_all(ctx, fc, max_bytes, read_uncommitted, replica_id)
                    if total >= min_bytes or any_error:
                        COUNTS["long_poll_recheck_hits"] += 1
                        return fetch_api._respond(req, fc, topics)
                await asyncio.wait_for(fut, remaining)
            except asyncio.TimeoutError:
                pass
            finally:
                ctx.replicas.discard(fut, keys)
        topics, total, any_error = fetch_api._read_all(ctx, fc, max_bytes, read_uncommitted, replica_id)
        if total >= min_bytes or any_error or deadline - time.monotonic() <= 0:
            return fetch_api._respond(req, fc, topics)


fetch_api._long_poll = _long_poll_timed
_wait_replicated = manager.Replication.wait_replicated


def _wait_replicated_timed(self: Any, role: Any, end_offset: int, timeout_ms: int) -> Any:
    fut = _wait_replicated(self, role, end_offset, timeout_ms)
    if fut is None:
        COUNTS["leader_acks_all_immediate"] += 1
        return None
    COUNTS["leader_acks_all_waited"] += 1
    t0 = time.perf_counter()
    fut.add_done_callback(lambda _f: TIMERS["leader_acks_all_wait"].add((time.perf_counter() - t0) * 1000))
    return fut


manager.Replication.wait_replicated = _wait_replicated_timed  # type: ignore[method-assign]


def _dump_forever(path: Path) -> None:
    while True:
        doc = {"at": time.time(), "counts": dict(COUNTS), "timers": {k: t.doc() for k, t in TIMERS.items()},
               "buckets_ms": list(BUCKETS_MS)}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        tmp.replace(path)
        time.sleep(0.5)


args = [a for a in sys.argv[1:3] if a != "--recheck"] + sys.argv[3:]
if len(args) < 4 or args[2] != "-m":
    raise SystemExit("usage: _replication_probe.py DIR [--recheck] <python> -m pylog ...")
out_dir = Path(args[0])
out_dir.mkdir(parents=True, exist_ok=True)
threading.Thread(target=_dump_forever, args=(out_dir / f"probe-{os.getpid()}.json",), daemon=True).start()
sys.argv = [args[3]] + args[4:]
runpy.run_module(args[3], run_name="__main__", alter_sys=True)
