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
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
from cluster_bench import SYSTEMS, alternating, broker_cpu, call_worker, machine, make_cluster  # noqa: E402

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


def set_throttle(bootstrap: str, topic: str, rate: int, source: int, target: int) -> None:
    """What kafka-reassign-partitions --throttle sets: the rate on both brokers, the throttled replicas on the topic
    (the leader's side on the source, the follower's on the target)."""
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resources = [ConfigResource(ResourceType.BROKER, str(b), incremental_configs=[
        ConfigEntry(f"{side}.replication.throttled.rate", str(rate), incremental_operation=AlterConfigOpType.SET)
        for side in ("leader", "follower")]) for b in (source, target)]
    resources.append(ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("leader.replication.throttled.replicas", f"0:{source}", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("follower.replication.throttled.replicas", f"0:{target}",
                    incremental_operation=AlterConfigOpType.SET)]))
    for resource in resources:                         # one broker resource per call (librdkafka's rule)
        for f in admin.incremental_alter_configs([resource]).values():
            f.result(30)


def throttled(system: str, rep: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """The move throttled to --throttle-mb MiB/s while a producer writes another topic (leaders on brokers 1 and 2):
    its throughput during the move against the same producer with no move, in pairs (idle, moving), the move
    cancelled after each moving run; and how fast the throttled copy went."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from pylog.tools.wire_admin import WireAdmin

    cluster = make_cluster(system, workdir / f"{system}-t{rep}", 3, SETTINGS, 6000)
    with cluster:
        moving, other = f"moving-{rep}", f"other-{rep}"
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(moving, 1, replica_assignment=[[1]]),
                             NewTopic(other, 2, replica_assignment=[[1], [2]])])[moving].result(30)
        count = args.mb * 1024 * 1024 // args.size
        filled = call_worker({"bootstrap": cluster.bootstrap, "topic": moving, "count": count, "size": args.size,
                              "acks": "1", "idempotent": False}, timeout_s=1800)
        assert "failed" not in filled and filled["errors"] == 0, filled
        set_throttle(cluster.bootstrap, moving, args.throttle_mb * 1024 * 1024, 1, 2)
        time.sleep(args.settle_s)

        def probe() -> float:
            r = call_worker({"bootstrap": cluster.bootstrap, "topic": other, "count": args.probe_records,
                             "size": args.size, "acks": "1", "idempotent": False}, timeout_s=600)
            assert "failed" not in r and r["errors"] == 0, r
            return float(r["records_per_s"])

        pairs = []
        copy_rates = []
        with WireAdmin(cluster.bootstrap) as wire:
            for _ in range(args.pairs):
                idle = probe()
                assert wire.alter_reassignments({(moving, 0): [2]})[(moving, 0)][0] == 0
                time.sleep(1.0)
                t0, b0 = time.monotonic(), log_bytes(cluster, 2, moving)
                during = probe()
                copied = (log_bytes(cluster, 2, moving) - b0) / (time.monotonic() - t0) / 2 ** 20
                assert (moving, 0) in wire.list_reassignments(), "the throttled move ended before the probe did"
                assert wire.alter_reassignments({(moving, 0): None})[(moving, 0)][0] == 0      # cancelled
                deadline = time.monotonic() + 60
                while (moving, 0) in wire.list_reassignments() and time.monotonic() < deadline:
                    time.sleep(0.1)
                time.sleep(args.settle_s)
                pairs.append({"idle_rps": round(idle), "moving_rps": round(during), "ratio": round(during / idle, 3)})
                copy_rates.append(round(copied, 1))
        return {"system": system, "rep": rep, "mode": "throttled", "throttle_mib_s": args.throttle_mb,
                "pairs": pairs, "copy_mib_s": copy_rates}


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
    p.add_argument("--throttle-mb", type=int, default=0,
                   help="instead: a move throttled to this many MiB/s beside a producer on another topic")
    p.add_argument("--probe-records", type=int, default=300_000)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    systems = args.systems.split(",")
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    runs = alternating(systems, args.reps, "move-bench-",
                       lambda system, rep, tmp: (throttled if args.throttle_mb else move)(system, rep, args, tmp))
    summary: dict[str, Any] = {}
    if args.throttle_mb:
        for system in systems:
            ratios = sorted(p["ratio"] for r in runs if r["system"] == system for p in r["pairs"])
            copies = sorted(c for r in runs if r["system"] == system for c in r["copy_mib_s"])
            summary[system] = {"moving_over_idle_median": ratios[len(ratios) // 2], "min": ratios[0],
                               "max": ratios[-1], "copy_mib_s_median": copies[len(copies) // 2]}
        systems = []
    for system in systems:
        secs = sorted(r["seconds"] for r in runs if r["system"] == system)
        summary[system] = {"median_s": secs[len(secs) // 2], "min_s": secs[0], "max_s": secs[-1],
                           "all_complete": all(r["complete"] and r["source_copy_deleted"]
                                               for r in runs if r["system"] == system)}
    if not args.throttle_mb and "kafka" in summary and "pylog" in summary:
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
