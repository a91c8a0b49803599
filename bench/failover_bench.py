"""The controller's work to fail over many partitions (issue 31): pylog against Apache Kafka 3.9 (ZooKeeper mode), on
fresh three-broker clusters, alternating system by system within each repetition.

Each repetition and system: --topics topics of --partitions-per-topic partitions (rf 2, so each broker leads about
a third and follows another third), every partition led and in sync; then broker 3 (never the controller: the
controller is moved off it first by restarting it if needed) is SIGKILLed. Timed from the kill until Metadata shows
no partition led by broker 3 (the ZooKeeper session timeout, --session-timeout-ms, is part of it on both), and from
the moment its registration znode is gone (ZooKeeper expired its session: the controller's cue) to the same end,
which is the controller's own work plus Metadata's propagation. ZooKeeper writes: the difference of ZooKeeper's last zxid (`srvr`)
over the failover, one per write transaction (a multi counts once). Figures also: the partitions that moved, the
controller broker's CPU over the failover.

Usage:
  .venv/bin/python bench/failover_bench.py --topics 100 --partitions-per-topic 100 --reps 2 --out FILE.json
"""
from __future__ import annotations

import argparse
import datetime as dt
import socket
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
from cluster_bench import SYSTEMS, alternating, broker_cpu, machine, make_cluster  # noqa: E402


def zxid(connect: str) -> int:
    """ZooKeeper's last transaction id, from its `srvr` four-letter word."""
    host, port = connect.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"srvr")
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    line = next(x for x in out.decode().splitlines() if x.startswith("Zxid:"))
    return int(line.split(":", 1)[1].strip(), 16) & 0xFFFFFFFF          # the counter within the epoch


def leaders(cluster: Any, via: int) -> dict[tuple[str, int], int]:
    md = cluster.metadata(None, via=via, timeout=30)
    return {(t, p): m.leader for t, tm in md.topics.items() if not t.startswith("__")
            for p, m in tm.partitions.items()}


def failover(system: str, rep: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient, NewTopic

    settings: dict[str, object] = {"auto.leader.rebalance.enable": "false", "offsets.topic.replication.factor": 1,
                                   "offsets.topic.num.partitions": 1, "default.replication.factor": 2,
                                   "num.partitions": args.partitions_per_topic}
    cluster = make_cluster(system, workdir / f"{system}-{rep}", 3, settings, args.session_timeout_ms)
    with cluster:
        if cluster.controller() == 3:
            cluster.stop(3)                      # another broker takes the controller over
            cluster.restart(3)
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        topics = [f"t{i:04d}" for i in range(args.topics)]
        t_create = time.monotonic()
        for i in range(0, len(topics), 20):
            futures = admin.create_topics([NewTopic(t, args.partitions_per_topic, 2) for t in topics[i:i + 20]],
                                          operation_timeout=120)
            for f in futures.values():
                f.result(180)
        total = args.topics * args.partitions_per_topic
        deadline = time.monotonic() + args.timeout_s
        while True:
            led = leaders(cluster, 1)
            if len(led) == total and all(b >= 0 for b in led.values()):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"{system}: {sum(b >= 0 for b in led.values())} of {total} partitions led")
            time.sleep(1.0)
        created_s = time.monotonic() - t_create
        controller = cluster.controller(via=1)
        assert controller != 3
        time.sleep(args.settle_s)
        moving = sum(1 for b in led.values() if b == 3)
        from kazoo.client import KazooClient
        zk = KazooClient(hosts=cluster.zookeeper.connect + cluster.chroot)
        zk.start(30)
        z0, cpu0 = zxid(cluster.zookeeper.connect), broker_cpu(cluster)
        t0 = time.monotonic()
        gone: float | None = None
        cluster.kill(3)
        # Metadata of every partition, asked of the broker that is not the controller, twice a second: often enough
        # for figures of seconds, and not a load on the controller's own work
        via = next(b for b in (1, 2) if b != controller)
        while True:
            if gone is None and zk.exists("/brokers/ids/3") is None:
                gone = time.monotonic()           # ZooKeeper expired broker 3's session: the controller's cue
            led = leaders(cluster, via)
            if not any(b == 3 for b in led.values()) and all(b >= 0 for b in led.values()):
                break
            if time.monotonic() - t0 > args.timeout_s:
                raise TimeoutError(f"{system}: partitions still led by broker 3 after {args.timeout_s}s")
            time.sleep(0.5 if gone is not None else 0.05)
        seconds = time.monotonic() - t0
        zk.stop()
        zk.close()
        time.sleep(2.0)                          # the controller's trailing writes (ISR shrinks) counted too
        z1, cpu1 = zxid(cluster.zookeeper.connect), broker_cpu(cluster)
        return {"system": system, "rep": rep, "partitions": total, "moved_leaders": moving,
                "create_and_lead_s": round(created_s, 1), "failover_s": round(seconds, 2),
                "after_session_expired_s": round(seconds - ((gone or t0) - t0), 2),
                "zk_writes": z1 - z0, "controller": controller,
                "controller_cpu_s": round(cpu1[controller] - cpu0[controller], 2)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--topics", type=int, default=100)
    p.add_argument("--partitions-per-topic", type=int, default=100)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--systems", default=",".join(SYSTEMS))
    p.add_argument("--session-timeout-ms", type=int, default=6000)
    p.add_argument("--settle-s", type=float, default=5.0)
    p.add_argument("--timeout-s", type=float, default=600.0)
    p.add_argument("--out", type=Path)
    args = p.parse_args()
    systems = args.systems.split(",")
    started = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    runs = alternating(systems, args.reps, "failover-bench-", lambda system, rep, tmp: failover(system, rep, args, tmp))
    _common.write_json(args.out, {"started": started, "command": " ".join(sys.argv), "machine": machine(),
                                  "args": vars(args) | {"out": str(args.out)}, "runs": runs})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
