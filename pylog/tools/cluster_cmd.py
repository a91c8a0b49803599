"""`pylog cluster status`: what a ZooKeeper-mode cluster holds, read from ZooKeeper (issue 11); and
`pylog cluster up`, a development cluster in the foreground (pylog.launch.local_cluster).

Owns the operator's view of cluster metadata: the live brokers, the controller and its epoch, every
topic's partitions with leader, replicas and ISR, and the under-replicated (ISR smaller than the
replicas) and offline (no leader) partitions, as text or JSON. Read-only; works on any cluster that
keeps Kafka's ZooKeeper layout. `read_status` does the reading, `format_status` the text, so the
format is tested without ZooKeeper.
"""
from __future__ import annotations

import argparse
import json
import logging
from typing import Any

from pylog.tools.errors import CliError


def read_status(kazoo: Any) -> dict[str, Any]:
    """The cluster's metadata as plain data (see the module docstring), from a started kazoo client."""
    from kazoo.exceptions import NoNodeError

    from broker.cluster import zk_layout
    from broker.cluster.zk_layout import BrokerRegistration, PartitionState, TopicAssignment, ZkDataError

    def get(path: str) -> bytes | None:
        try:
            return bytes(kazoo.get(path)[0] or b"")
        except NoNodeError:
            return None

    def children(path: str) -> list[str]:
        try:
            return sorted(kazoo.get_children(path))
        except NoNodeError:
            return []

    brokers = {}
    for b in children(zk_layout.BROKER_IDS):
        if b.isdigit():
            try:
                reg = BrokerRegistration.decode(int(b), get(f"{zk_layout.BROKER_IDS}/{b}"))
                brokers[int(b)] = f"{reg.host}:{reg.port}"
            except ZkDataError as e:
                brokers[int(b)] = f"unreadable ({e})"
    controller_data, epoch_data = get(zk_layout.CONTROLLER), get(zk_layout.CONTROLLER_EPOCH)
    status: dict[str, Any] = {
        "brokers": {str(k): v for k, v in sorted(brokers.items())},
        "controller": zk_layout.decode_controller(controller_data) if controller_data else None,
        "controller_epoch": zk_layout.decode_controller_epoch(epoch_data) if epoch_data else None,
        "topics": {},
    }
    for topic in children(zk_layout.TOPICS):
        assignment = TopicAssignment.decode(topic, get(zk_layout.topic_path(topic)))
        partitions = {}
        for p, replicas in sorted(assignment.partitions.items()):
            data = get(zk_layout.partition_state_path(topic, p))
            state = PartitionState.decode(topic, p, data) if data else None
            partitions[str(p)] = {"replicas": list(replicas),
                                  "leader": state.leader if state else None,
                                  "leader_epoch": state.leader_epoch if state else None,
                                  "isr": list(state.isr) if state else []}
        status["topics"][topic] = {
            "topic_id": zk_layout.kafka_uuid(assignment.topic_id) if assignment.topic_id else None,
            "partitions": partitions}
    status["under_replicated"] = [f"{t}-{p}" for t, v in status["topics"].items() for p, s in v["partitions"].items()
                                  if len(s["isr"]) < len(s["replicas"])]
    status["offline"] = [f"{t}-{p}" for t, v in status["topics"].items() for p, s in v["partitions"].items()
                         if s["leader"] is None or s["leader"] < 0]
    return status


def format_status(status: dict[str, Any]) -> str:
    lines = []
    ctl = status["controller"]
    lines.append(f"controller: {'none' if ctl is None else f'broker {ctl}'} (epoch {status['controller_epoch']})")
    lines.append(f"brokers ({len(status['brokers'])}): " +
                 (", ".join(f"{b} {addr}" for b, addr in status["brokers"].items()) or "none"))
    for topic, t in status["topics"].items():
        lines.append(f"topic {topic} (id {t['topic_id']}): {len(t['partitions'])} partitions")
        for p, s in t["partitions"].items():
            leader = "none" if s["leader"] is None or s["leader"] < 0 else s["leader"]
            lines.append(f"  {topic}-{p}: leader {leader}, epoch {s['leader_epoch']}, replicas {s['replicas']}, "
                         f"isr {s['isr']}")
    lines.append(f"under-replicated partitions: {len(status['under_replicated'])}"
                 + (f" ({', '.join(status['under_replicated'])})" if status["under_replicated"] else ""))
    lines.append(f"offline partitions: {len(status['offline'])}"
                 + (f" ({', '.join(status['offline'])})" if status["offline"] else ""))
    return "\n".join(lines)


def _quiet_kazoo() -> None:
    """kazoo logs every connection attempt; a command's user wants its answer, not those."""
    logging.getLogger("kazoo").setLevel(logging.ERROR)


def run(args: argparse.Namespace) -> int:
    _quiet_kazoo()
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    client = KazooClient(hosts=args.zookeeper, timeout=10.0)
    try:
        client.start(timeout=args.timeout)
    except KazooTimeoutError:
        client.close()
        raise CliError(f"no ZooKeeper session with {args.zookeeper} within {args.timeout:g}s") from None
    try:
        status = read_status(client)
    finally:
        client.stop()
        client.close()
    print(json.dumps(status, indent=2) if args.json else format_status(status))
    return 0


def _check_free(ports: dict[int, str]) -> None:
    """CliError naming the first of `ports` ({port: what it is for}) that something already listens on."""
    import socket

    for port, what in ports.items():
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                raise CliError(f"port {port} ({what}) is in use, by another broker or cluster? Stop it, or give "
                               f"other ports: --port (the first broker's; broker i listens on port + i) and "
                               f"--zookeeper-port") from None


def run_up(args: argparse.Namespace) -> int:
    """`pylog cluster up`: a local ZooKeeper and N brokers in the foreground until Ctrl-C (or SIGTERM).

    Fixed ports (Kafka's: brokers from 9092, ZooKeeper 2181), so clients' settings stay the same from one
    run to the next. Without --data-dir the data lives in a new temporary directory removed when the
    cluster stops; with it the data stays, and `cluster up` with the same directory brings it back."""
    import shutil
    import signal
    import tempfile
    import threading
    from pathlib import Path

    from pylog.launch.process import BrokerProcess
    from pylog.launch.local_cluster import DEV_SETTINGS, LocalCluster

    _quiet_kazoo()
    if args.brokers < 1:
        raise CliError(f"--brokers must be at least 1, got {args.brokers}")
    ports = {args.port + i: f"broker {i}" for i in range(args.brokers)}
    _check_free({**ports, args.zookeeper_port: "ZooKeeper"})
    keep = args.data_dir is not None
    root = Path(args.data_dir) if keep else Path(tempfile.mkdtemp(prefix="pylog-cluster-"))
    settings: dict[str, object] = {**DEV_SETTINGS, "default.replication.factor": min(3, args.brokers),
                                   "min.insync.replicas": min(2, args.brokers),
                                   "offsets.topic.replication.factor": min(3, args.brokers)}
    for item in args.set or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--set expects key=value, got {item!r}")
        settings[key.strip()] = value.strip()
    cluster = LocalCluster(root, args.brokers, settings, zk_port=args.zookeeper_port,
                           launcher=lambda i, data, s: BrokerProcess(data, port=args.port + i, settings=s))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    try:
        cluster.start()
        print(f"ZooKeeper: {cluster.zk_connect}")
        print(f"bootstrap servers: {cluster.bootstrap}")
        print(f"data: {root}" + ("" if keep else " (removed when the cluster stops; --data-dir keeps it)"))
        print(_controller_line(cluster.zk_connect))
        print(f"status: pylog cluster status --zookeeper {cluster.zk_connect}")
        print("Ctrl-C stops the cluster.", flush=True)
        done.wait()
    except KeyboardInterrupt:
        pass
    except (RuntimeError, OSError) as e:
        raise CliError(f"the cluster did not start: {e}") from None
    finally:
        cluster.close()
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
    print("cluster stopped" + (f"; its data is in {root}" if keep else ""), flush=True)
    return 0


def _controller_line(zk_connect: str, timeout_s: float = 30.0) -> str:
    """'controller: broker N (epoch E)', once the brokers have elected one."""
    import time

    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk_connect, timeout=10.0)
    client.start(timeout=10.0)
    try:
        deadline = time.monotonic() + timeout_s
        status = read_status(client)
        while status["controller"] is None and time.monotonic() < deadline:
            time.sleep(0.2)
            status = read_status(client)
    finally:
        client.stop()
        client.close()
    return format_status(status).splitlines()[0]


def register(sub: Any) -> None:
    p = sub.add_parser("cluster", help="a ZooKeeper-mode cluster's metadata")
    csub = p.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    s = csub.add_parser("status", help="brokers, controller, leaders, ISR, under-replicated and offline partitions")
    s.add_argument("--zookeeper", required=True, help="the cluster's zookeeper.connect (host:port[/chroot])")
    s.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for a ZooKeeper session")
    s.add_argument("--json", action="store_true", help="print JSON instead of text")
    s.set_defaults(func=run)
    u = csub.add_parser("up", help="a development cluster: a local ZooKeeper and N brokers, until Ctrl-C")
    u.add_argument("--brokers", type=int, default=3, help="how many brokers (ids 0..N-1)")
    u.add_argument("--port", type=int, default=9092, help="the first broker's port; broker i listens on port + i "
                   "(default 9092)")
    u.add_argument("--zookeeper-port", type=int, default=2181, help="ZooKeeper's port (default 2181)")
    u.add_argument("--data-dir", help="where ZooKeeper and the brokers keep their data, kept after the cluster stops "
                   "(default: a new temporary directory, removed when it stops)")
    u.add_argument("--set", action="append", metavar="KEY=VALUE", help="a broker setting for every broker")
    u.set_defaults(func=run_up)
    from pylog.tools.partitions import add_membership_args, run_membership
    d = csub.add_parser("decommission", help="move every replica off a broker that leaves (Kafka's JSON plan; "
                                             "--execute to move)")
    add_membership_args(d)
    d.set_defaults(func=run_membership)
    a = csub.add_parser("add-broker", help="move replicas onto a broker that joined until the brokers hold even "
                                           "shares (--execute to move)")
    add_membership_args(a)
    a.set_defaults(func=run_membership)
