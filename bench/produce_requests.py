"""Small-request rate: raw Produce v9 requests of one 100 B record each, pylog and Tansu alternately.

What librdkafka does with linger.ms=0 at a moderate rate, without the client library in the way:
one connection sends `--window` requests ahead (1 = strict request/response ping-pong), and the
script reports requests/s and the broker's CPU microseconds per request (/proc/PID/stat).

Usage:
  .venv/bin/python bench/produce_requests.py                       # 3 reps, windows 1 and 64
  .venv/bin/python bench/produce_requests.py --requests 50000 --windows 1,16,256 --brokers pylog
"""
from __future__ import annotations

import argparse
import datetime as dt
import io
import socket
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _common  # noqa: E402


def _produce_frame(topic: str) -> bytes:
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.serial import entity_writer

    body = ProduceRequest(transactional_id=None, acks=1, timeout=dt.timedelta(seconds=5), topic_data=(
        TopicProduceData(name=topic, partition_data=(
            PartitionProduceData(index=0, records=_common.encode_batch([b"x" * 100])),)),))
    buf = io.BytesIO()
    entity_writer(ProduceRequest)(buf, body)
    payload = struct.pack(">hhih", 0, 9, 1, 5) + b"bench" + b"\x00" + buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


def run_once(broker: _common.BrokerProc, requests: int, window: int) -> dict:
    topic = f"req-{time.monotonic_ns()}"
    _common.create_topic(broker.bootstrap, topic, 1)
    frame = _produce_frame(topic)
    s = socket.create_connection(("127.0.0.1", broker.port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rbuf = bytearray()
    sent = received = 0
    cpu0 = _common.cpu_seconds(broker.proc.pid)
    started = time.perf_counter()
    while received < requests:
        k = min(window - (sent - received), requests - sent)
        if k > 0:
            s.sendall(frame * k)
            sent += k
        data = s.recv(1 << 20)
        if not data:
            raise RuntimeError(f"{broker.name} closed the connection")
        rbuf += data
        while len(rbuf) >= 4:
            (n,) = struct.unpack_from(">i", rbuf)
            if len(rbuf) < 4 + n:
                break
            del rbuf[:4 + n]
            received += 1
    elapsed = time.perf_counter() - started
    cpu = _common.cpu_seconds(broker.proc.pid) - cpu0
    s.close()
    _common.delete_topic(broker.bootstrap, topic)
    return {"requests_per_s": requests / elapsed, "cpu_us_per_request": cpu * 1e6 / requests}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=30_000)
    ap.add_argument("--windows", default="1,64")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--brokers", default="pylog,tansu")
    args = ap.parse_args()
    names = args.brokers.split(",")
    with tempfile.TemporaryDirectory(prefix="pylog-req-") as tmp:
        brokers = {}
        if "pylog" in names:
            brokers["pylog"] = _common.start_pylog(Path(tmp) / "data")
        if "tansu" in names:
            brokers["tansu"] = _common.start_tansu(Path(tmp) / "tansu.log")
        try:
            with open("/proc/loadavg") as f:
                print(f"load average at start: {f.read().split()[0]}")
            for window in (int(w) for w in args.windows.split(",")):
                results: dict[str, list[dict]] = {n: [] for n in brokers}
                for _ in range(args.reps):
                    for name, b in brokers.items():
                        results[name].append(run_once(b, args.requests, window))
                for name, rs in results.items():
                    rate = statistics.median(r["requests_per_s"] for r in rs)
                    cpu = statistics.median(r["cpu_us_per_request"] for r in rs)
                    print(f"window {window:>4}  {name:6} {rate:>10,.0f} req/s  {cpu:7.1f} us CPU/request (median of {len(rs)})")
        finally:
            for b in brokers.values():
                b.stop()


if __name__ == "__main__":
    main()
