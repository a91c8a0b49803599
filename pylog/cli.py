"""The `pylog` command: one argparse tree whose subcommands live in their own modules.

Each subcommand module exposes `register(subparsers)`, which adds its parser and sets
`func=run` where `run(args) -> int` returns the exit code. This module only wires them up and
turns expected errors into a one-line message and a non-zero exit.
"""
from __future__ import annotations

import argparse
import logging
import sys

from pylog import console_cmd, job_cmd
from pylog.tools import (acls, broker_cmd, cluster_cmd, consume, groups, objectstore_cmd, partitions, perf, produce,
                         topics, transactions, users)
from pylog.tools.errors import CliError

SUBCOMMANDS = (broker_cmd, topics, partitions, produce, consume, perf, groups, transactions, users, acls, cluster_cmd,
               objectstore_cmd, job_cmd, console_cmd)


DISTRIBUTION = "pylog-stream"   # the name on PyPI ("pylog" there is another project)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown (not installed; run make install)"


def _log_level(value: str) -> str:
    level = value.strip().upper()
    if level == "WARN":
        level = "WARNING"
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{value!r} is not a log level: choose one of {', '.join(LOG_LEVELS)}")
    return level


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pylog", description="pylog: a Kafka-protocol log for Spark")
    parser.add_argument("--version", action="version", version=f"pylog {version()} ({DISTRIBUTION})")
    parser.add_argument("--log-level", default="INFO", type=_log_level,
                        help=f"logging level: {', '.join(LOG_LEVELS)} (default INFO)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in SUBCOMMANDS:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return int(args.func(args) or 0)
    except CliError as e:
        print(f"pylog {args.command}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0


def run() -> None:
    """The `pylog` executable and `python -m pylog`. (kio is loaded without hypothesis by kafka_protocol, which
    every module reaching kio imports first: see kafka_protocol/__init__.py.)"""
    sys.exit(main())


if __name__ == "__main__":
    run()
