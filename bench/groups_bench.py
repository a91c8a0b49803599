"""Consumer group benchmarks against a real `pylog broker` process.

1. rebalance: three confluent-kafka consumers subscribe at once; seconds until all three hold their
   assignment (target: group.initial.rebalance.delay.ms + 1 s), with the default delay and with 0.
2. heartbeats: G groups x 3 raw-protocol members (asyncio sockets speaking JoinGroup/SyncGroup/
   Heartbeat through kio, not librdkafka: 300 librdkafka consumers are too heavy for 2 cores)
   heartbeating every 3 s; counts rebalances after the groups are stable (target: 0) and heartbeat
   latency.
3. commits: OffsetCommit requests/s from C connections, one request in flight per connection,
   generation -1 commits of one partition each (the Spark connector's kind).

Usage: .venv/bin/python bench/groups_bench.py [--groups 100] [--heartbeat-seconds 60] [--commit-seconds 10]
Never imports broker code: the broker is a separate process, as users run it.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime
import io
import json
import os
import statistics
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v7.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.offset_commit.v8.request import (
    OffsetCommitRequest,
    OffsetCommitRequestPartition,
    OffsetCommitRequestTopic,
)
from kio.schema.sync_group.v5.request import SyncGroupRequest, SyncGroupRequestAssignment
from kio.serial import entity_reader, entity_writer

from pylog.launch.process import BrokerProcess

REPO = Path(__file__).resolve().parent.parent
MS = datetime.timedelta(milliseconds=1)


def Broker(data_dir: Path, sets: dict[str, Any]) -> BrokerProcess:
    """A pylog broker process with `sets` applied (the same launcher as the tests and the demo)."""
    return BrokerProcess(data_dir, settings=sets).start(timeout=60)


class AsyncWire:
    """One connection, one request in flight: kio entities in, kio entities out."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer, self.correlation = reader, writer, 0

    @classmethod
    async def connect(cls, port: int) -> "AsyncWire":
        return cls(*await asyncio.open_connection("127.0.0.1", port))

    async def request(self, body: Any) -> Any:
        self.correlation += 1
        header = struct.pack(">hhih", body.__api_key__, body.__version__, self.correlation, 5) + b"bench"
        if body.__flexible__:
            header += b"\x00"
        buf = io.BytesIO()
        entity_writer(type(body))(buf, body)
        payload = header + buf.getvalue()
        self.writer.write(struct.pack(">i", len(payload)) + payload)
        (n,) = struct.unpack(">i", await self.reader.readexactly(4))
        frame = await self.reader.readexactly(n)
        schema = load_response_schema(body.__api_key__, body.__version__)
        return entity_reader(schema)(frame, 5 if schema.__flexible__ else 4)[0]

    def close(self) -> None:
        self.writer.close()


# ---------------------------------------------------------------- 1. rebalance time
def bench_rebalance(tmp: Path, delay_ms: int, heartbeat_ms: int) -> float:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic

    broker = Broker(tmp / f"rebalance-{delay_ms}-{heartbeat_ms}", {"group.initial.rebalance.delay.ms": delay_ms})
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("six", 6, 1)])["six"].result(15)
        consumers = [Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "session.timeout.ms": 10000,
                               "heartbeat.interval.ms": heartbeat_ms,
                               "partition.assignment.strategy": "range"}) for _ in range(3)]
        started = time.monotonic()
        for c in consumers:
            c.subscribe(["six"])
        while True:
            for c in consumers:
                c.poll(0.01)
            parts = [len(c.assignment()) for c in consumers]
            if all(parts) and sum(parts) == 6:
                took = time.monotonic() - started
                break
            if time.monotonic() - started > 60:
                raise TimeoutError("no assignment after 60 s")
        for c in consumers:
            c.close()
        return took
    finally:
        broker.stop()


# ---------------------------------------------------------------- 2. heartbeats
class RawMember:
    def __init__(self, group: str, stats: dict[str, Any]) -> None:
        self.group, self.stats = group, stats
        self.member_id, self.generation = "", -1

    async def join(self, wire: AsyncWire) -> None:
        while True:
            resp = await wire.request(JoinGroupRequest(
                group_id=self.group, session_timeout=10000 * MS, rebalance_timeout=10000 * MS,
                member_id=self.member_id, group_instance_id=None, protocol_type="consumer",
                protocols=(JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01\x00\x00\x00\x00\xff\xff\xff\xff"),)))
            if resp.error_code == ErrorCode.member_id_required:
                self.member_id = resp.member_id
                continue
            if resp.error_code != ErrorCode.none:
                raise RuntimeError(f"JoinGroup failed: {resp.error_code}")
            self.member_id, self.generation = resp.member_id, resp.generation_id
            assignments = tuple(SyncGroupRequestAssignment(member_id=m.member_id, assignment=b"x") for m in resp.members)
            sync = await wire.request(SyncGroupRequest(
                group_id=self.group, generation_id=self.generation, member_id=self.member_id, group_instance_id=None,
                protocol_type="consumer", protocol_name="range", assignments=assignments))
            if sync.error_code == ErrorCode.none:
                return
            if sync.error_code != ErrorCode.rebalance_in_progress:
                raise RuntimeError(f"SyncGroup failed: {sync.error_code}")

    async def run(self, port: int, until: float, measure_from: float) -> None:
        wire = await AsyncWire.connect(port)
        try:
            await self.join(wire)
            while time.monotonic() < until:
                await asyncio.sleep(3.0)
                sent = time.monotonic()
                resp = await wire.request(HeartbeatRequest(group_id=self.group, generation_id=self.generation,
                                                           member_id=self.member_id, group_instance_id=None))
                if sent >= measure_from:
                    self.stats["latencies"].append(time.monotonic() - sent)
                if resp.error_code != ErrorCode.none:
                    if sent >= measure_from:
                        self.stats["rebalances"] += 1
                    await self.join(wire)
        finally:
            wire.close()


async def bench_heartbeats(port: int, groups: int, seconds: float) -> dict[str, Any]:
    stats: dict[str, Any] = {"latencies": [], "rebalances": 0}
    warmup = 12.0
    start = time.monotonic()
    members = [RawMember(f"hb-{g}", stats) for g in range(groups) for _ in range(3)]
    await asyncio.gather(*(m.run(port, start + warmup + seconds, start + warmup) for m in members))
    lat = sorted(stats["latencies"])
    return {"groups": groups, "members": len(members), "measured_s": seconds, "heartbeats": len(lat),
            "rebalances_after_stable": stats["rebalances"],
            "heartbeat_p50_ms": round(statistics.median(lat) * 1000, 2) if lat else None,
            "heartbeat_p99_ms": round(lat[int(len(lat) * 0.99) - 1] * 1000, 2) if lat else None}


# ---------------------------------------------------------------- 3. commits
async def bench_commits(port: int, connections: int, seconds: float) -> dict[str, Any]:
    count = 0
    until = time.monotonic() + seconds

    async def worker(i: int) -> None:
        nonlocal count
        wire = await AsyncWire.connect(port)
        offset = 0
        try:
            while time.monotonic() < until:
                offset += 1
                resp = await wire.request(OffsetCommitRequest(
                    group_id=f"commit-{i}", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                    topics=(OffsetCommitRequestTopic(name="bench", partitions=(OffsetCommitRequestPartition(
                        partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                        committed_metadata="spark-batch"),)),)))
                assert resp.topics[0].partitions[0].error_code == ErrorCode.none
                count += 1
        finally:
            wire.close()
    started = time.monotonic()
    await asyncio.gather(*(worker(i) for i in range(connections)))
    elapsed = time.monotonic() - started
    return {"connections": connections, "commits": count, "seconds": round(elapsed, 2),
            "commits_per_s": round(count / elapsed)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--heartbeat-seconds", type=float, default=60.0)
    parser.add_argument("--commit-seconds", type=float, default=10.0)
    parser.add_argument("--commit-connections", type=int, default=4)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="groups-bench-") as d:
        tmp = Path(d)
        # With delay 0 the first member's generation completes alone and the others' joins are only
        # seen by it at its next heartbeat: heartbeat.interval.ms bounds that case, as in Kafka.
        for delay, heartbeat_ms in ((3000, 3000), (0, 3000), (0, 300)):
            took = bench_rebalance(tmp, delay, heartbeat_ms)
            results[f"rebalance_3_members_delay_{delay}ms_heartbeat_{heartbeat_ms}ms_s"] = round(took, 3)
            print(f"rebalance, 3 members, group.initial.rebalance.delay.ms={delay}, heartbeat.interval.ms="
                  f"{heartbeat_ms}: {took:.3f} s (target < {delay / 1000 + 1:.1f} s)", flush=True)
        broker = Broker(tmp / "main", {})
        try:
            from confluent_kafka.admin import AdminClient, NewTopic
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})   # keep a reference while the future runs
            admin.create_topics([NewTopic("bench", 1, 1)])["bench"].result(15)
            hb = asyncio.run(bench_heartbeats(broker.port, args.groups, args.heartbeat_seconds))
            results["heartbeats"] = hb
            print(f"heartbeats: {hb}", flush=True)
            cm = asyncio.run(bench_commits(broker.port, args.commit_connections, args.commit_seconds))
            results["commits"] = cm
            print(f"commits: {cm}", flush=True)
            results["broker_cpu_s"] = _cpu_seconds(broker.proc.pid)
        finally:
            broker.stop()
    print(json.dumps(results))
    return 0


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)


if __name__ == "__main__":
    sys.exit(main())
