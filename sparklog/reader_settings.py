"""What an executor needs to read ranges, built once on the driver and pickled with the reader.

Owns the choice of read path (the configurations come from `client_configs`):
- the native fetcher (`fetch_reader`: the source's own Fetch client and the Rust decoder), used
  whenever the connection is plain TCP;
- librdkafka (`partition_reader`), for TLS and SASL, which the native client does not speak,
  or when the `fetcher` option asks for it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sparklog import client_configs
from sparklog.kafka_client import ClientConfig
from sparklog.options import ReadOptions


@dataclass(frozen=True)
class ReaderSettings:
    """The read path and its client settings; exactly one of `client` and `consumer_conf` is used."""

    include_headers: bool
    fail_on_data_loss: bool
    poll_timeout_ms: int
    client: Optional[ClientConfig]            # set: the native fetcher
    consumer_conf: dict[str, object]          # the librdkafka path's consumer settings
    progress_address: Optional[str] = None    # report rows read there (sparklog.read_progress)
    remote_storage: Optional[str] = None      # read tiered offsets from this store (sparklog.direct_reads)
    remote_storage_env: tuple[tuple[str, str], ...] = ()   # the driver's AWS_* variables

    @property
    def native(self) -> bool:
        return self.client is not None

    @classmethod
    def from_options(cls, opts: ReadOptions) -> "ReaderSettings":
        native = opts.fetcher == "native" or (opts.fetcher == "auto" and opts.security is not None)
        return cls(opts.include_headers, opts.fail_on_data_loss, opts.poll_timeout_ms,
                   client_configs.native_client(opts) if native else None,
                   client_configs.executor_consumer(opts), opts.progress_address,
                   opts.remote_storage if native else None, opts.remote_storage_env)
