"""Cluster metadata in ZooKeeper: Kafka's paths and JSON, encoded and decoded with no I/O.

Owns the byte format of every znode cluster mode reads or writes, exactly as Apache Kafka's
ZooKeeper mode writes them (kafka.zk.ZkData), so that Kafka's own tooling and a reader of Kafka's
layout understand a pylog cluster:

- `/brokers/ids/<id>` (ephemeral): broker registration, JSON version 5 (host, port, endpoints,
  listener map, jmx_port -1, timestamp, features);
- `/controller` (ephemeral): `{"version":1,"brokerid":N,"timestamp":"ms"}`;
- `/controller_epoch`: the epoch as a decimal string;
- `/brokers/topics/<topic>`: replica assignment, version 2 with `adding_replicas`,
  `removing_replicas` and `topic_id` (Kafka's base64 UUID);
- `/brokers/topics/<topic>/partitions/<p>/state`: leader, leader_epoch, isr, controller_epoch;
- `/config/topics/<topic>`: `{"version":1,"config":{...}}`;
- `/admin/delete_topics/<topic>`: a deletion request (empty data);
- `/admin/reassign_partitions`: the ZooKeeper-era reassignment request,
  `{"version":1,"partitions":[{"topic":T,"partition":P,"replicas":[...]}]}` (`ReassignmentRequest`);
- `/isr_change_notification/isr_change_<seq>`: the partitions whose ISR changed.

Decoders accept what Kafka accepts (older versions, missing optional keys) and raise
`ZkDataError` naming the path for anything else: the cluster never acts on a node it misread.
"""
from __future__ import annotations

import base64
import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
TOPIC_CONFIGS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
ISR_CHANGES = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CLUSTER_ID = "/cluster/id"

# The persistent parents Kafka creates at start (KafkaZkClient.createTopLevelPaths).
TOP_LEVEL_PATHS = (BROKER_IDS, TOPICS, "/brokers/seqid", "/config/changes", TOPIC_CONFIGS, "/config/brokers",
                   "/admin/delete_topics", ISR_CHANGES, "/latest_producer_id_block")


class ZkDataError(ValueError):
    """A znode whose data is not what Kafka's layout says; names the path."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"ZooKeeper node {path}: {problem}")
        self.path = path


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{TOPIC_CONFIGS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def _json(path: str, data: bytes | None) -> dict[str, Any]:
    if not data:
        raise ZkDataError(path, "no data")
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ZkDataError(path, f"not JSON ({e})") from None
    if not isinstance(value, dict):
        raise ZkDataError(path, "not a JSON object")
    return value


def _int_list(path: str, value: Any, what: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ZkDataError(path, f"{what} is not a list of broker ids")
    return list(value)


def _encode(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


# ---------------------------------------------------------------- brokers

@dataclass(frozen=True)
class BrokerRegistration:
    """A broker's /brokers/ids/<id>: `host`/`port` are its PLAINTEXT endpoint (Kafka's legacy fields; the
    first endpoint when it has none); `listeners` every endpoint it advertises, (listener name, security
    protocol, host, port), empty for the one PLAINTEXT listener. Brokers reach each other at `address` of
    the inter-broker listener."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    timestamp_ms: int = 0
    listeners: tuple[tuple[str, str, str, int], ...] = ()

    def endpoints(self) -> tuple[tuple[str, str, str, int], ...]:
        return self.listeners or (("PLAINTEXT", "PLAINTEXT", self.host, self.port),)

    def address(self, listener: str) -> tuple[str, int]:
        """Where a client of `listener` reaches this broker (the PLAINTEXT endpoint if it has no such listener)."""
        for name, _protocol, host, port in self.listeners:
            if name == listener:
                return host, port
        return self.host, self.port

    def encode(self) -> bytes:
        endpoints = self.endpoints()
        value: dict[str, Any] = {
            "features": {}, "listener_security_protocol_map": {n: p for n, p, _, _ in endpoints},
            "endpoints": [f"{n}://{h}:{p}" for n, _, h, p in endpoints], "jmx_port": -1,
            "port": self.port, "host": self.host, "version": 5, "timestamp": str(self.timestamp_ms),
        }
        if not any(protocol == "PLAINTEXT" for _, protocol, _, _ in endpoints):
            value.update(host=None, port=-1)        # as Kafka registers a broker without a PLAINTEXT listener
        if self.rack is not None:
            value["rack"] = self.rack
        return _encode(value)

    @classmethod
    def decode(cls, broker_id: int, data: bytes | None) -> "BrokerRegistration":
        path = broker_path(broker_id)
        v = _json(path, data)
        version = v.get("version")
        if not isinstance(version, int) or version < 1:
            raise ZkDataError(path, f"unsupported registration version {version!r}")
        host, port = v.get("host"), v.get("port")
        listeners: list[tuple[str, str, str, int]] = []
        if version >= 2:   # the PLAINTEXT endpoint wins over the legacy top-level host and port
            plaintext_seen = False
            for endpoint in v.get("endpoints") or []:
                listener, _, address = str(endpoint).partition("://")
                protocol = (v.get("listener_security_protocol_map") or {}).get(listener, listener)
                h, _, p = address.rpartition(":")
                if not h or not p.isdigit():
                    continue
                listeners.append((listener, protocol, h.strip("[]"), int(p)))
                if protocol == "PLAINTEXT" and not plaintext_seen:
                    host, port, plaintext_seen = h, int(p), True
            if not plaintext_seen and listeners:
                _, _, host, port = listeners[0]
        if not isinstance(host, str) or not host or not isinstance(port, int) or not 0 < port < 65536:
            raise ZkDataError(path, "no endpoint")
        rack = v.get("rack")
        return cls(broker_id, host.strip("[]"), port, rack if isinstance(rack, str) else None,
                   int(v.get("timestamp") or 0),
                   () if [(n, pr) for n, pr, _, _ in listeners] == [("PLAINTEXT", "PLAINTEXT")] else tuple(listeners))


# ---------------------------------------------------------------- controller

def encode_controller(broker_id: int, timestamp_ms: int) -> bytes:
    return _encode({"version": 1, "brokerid": broker_id, "timestamp": str(timestamp_ms)})


def decode_controller(data: bytes | None) -> int:
    v = _json(CONTROLLER, data)
    broker_id = v.get("brokerid")
    if not isinstance(broker_id, int) or isinstance(broker_id, bool):
        raise ZkDataError(CONTROLLER, "no brokerid")
    return broker_id


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes | None) -> int:
    try:
        return int((data or b"").decode())
    except (UnicodeDecodeError, ValueError):
        raise ZkDataError(CONTROLLER_EPOCH, f"not an integer: {data!r}") from None


# ---------------------------------------------------------------- topics

def kafka_uuid(u: uuid.UUID) -> str:
    """Kafka's string form of a Uuid: URL-safe base64 of the 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(u.bytes).rstrip(b"=").decode()


def parse_kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@dataclass(frozen=True)
class TopicAssignment:
    """The replicas of every partition of a topic (the first is the preferred leader)."""
    topic: str
    partitions: Mapping[int, Sequence[int]]
    topic_id: uuid.UUID | None = None
    adding: Mapping[int, Sequence[int]] = field(default_factory=dict)
    removing: Mapping[int, Sequence[int]] = field(default_factory=dict)

    def encode(self) -> bytes:
        value: dict[str, Any] = {
            "version": 2,
            "partitions": {str(p): list(r) for p, r in sorted(self.partitions.items())},
            "adding_replicas": {str(p): list(r) for p, r in sorted(self.adding.items()) if r},
            "removing_replicas": {str(p): list(r) for p, r in sorted(self.removing.items()) if r},
        }
        if self.topic_id is not None:
            value["topic_id"] = kafka_uuid(self.topic_id)
        return _encode(value)

    @classmethod
    def decode(cls, topic: str, data: bytes | None) -> "TopicAssignment":
        path = topic_path(topic)
        v = _json(path, data)

        def replicas(key: str) -> dict[int, list[int]]:
            raw = v.get(key) or {}
            if not isinstance(raw, dict):
                raise ZkDataError(path, f"{key} is not an object")
            out = {}
            for p, r in raw.items():
                if not str(p).isdigit():
                    raise ZkDataError(path, f"partition {p!r} is not a number")
                out[int(p)] = _int_list(path, r, f"{key}[{p}]")
            return out

        topic_id = None
        if v.get("topic_id") is not None:
            try:
                topic_id = parse_kafka_uuid(str(v["topic_id"]))
            except ValueError:
                raise ZkDataError(path, f"topic_id {v['topic_id']!r} is not a Kafka uuid") from None
        return cls(topic, replicas("partitions"), topic_id, replicas("adding_replicas"), replicas("removing_replicas"))


@dataclass(frozen=True)
class PartitionState:
    """Leader and ISR of one partition, and the controller epoch that wrote them."""
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int

    def encode(self) -> bytes:
        return _encode({"controller_epoch": self.controller_epoch, "leader": self.leader, "version": 1,
                        "leader_epoch": self.leader_epoch, "isr": list(self.isr)})

    @classmethod
    def decode(cls, topic: str, partition: int, data: bytes | None) -> "PartitionState":
        path = partition_state_path(topic, partition)
        v = _json(path, data)
        try:
            return cls(int(v["leader"]), int(v["leader_epoch"]), tuple(_int_list(path, v["isr"], "isr")),
                       int(v["controller_epoch"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ZkDataError(path, f"missing or bad field {e}") from None


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    return _encode({"version": 1, "config": {k: str(v) for k, v in sorted(config.items())}})


def decode_topic_config(topic: str, data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    config = _json(topic_config_path(topic), data).get("config") or {}
    if not isinstance(config, dict):
        raise ZkDataError(topic_config_path(topic), "config is not an object")
    return {str(k): str(v) for k, v in config.items()}


def encode_isr_change(partitions: Sequence[tuple[str, int]]) -> bytes:
    return _encode({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_isr_change(path: str, data: bytes | None) -> list[tuple[str, int]]:
    raw = _json(path, data).get("partitions")
    if not isinstance(raw, list):
        raise ZkDataError(path, "partitions is not a list")
    try:
        return [(str(e["topic"]), int(e["partition"])) for e in raw]
    except (KeyError, TypeError, ValueError):
        raise ZkDataError(path, "a partition entry lacks topic or partition") from None


def decode_reassignment(data: bytes) -> dict[tuple[str, int], list[int]]:
    """The target replicas of each partition in `/admin/reassign_partitions` (Kafka's ReassignPartitionsZNode);
    ZkDataError for anything Kafka would not read."""
    try:
        doc = json.loads(data)
        return {(str(e["topic"]), int(e["partition"])): [int(r) for r in e["replicas"]] for e in doc["partitions"]}
    except (ValueError, KeyError, TypeError) as e:
        raise ZkDataError(REASSIGN_PARTITIONS, f"not a reassignment request ({e}): {data[:200]!r}") from None


def encode_reassignment(targets: Mapping[tuple[str, int], Sequence[int]]) -> bytes:
    return json.dumps({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                                     for (t, p), r in sorted(targets.items())]}).encode()
