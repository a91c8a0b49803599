"""Moving a large partition between brokers (issue 31): pylog against Apache Kafka 3.9 (ZooKeeper mode), alternating
system by system within each repetition, on fresh three-broker clusters.

Each repetition and system: a one-partition topic on broker 1 alone (rf 1), filled with --mb MiB of --size-byte
records (one producer process, acks=1, no compression), then AlterPartitionReassignments to broker 2 alone (the
same request for both, sent by pylog's wire admin), without a throttle. Timed from the request to the move's end:
ListPartitionReassignments no longer lists it and Metadata names broker 2 alone. Then checked: broker 2's end offset
is the records written, its segment files hold as many bytes as broker 1's did, and broker 1's copy is deleted (its
partition directory gone). Figures: seconds, MiB/s of
log moved, and the brokers' CPU over the move (/proc of each broker process: the copy's cost on both ends).

Usage:
  .venv/bin/python bench/move_bench.py --mb 1024 --reps 3 --out bench/results/move_bench-DATE.json
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
from cluster_bench import SYSTEMS, broker_cpu, call_worker, machine, make_cluster  # noqa: E402

SETTINGS: dict[str, object] = {"auto.leader.rebalance.enable": "false", "offsets.topic.replication.factor": 1,
                               "offsets.topic.num.partitions": 1, "log.segment.bytes": 256 * 1024 * 1024,
                               "auto.create.topics.enable": "false"}


def partition_dir(cluster: Any, broker_id: int, topic: str) -> Path:
    """The partition's directory on a broker (Kafka's under its work directory's logs/, pylog's in its data dir)."""
    broker = cluster.broker(broker_id)
    roots = [broker.workdir / "logs", getattr(broker, "data_dir", broker.workdir)]
    return next((root / f"{topic}-0" for root in roots if (root / f"{topic}-0").exists()), roots[0] / f"{topic}-0")


def partition_dir_exists(cluster: Any, broker_id: int, topic: str) -> bool:
    return partition_dir(cluster, broker_id, topic).exists()


def log_bytes(cluster: Any, broker_id: int, topic: str) -> int:
    """The bytes of the partition's segment files (.log) on a broker."""
    return sum(f.stat().st_size for f in partition_dir(cluster, broker_id, topic).glob("*.log"))


def end_offset(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "move-bench"})
    try:
        return int(c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1])
    finally:
        c.close()


def move(system: str, rep: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic
    from pylog.tools.wire_admin import WireAdmin

    cluster = make_cluster(system, workdir / f"{system}-{rep}", 3, SETTINGS, 6000)
    with cluster:
        topic = f"move-{rep}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[[1]])])[topic].result(30)
        count = args.mb * 1024 * 1024 // args.size
        produced = call_worker({"bootstrap": cluster.bootstrap, "topic": topic, "count": count, "size": args.size,
                                "acks": "1", "idempotent": False}, timeout_s=1800)
        assert "failed" not in produced, produced
        written = end_offset(cluster.bootstrap, topic)
        assert produced["errors"] == 0 and written == count + 1, \
            f"{system}: {written} records in the topic, {count} + 1 (the worker's warm-up record) produced"
        count = written
        time.sleep(args.settle_s)                      # the produce's tail flushed, the brokers idle again
        source_bytes = log_bytes(cluster, 1, topic)
        cpu0 = broker_cpu(cluster)
        t0 = time.monotonic()
        with WireAdmin(cluster.bootstrap) as wire:
            answer = wire.alter_reassignments({(topic, 0): [2]})
            assert all(code == 0 for code, _ in answer.values()), answer
            while (topic, 0) in wire.list_reassignments() or \
                    [r for r in (cluster.partition(topic) or _Absent()).replicas] != [2]:
                if time.monotonic() - t0 > args.timeout_s:
                    raise TimeoutError(f"{system}: the move did not complete in {args.timeout_s}s")
                time.sleep(0.05)
        seconds = time.monotonic() - t0
        cpu1 = broker_cpu(cluster)
        moved = end_offset(cluster.broker(2).bootstrap, topic)
        target_bytes = log_bytes(cluster, 2, topic)
        deadline = time.monotonic() + 60
        while partition_dir_exists(cluster, 1, topic) and time.monotonic() < deadline:
            time.sleep(0.2)
        return {"system": system, "rep": rep, "records": count, "mib": args.mb, "produce": produced,
                "seconds": round(seconds, 2), "mib_per_s": round(args.mb / seconds, 1),
                "broker_cpu_s": {b: round(cpu1[b] - cpu0[b], 2) for b in cpu1},
                "end_offset_on_2": moved, "log_bytes": [source_bytes, target_bytes],
                "complete": moved == count and target_bytes == source_bytes,
                "source_copy_deleted": not partition_dir_exists(cluster, 1, topic)}


class _Absent:
    replicas: list[int] = []


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mb", type=int, default=1024)
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--settle-s", type=float, default=5.0)
    p.add_argument("--timeout-s", type=float, default=900.0)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    systems = args.systems.split(",")
    runs: list[dict[str, Any]] = []
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    with tempfile.TemporaryDirectory(prefix="move-bench-") as tmp:
        for rep in range(args.reps):
            order = systems if rep % 2 == 0 else list(reversed(systems))
            for system in order:
                run = move(system, rep, args, Path(tmp))
                run["loadavg"] = os.getloadavg()
                runs.append(run)
                print(json.dumps({k: v for k, v in run.items() if k != "produce"}), flush=True)
    summary: dict[str, Any] = {}
    for system in systems:
        secs = sorted(r["seconds"] for r in runs if r["system"] == system)
        summary[system] = {"median_s": secs[len(secs) // 2], "min_s": secs[0], "max_s": secs[-1],
                           "all_complete": all(r["complete"] and r["source_copy_deleted"]
                                               for r in runs if r["system"] == system)}
    if "kafka" in summary and "pylog" in summary:
        per_rep = [next(r["seconds"] for r in runs if r["system"] == "kafka" and r["rep"] == i) /
                   next(r["seconds"] for r in runs if r["system"] == "pylog" and r["rep"] == i) for i in range(args.reps)]
        summary["kafka_over_pylog_time"] = {"median": sorted(per_rep)[len(per_rep) // 2],
                                            "per_rep": [round(x, 2) for x in per_rep]}
    print(json.dumps(summary, indent=1))
    if args.out:
        _common.write_json(args.out, {"started": started, "command": " ".join(sys.argv), "machine": machine(),
                                      "args": vars(args) | {"out": str(args.out)}, "runs": runs,
                                      "summary": summary})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
