"""Broker startup benchmark: start time and memory of a pylog broker holding 1,000 partitions.

Builds a data dir through a running broker (100 topics x 10 partitions created with AdminClient,
a few records produced to every partition), stops it cleanly (SIGTERM), then measures for each
start:

- ready_s: seconds from process start (Popen) until the port accepts connections AND a Metadata
  request (v1, all topics) answers with all 1,000 partitions;
- port_s: seconds until the port accepts connections;
- RSS (VmRSS of /proc/PID/status) right after ready and 2 s later, and the peak (VmHWM);

both after a clean shutdown and after a kill -9 (each crash start follows a broker that wrote a
record to every partition and was then killed with SIGKILL, so every partition goes through the
recovery path). Targets: start < 5 s, RSS < 300 MB.

Usage:
  .venv/bin/python bench/broker_startup.py [--topics 100] [--partitions 10] [--records 3] [--reps 3]
                                           [--workdir DIR] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

TARGET_START_S = 5.0
TARGET_RSS_MB = 300.0


def metadata_v1_partitions(port: int, timeout_s: float = 5.0) -> int:
    """Send Metadata v1 for all topics on a raw socket; return the number of partitions without error."""
    client_id = b"bench-startup"
    body = struct.pack(">hhih", 3, 1, 7, len(client_id)) + client_id + struct.pack(">i", -1)
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv_exact(s, 4))[0]
        buf = _recv_exact(s, size)
    pos = 0

    def take(fmt: str):
        nonlocal pos
        vals = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return vals[0] if len(vals) == 1 else vals

    def string() -> None:
        nonlocal pos
        n = take(">h")
        pos += max(n, 0)

    if take(">i") != 7:
        raise RuntimeError("correlation id mismatch")
    for _ in range(take(">i")):  # brokers
        take(">i"); string(); take(">i"); string()
    take(">i")  # controller id
    ok = 0
    for _ in range(take(">i")):  # topics
        t_err = take(">h"); string(); take(">b")
        for _ in range(take(">i")):
            p_err, _idx, _leader = take(">hii")
            for _arrays in range(2):  # replica nodes, isr nodes
                n = take(">i")
                pos += 4 * max(n, 0)
            ok += t_err == 0 and p_err == 0
    return ok


def _recv_exact(s: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return bytes(out)


def timed_start(data_dir: Path, workdir: Path, expected: int) -> tuple[_common.BrokerProc, dict]:
    """Start pylog and time it until Metadata lists `expected` partitions."""
    port = _common.free_port()
    t0 = time.monotonic()
    bp = _common.start_pylog(data_dir, port=port, log_path=workdir / "pylog.log", wait=False)
    _common.wait_port(port, bp.proc, timeout_s=120, poll_s=0.002)
    port_s = time.monotonic() - t0
    last_error = None
    while True:
        if time.monotonic() - t0 > 120:
            bp.kill9()
            raise TimeoutError(f"no complete Metadata after 120 s: {last_error}")
        try:
            n = metadata_v1_partitions(port)
            if n >= expected:
                break
            last_error = f"{n} partitions"
        except (OSError, RuntimeError, struct.error) as e:
            last_error = repr(e)
        time.sleep(0.002)
    ready_s = time.monotonic() - t0
    rss_ready = _common.rss_mb(bp.proc.pid)
    time.sleep(2.0)
    fig = {"port_s": round(port_s, 3), "ready_s": round(ready_s, 3), "rss_ready_mb": round(rss_ready, 1),
           "rss_2s_mb": round(_common.rss_mb(bp.proc.pid), 1), "hwm_mb": round(_common.rss_mb(bp.proc.pid, "VmHWM"), 1)}
    return bp, fig


def populate(bootstrap: str, topics: list[str], partitions: int, records: int) -> float:
    """Create the topics (one CreateTopics request) and write `records` records to each partition."""
    from confluent_kafka.admin import AdminClient, NewTopic

    t0 = time.monotonic()
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(t, num_partitions=partitions, replication_factor=1) for t in topics],
                                  operation_timeout=120, request_timeout=120)
    for f in futures.values():
        f.result(180)
    for t in topics:
        _common.wait_topic(admin, t, partitions, 60)
    produce_all(bootstrap, topics, partitions, records)
    return time.monotonic() - t0


def produce_all(bootstrap: str, topics: list[str], partitions: int, records: int) -> None:
    from confluent_kafka import Producer

    errors: list[str] = []
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": 1})
    for t in topics:
        for part in range(partitions):
            for i in range(records):
                p.produce(t, value=f"{t}-{part}-{i}".encode() * 4, partition=part,
                          on_delivery=lambda err, _m: errors.append(str(err)) if err else None)
        p.poll(0)
    left = p.flush(120)
    if errors or left:
        raise RuntimeError(f"produce failed: {left} undelivered, errors {errors[:3]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=10, help="partitions per topic")
    ap.add_argument("--records", type=int, default=3, help="records written to every partition while populating")
    ap.add_argument("--reps", type=int, default=3, help="measured starts per path (clean, kill -9)")
    ap.add_argument("--workdir", type=Path, default=None, help="parent of the temporary data dir")
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON result file (default bench/results/broker_startup-<date>.json)")
    args = ap.parse_args()
    expected = args.topics * args.partitions
    stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    out = args.out or _common.REPO / "bench" / "results" / f"broker_startup-{stamp}.json"
    topics = [f"startup-{i:03d}" for i in range(args.topics)]
    runs: dict[str, list[dict]] = {"clean": [], "kill9": []}
    with tempfile.TemporaryDirectory(prefix="pylog-startup-", dir=args.workdir) as tmp:
        workdir = Path(tmp)
        data = workdir / "data"
        bp = _common.start_pylog(data, log_path=workdir / "pylog.log")
        try:
            populate_s = populate(bp.bootstrap, topics, args.partitions, args.records)
        finally:
            code = bp.stop(120)
        print(f"populated {expected} partitions in {populate_s:.1f}s; clean stop exit code {code}", file=sys.stderr)
        du = sum(f.stat().st_size for f in data.rglob("*") if f.is_file())
        files = sum(1 for f in data.rglob("*") if f.is_file())

        for rep in range(args.reps):
            bp, fig = timed_start(data, workdir, expected)
            fig["stop_s"] = _stop_timed(bp)
            fig["exit_code"] = bp.proc.returncode
            runs["clean"].append(fig)
            print(f"  clean start {rep + 1}: {fig}", file=sys.stderr)

        # crash path: a broker that wrote to every partition, then SIGKILL
        bp = _common.start_pylog(data, log_path=workdir / "pylog.log")
        produce_all(bp.bootstrap, topics, args.partitions, 1)
        bp.kill9()
        for rep in range(args.reps):
            bp, fig = timed_start(data, workdir, expected)
            produce_all(bp.bootstrap, topics, args.partitions, 1)
            bp.kill9()
            runs["kill9"].append(fig)
            print(f"  start after kill -9 {rep + 1}: {fig}", file=sys.stderr)
        # final check: a clean start after the crashes still sees every record
        bp, _ = timed_start(data, workdir, expected)
        bp.stop(120)

    summary = {}
    for path, figs in runs.items():
        summary[path] = {k: statistics.median(f[k] for f in figs) for k in ("port_s", "ready_s", "rss_ready_mb", "rss_2s_mb", "hwm_mb")}
        summary[path]["max_ready_s"] = max(f["ready_s"] for f in figs)
        summary[path]["max_hwm_mb"] = max(f["hwm_mb"] for f in figs)
        summary[path]["meets_start_target"] = summary[path]["max_ready_s"] < TARGET_START_S
        summary[path]["meets_rss_target"] = summary[path]["max_hwm_mb"] < TARGET_RSS_MB
    doc = {
        "benchmark": "broker_startup",
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": shlex.join([sys.executable] + sys.argv),
        "cores": os.cpu_count(),
        "settings": {"topics": args.topics, "partitions_per_topic": args.partitions, "partitions": expected,
                     "records_per_partition": args.records, "reps": args.reps},
        "data_dir": {"bytes": du, "files": files},
        "targets": {"start_s": TARGET_START_S, "rss_mb": TARGET_RSS_MB},
        "summary": summary,
        "runs": runs,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    print_table(doc)
    print(f"results written to {out}")
    return 0


def _stop_timed(bp: _common.BrokerProc) -> float:
    t0 = time.monotonic()
    bp.stop(120)
    return round(time.monotonic() - t0, 3)


def print_table(doc: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    s = doc["settings"]
    t = Table(title=f"pylog start with {s['partitions']} partitions ({doc['data_dir']['files']} files), "
                    f"median of {s['reps']} ({doc['cores']} cores)")
    for col in ("path", "port open s", "ready s (Metadata ok)", "max ready s", "RSS at ready MB", "RSS +2 s MB",
                "peak RSS MB", "targets (<5 s, <300 MB)"):
        t.add_column(col, justify="left" if col == "path" else "right")
    for path, label in (("clean", "after clean shutdown"), ("kill9", "after kill -9")):
        m = doc["summary"][path]
        ok = ("ok" if m["meets_start_target"] else "START MISSED") + " / " + ("ok" if m["meets_rss_target"] else "RSS MISSED")
        t.add_row(label, f"{m['port_s']:.2f}", f"{m['ready_s']:.2f}", f"{m['max_ready_s']:.2f}",
                  f"{m['rss_ready_mb']:.0f}", f"{m['rss_2s_mb']:.0f}", f"{m['max_hwm_mb']:.0f}", ok)
    Console(width=150).print(t)


if __name__ == "__main__":
    sys.exit(main())
