"""What an executor needs to read ranges, built once on the driver and pickled with the reader.

Owns the choice of read path and the client configuration of each, in one place:
- the native fetcher (`fetch_reader`: the source's own Fetch client and the Rust decoder), used
  whenever the connection is plain TCP;
- librdkafka (`partition_reader`), for TLS and SASL, which the native client does not speak,
  or when the `fetcher` option asks for it.
Of the `kafka.*` options, the native client honours client.id, request.timeout.ms,
isolation.level, fetch.max.bytes, max.partition.fetch.bytes and fetch.wait.max.ms; librdkafka gets
all of them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sparklog.kafka_client import ClientConfig
from sparklog.options import OptionError, ReadOptions, needs_librdkafka
from sparklog.schema import EXECUTOR_CONSUMER_DEFAULTS


def _int(params: dict[str, str], name: str, default: int) -> int:
    try:
        value = int(params.get(name, default))
    except ValueError:
        raise OptionError(f"Invalid value {params[name]!r} for option 'kafka.{name}': an integer is required") from None
    if value <= 0:
        raise OptionError(f"Invalid value {value} for option 'kafka.{name}': it must be positive")
    return value


def client_config(opts: ReadOptions) -> ClientConfig:
    """The native client's settings from the source options (EXECUTOR_CONSUMER_DEFAULTS as defaults)."""
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


def consumer_config(opts: ReadOptions) -> dict[str, object]:
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


@dataclass(frozen=True)
class ReaderSettings:
    """The read path and its client settings; exactly one of `client` and `consumer_conf` is used."""

    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    client: Optional[ClientConfig]            # set: the native fetcher
    consumer_conf: dict[str, object]          # the librdkafka path's consumer settings

    @property
    def native(self) -> bool:
        return self.client is not None

    @classmethod
    def from_options(cls, opts: ReadOptions) -> "ReaderSettings":
        native = opts.fetcher == "native" or (opts.fetcher == "auto" and not needs_librdkafka(opts.kafka_params))
        return cls(opts.include_headers, opts.fail_on_data_loss, opts.poll_timeout_ms,
                   client_config(opts) if native else None, consumer_config(opts))
