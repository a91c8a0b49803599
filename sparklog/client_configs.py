"""Every Kafka client configuration of the `pylog` source, built in one place (as Spark's
KafkaConfigUpdater): the driver's consumer and admin client, the executors' native client and
librdkafka consumer, the group-progress consumer (commitToGroup) and the sink's producer.

Each starts from the tuned defaults, then the user's `kafka.*` options, then what pylog's own use
needs (no auto commit, errors on out-of-range). Never creates a client.
"""
from __future__ import annotations

from typing import Mapping

from sparklog.kafka_client import ClientConfig
from sparklog.options import OptionError, ReadOptions, WriteOptions
from sparklog.schema import EXECUTOR_CONSUMER_DEFAULTS

PRODUCER_DEFAULTS: dict[str, object] = {
    "enable.idempotence": True,          # acks=all, no duplicates from the client's own retries
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "delivery.report.only.error": True,  # a Python callback only for failures
}


def _int(params: dict[str, str], name: str, default: int) -> int:
    try:
        value = int(params.get(name, default))
    except ValueError:
        raise OptionError(f"Invalid value {params[name]!r} for option 'kafka.{name}': an integer is required") from None
    if value <= 0:
        raise OptionError(f"Invalid value {value} for option 'kafka.{name}': it must be positive")
    return value


def native_client(opts: ReadOptions) -> ClientConfig:
    """The native client's settings (EXECUTOR_CONSUMER_DEFAULTS as defaults). Of the `kafka.*` options
    it honours client.id, request.timeout.ms, isolation.level, fetch.max.bytes,
    max.partition.fetch.bytes and fetch.wait.max.ms; librdkafka's consumer gets all of them."""
    p = opts.kafka_params
    d = EXECUTOR_CONSUMER_DEFAULTS
    isolation = p.get("isolation.level", str(d["isolation.level"])).strip().lower()
    if isolation not in ("read_uncommitted", "read_committed"):
        raise OptionError(f"Invalid value {isolation!r} for option 'kafka.isolation.level': "
                          "read_uncommitted or read_committed")
    return ClientConfig(
        bootstrap_servers=opts.bootstrap_servers,
        client_id=p.get("client.id", "pylog-executor"),
        request_timeout_ms=_int(p, "request.timeout.ms", 30_000),
        read_committed=isolation == "read_committed",
        fetch_max_bytes=_int(p, "fetch.max.bytes", int(str(d["fetch.max.bytes"]))),
        partition_max_bytes=_int(p, "max.partition.fetch.bytes", int(str(d["max.partition.fetch.bytes"]))),
        fetch_max_wait_ms=_int(p, "fetch.wait.max.ms", int(str(d["fetch.wait.max.ms"]))),
    )


def executor_consumer(opts: ReadOptions) -> dict[str, object]:
    """librdkafka's settings: the tuned defaults, then every `kafka.*` option, then what reading needs."""
    conf: dict[str, object] = dict(EXECUTOR_CONSUMER_DEFAULTS)
    conf.update(opts.kafka_params)
    conf.update({
        "bootstrap.servers": opts.bootstrap_servers,
        "group.id": opts.group_id if opts.custom_group_id else f"{opts.group_id}-executor",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "error",
    })
    return conf


def driver_consumer(opts: ReadOptions) -> dict[str, object]:
    """The driver's consumer (offset lookups only: never subscribes, never commits)."""
    return {**opts.kafka_params, "bootstrap.servers": opts.bootstrap_servers,
            "group.id": opts.group_id if opts.custom_group_id else f"{opts.group_id}-driver",
            "enable.auto.commit": False, "enable.partition.eof": False}


def admin(opts: ReadOptions) -> dict[str, object]:
    """The driver's admin client (topic ids)."""
    return {**opts.kafka_params, "bootstrap.servers": opts.bootstrap_servers}


def group_progress(bootstrap_servers: str, kafka_params: Mapping[str, str], group: str) -> dict[str, object]:
    """The consumer that mirrors committed batch ends into a consumer group (commitToGroup)."""
    return {**kafka_params, "bootstrap.servers": bootstrap_servers, "group.id": group,
            "enable.auto.commit": False, "enable.partition.eof": False}


def producer(opts: WriteOptions) -> dict[str, object]:
    """The sink's producer: idempotent, large batches, delivery reports only for failures."""
    return {**PRODUCER_DEFAULTS, **opts.kafka_params, "bootstrap.servers": opts.bootstrap_servers}
