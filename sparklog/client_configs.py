"""Every Kafka client configuration of the `pylog` source, built in one place (as Spark's
KafkaConfigUpdater): the driver's consumer and admin client, the executors' native client and
librdkafka consumer, the group-progress consumer (commitToGroup) and the sink's producer.

Each starts from the tuned defaults, then the user's `kafka.*` options, then what pylog's own use
needs (no auto commit, errors on out-of-range). Never creates a client.
"""
from __future__ import annotations

from typing import Mapping

from kafka_protocol.security.client_settings import ClientSecurity
from sparklog.kafka_client import ClientConfig
from sparklog.produce_client import ProducerConfig
from sparklog.record_encoder import CODECS
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
    max.partition.fetch.bytes, fetch.wait.max.ms and client.rack (KIP-392: fetch from a replica in the
    executor's rack); librdkafka's consumer gets all of them."""
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
        security=opts.security or ClientSecurity(),
        client_rack=p.get("client.rack", "").strip(),
    )


def executor_consumer(opts: ReadOptions) -> dict[str, object]:
    """librdkafka's settings: the tuned defaults, then every `kafka.*` option, then what reading needs."""
    conf: dict[str, object] = dict(EXECUTOR_CONSUMER_DEFAULTS)
    conf.update(opts.librdkafka_params)
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
    """The driver's consumer (offset lookups only: never subscribes, never commits). Its isolation level is
    the executors' (Spark's default read_uncommitted, not librdkafka's read_committed): the latest offset of
    a partition is then its high watermark, or under read_committed its last stable offset, so a range
    never ends beyond what the executors may read."""
    return {**opts.librdkafka_params, "bootstrap.servers": opts.bootstrap_servers,
            "group.id": opts.group_id if opts.custom_group_id else f"{opts.group_id}-driver",
            "enable.auto.commit": False, "enable.partition.eof": False,
            "isolation.level": opts.kafka_params.get("isolation.level",
                                                     str(EXECUTOR_CONSUMER_DEFAULTS["isolation.level"]))}


def admin(opts: ReadOptions) -> dict[str, object]:
    """The driver's admin client (topic ids)."""
    return {**opts.librdkafka_params, "bootstrap.servers": opts.bootstrap_servers}


def group_progress(bootstrap_servers: str, kafka_params: Mapping[str, str], group: str) -> dict[str, object]:
    """The consumer that mirrors committed batch ends into a consumer group (commitToGroup)."""
    return {**kafka_params, "bootstrap.servers": bootstrap_servers, "group.id": group,
            "enable.auto.commit": False, "enable.partition.eof": False}


def producer(opts: WriteOptions) -> dict[str, object]:
    """The sink's producer: idempotent, large batches, delivery reports only for failures."""
    return {**PRODUCER_DEFAULTS, **opts.librdkafka_params, "bootstrap.servers": opts.bootstrap_servers}


_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}


def native_producer(opts: WriteOptions) -> ProducerConfig:
    """The sink's own producer. Of the `kafka.*` options it honours acks (default all),
    enable.idempotence (default true with acks=all, as the Java client), compression.type (or
    librdkafka's compression.codec), batch.size, max.request.size, request.timeout.ms,
    delivery.timeout.ms (or message.timeout.ms), retry.backoff.ms and client.id."""
    p = opts.kafka_params
    raw_acks = p.get("acks", "all").strip().lower()
    if raw_acks not in _ACKS:
        raise OptionError(f"Invalid value {raw_acks!r} for option 'kafka.acks': all, -1, 1 or 0")
    acks = _ACKS[raw_acks]
    raw_idem = p.get("enable.idempotence")
    idempotent = acks == -1 if raw_idem is None else raw_idem.strip().lower() == "true"
    if idempotent and acks != -1:
        raise OptionError("Must set kafka.acks to all in order to use the idempotent producer "
                          "(or set kafka.enable.idempotence=false)")
    codec = p.get("compression.type", p.get("compression.codec", "none")).strip().lower()
    if codec not in CODECS:
        raise OptionError(f"Invalid value {codec!r} for option 'kafka.compression.type': {', '.join(CODECS)}")
    timeout_key = "message.timeout.ms" if "message.timeout.ms" in p and "delivery.timeout.ms" not in p \
        else "delivery.timeout.ms"
    return ProducerConfig(
        bootstrap_servers=opts.bootstrap_servers,
        client_id=p.get("client.id", "pylog-sink"),
        acks=acks,
        idempotent=idempotent,
        codec=CODECS[codec],
        batch_bytes=_int(p, "batch.size", int(str(PRODUCER_DEFAULTS["batch.size"]))),
        max_request_bytes=_int(p, "max.request.size", 1_048_576),
        request_timeout_ms=_int(p, "request.timeout.ms", 30_000),
        delivery_timeout_ms=_int(p, timeout_key, 120_000),
        retry_backoff_ms=_int(p, "retry.backoff.ms", 100),
        allow_auto_create=p.get("allow.auto.create.topics", "true").strip().lower() != "false",
        security=opts.security or ClientSecurity(),
    )
