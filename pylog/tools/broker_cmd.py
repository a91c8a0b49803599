"""`pylog broker`: run one broker in the foreground on the embedded default (no ZooKeeper)."""
from __future__ import annotations

import argparse
import asyncio

from pylog.tools.errors import CliError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("broker", help="run a broker in the foreground",
                       description="Run one pylog broker. Ready when the port accepts connections; SIGTERM stops it cleanly.")
    p.add_argument("--data-dir", required=True, help="directory holding the partition logs (log.dirs)")
    p.add_argument("--port", type=int, default=None, help="port to listen on (default: port setting, 9092)")
    p.add_argument("--host", default=None, help="interface to listen on (default: host.name setting, 127.0.0.1)")
    p.add_argument("--config", default=None, help="a broker.properties file")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting (repeatable)")
    p.set_defaults(func=run)


def build_config(args: argparse.Namespace):  # -> BrokerConfig
    from broker.config import BrokerConfig

    overrides = list(args.set)
    overrides.append(f"log.dirs={args.data_dir}")
    if args.port is not None:
        overrides.append(f"port={args.port}")
    if args.host is not None:
        overrides.append(f"host.name={args.host}")
    return BrokerConfig.load(args.config, overrides)


def run(args: argparse.Namespace) -> int:
    # imported here so that client commands do not pay for the server's imports
    from pylog.tools.allocator import keep_freed_memory
    from kafka_protocol.errors import InvalidConfigError
    from broker.cluster.membership import BrokerIdInUseError
    from broker.cluster.zk_client import ZooKeeperUnavailableError
    from broker.meta_properties import DataDirMismatchError
    from broker.server import DataDirLockedError, serve

    try:
        config = build_config(args)
    except InvalidConfigError as e:
        raise CliError(str(e)) from None
    keep_freed_memory()
    try:
        asyncio.run(serve(config))
    except (DataDirLockedError, DataDirMismatchError, ZooKeeperUnavailableError, BrokerIdInUseError,
            InvalidConfigError) as e:
        raise CliError(str(e)) from None
    except OSError as e:
        where = config["listeners"] or f"{config['host.name']}:{config['port']}"
        raise CliError(f"cannot listen on {where}: {e.strerror}") from None
    return 0
