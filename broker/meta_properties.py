"""`<data dir>/meta.properties`: which cluster and which broker id a data directory belongs to, as Kafka keeps it.

Written at a data directory's first start (this broker's id and the cluster's id: a new one for the embedded
broker, ZooKeeper's `/cluster/id` in cluster mode, so brokers of a new cluster starting together agree on it);
checked at every later start, as
Kafka checks it: a configured broker.id other than the stored one is refused (the data belongs to another
broker), and in cluster mode a stored cluster id other than ZooKeeper's `/cluster/id` is refused (the broker
would join the wrong cluster with its data). A data directory whose cluster id seeds a new ZooKeeper (the first
start of a single broker's data in cluster mode) keeps it, and its topics join the cluster with it
(`broker.cluster.cluster_node.ClusterNode.register_local_topics`).
"""
from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass
from pathlib import Path

FILE = "meta.properties"


class DataDirMismatchError(RuntimeError):
    """The data directory belongs to another broker or another cluster; the message says what to do."""


@dataclass(frozen=True)
class MetaProperties:
    cluster_id: str
    node_id: int


def _read(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.lstrip().startswith("#"):
            out[key.strip()] = value.strip()
    return out


def read(data_dir: Path, node_id: int) -> MetaProperties | None:
    """The directory's stored identity (None before its first start); DataDirMismatchError when it names another
    broker id than `node_id`."""
    path = data_dir / FILE
    if not path.exists():
        return None
    stored = _read(path)
    stored_id = stored.get("node.id", stored.get("broker.id"))
    if stored_id is not None and stored_id.lstrip("-").isdigit() and int(stored_id) != node_id:
        raise DataDirMismatchError(
            f"configured broker.id {node_id} doesn't match stored broker.id {stored_id} in {path}: if you moved "
            "the data, configure that broker.id; for a new broker, start it on an empty data directory")
    return MetaProperties(stored["cluster.id"], node_id) if stored.get("cluster.id") else None


def new_cluster_id() -> str:
    """A random cluster id in Kafka's form (a UUID, base64url without padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def write(data_dir: Path, cluster_id: str, node_id: int) -> MetaProperties:
    (data_dir / FILE).write_text(f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n")
    return MetaProperties(cluster_id, node_id)


def load(data_dir: Path, node_id: int) -> MetaProperties:
    """The embedded broker's identity: stored, or written with a new cluster id at its first start."""
    return read(data_dir, node_id) or write(data_dir, new_cluster_id(), node_id)


def check_cluster(meta: MetaProperties | None, zk_cluster_id: str, data_dir: Path, zk_connect: str) -> None:
    """Refuse a data directory of another cluster (Kafka's InconsistentClusterIdException)."""
    if meta is not None and meta.cluster_id != zk_cluster_id:
        raise DataDirMismatchError(
            f"the cluster id {zk_cluster_id} in ZooKeeper ({zk_connect}) doesn't match the stored cluster id "
            f"{meta.cluster_id} in {data_dir / FILE}: the broker is trying to join the wrong cluster with this "
            "data. Check zookeeper.connect (and its chroot), or start the broker on an empty data directory")
