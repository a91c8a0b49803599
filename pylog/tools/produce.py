"""`pylog produce`: the console producer (kafka-console-producer equivalent).

Owns: reading records from stdin, one per line (optionally `key<sep>value` with parse.key), sending
them with a confluent-kafka Producer, and accounting for every delivery report. Must never drop a
record silently: each failed or undelivered record is reported on stderr and makes the exit non-zero.
"""
from __future__ import annotations

import argparse
import functools
import sys
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from confluent_kafka import KafkaError, Message, Producer

from pylog.tools.errors import CliError
from pylog.tools.client import (
    add_connection_args,
    base_config,
    command_config,
    bool_property,
    check_reachable,
    parse_kv,
    split_properties,
    topic_metadata,
    unescape,
)

ACKS = {"all": "all", "-1": "all", "1": "1", "0": "0"}
COMPRESSION = ["none", "gzip", "snappy", "lz4", "zstd"]
READER_PROPERTIES = ("parse.key", "key.separator", "ignore.error", "null.marker")
MAX_REPORTED_FAILURES = 20
DEFAULT_MESSAGE_TIMEOUT_MS = 30_000


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "produce", help="send lines from stdin as records (console producer)",
        description="Read records from stdin, one per line, and send them to a topic. "
                    "Reader properties: parse.key, key.separator (default TAB), ignore.error, "
                    "null.marker; any other --property is a producer setting.")
    add_connection_args(parser)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--key-separator", default=None, metavar="SEP",
                        help="shortcut for --property parse.key=true --property key.separator=SEP")
    parser.add_argument("--acks", choices=sorted(ACKS), default="all",
                        help="acks required (default all, which also enables idempotence)")
    parser.add_argument("--compression", choices=COMPRESSION, default="none",
                        help="compression codec (default none)")
    parser.add_argument("--partition", type=int, default=None,
                        help="send every record to this partition (default: the partitioner's choice)")
    parser.add_argument("--header", action="append", default=[], metavar="KEY=VALUE",
                        help="header added to every record, repeatable")
    parser.add_argument("--linger-ms", type=int, default=5, help="producer linger.ms (default 5)")
    parser.set_defaults(func=run)


@dataclass
class LineReader:
    """Turns input lines into (key, value) according to the console producer's reader properties."""

    parse_key: bool = False
    separator: bytes = b"\t"
    ignore_error: bool = False
    null_marker: bytes | None = None

    def parse(self, line: bytes, lineno: int) -> tuple[bytes | None, bytes | None]:
        key: bytes | None = None
        value: bytes | None = line
        if self.parse_key:
            k, sep, v = line.partition(self.separator)
            if sep:
                key, value = k, v
            elif not self.ignore_error:
                shown = self.separator.decode("utf-8", "backslashreplace")
                raise ValueError(f"line {lineno}: no key separator {shown!r} found")
        if self.null_marker is not None:
            key = None if key == self.null_marker else key
            value = None if value == self.null_marker else value
        return key, value


@dataclass
class DeliveryTracker:
    """Counts delivery reports and prints the first failures to stderr."""

    sent: int = 0
    delivered: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    def on_delivery(self, lineno: int, err: KafkaError | None, _msg: Message) -> None:
        if err is None:
            self.delivered += 1
            return
        self.fail(f"line {lineno}: delivery failed: {err.name()}: {err.str()}")

    def fail(self, message: str) -> None:
        self.failed += 1
        if self.failed <= MAX_REPORTED_FAILURES:
            print(f"pylog produce: {message}", file=sys.stderr)
        elif self.failed == MAX_REPORTED_FAILURES + 1:
            print("pylog produce: further failures are counted but not shown", file=sys.stderr)


def build_reader(tool_props: dict[str, str], key_separator: str | None) -> LineReader:
    reader = LineReader(
        parse_key=bool_property(tool_props.get("parse.key"), "parse.key"),
        ignore_error=bool_property(tool_props.get("ignore.error"), "ignore.error"),
    )
    if "key.separator" in tool_props:
        reader.separator = unescape(tool_props["key.separator"]).encode("utf-8")
    if key_separator is not None:
        reader.parse_key, reader.separator = True, unescape(key_separator).encode("utf-8")
    if not reader.separator:
        raise CliError("bad key separator: must not be empty")
    if "null.marker" in tool_props:
        reader.null_marker = tool_props["null.marker"].encode("utf-8")
    return reader


def producer_config(args: argparse.Namespace, client_props: dict[str, str]) -> dict[str, Any]:
    acks = ACKS[args.acks]
    settings: dict[str, Any] = {
        "acks": acks,
        "compression.type": args.compression,
        "linger.ms": args.linger_ms,
        "message.timeout.ms": DEFAULT_MESSAGE_TIMEOUT_MS,
    }
    if acks == "all":
        settings["enable.idempotence"] = True
    settings.update(command_config(args))
    settings.update(client_props)
    return base_config(args.bootstrap_server, settings)


def run(args: argparse.Namespace) -> int:
    tool_props, client_props = split_properties(parse_kv(args.properties, "--property"), READER_PROPERTIES)
    headers = list(parse_kv(args.header, "--header").items())
    reader = build_reader(tool_props, args.key_separator)
    check_reachable(args.bootstrap_server)
    try:
        producer = Producer(producer_config(args, client_props))
    except Exception as e:  # noqa: BLE001 - a bad client setting
        raise CliError(f"bad producer settings: {e}") from None
    tm = topic_metadata(producer, args.bootstrap_server, args.topic, allow_auto_create=True)
    if args.partition is not None and args.partition not in tm.partitions:
        raise CliError(f"partition {args.partition} does not exist in topic '{args.topic}' "
                       f"({len(tm.partitions)} partitions)")
    tracker = DeliveryTracker()
    try:
        _send_lines(producer, args, reader, headers, tracker, sys.stdin.buffer)
    except KeyboardInterrupt:
        _finish(producer, tracker, flush_timeout=5.0)
        return 130
    return _finish(producer, tracker, flush_timeout=DEFAULT_MESSAGE_TIMEOUT_MS / 1000 + 10)


def _send_lines(producer: Producer, args: argparse.Namespace, reader: LineReader,
                headers: list[tuple[str, str]], tracker: DeliveryTracker, stream: BinaryIO) -> None:
    partition = -1 if args.partition is None else args.partition
    extra: dict[str, Any] = {"headers": headers} if headers else {}
    for lineno, raw in enumerate(stream, start=1):
        line = raw[:-1] if raw.endswith(b"\n") else raw
        if line.endswith(b"\r"):
            line = line[:-1]
        try:
            key, value = reader.parse(line, lineno)
        except ValueError as e:
            tracker.fail(str(e))
            continue
        callback = functools.partial(tracker.on_delivery, lineno)
        if _produce_one(producer, args.topic, key, value, partition, callback, extra, tracker, lineno):
            tracker.sent += 1
        producer.poll(0)


def _produce_one(producer: Producer, topic: str, key: bytes | None, value: bytes | None,
                 partition: int, callback: Any, extra: dict[str, Any],
                 tracker: DeliveryTracker, lineno: int) -> bool:
    while True:
        try:
            producer.produce(topic, value, key, partition=partition, on_delivery=callback, **extra)
            return True
        except BufferError:  # local queue full: serve delivery reports, then retry
            producer.poll(0.1)
        except Exception as e:  # noqa: BLE001 - e.g. record too large: report and go on
            tracker.fail(f"line {lineno}: not sent: {e}")
            return False


def _finish(producer: Producer, tracker: DeliveryTracker, flush_timeout: float) -> int:
    remaining = producer.flush(flush_timeout)
    if remaining:
        tracker.fail(f"{remaining} records were still undelivered when the flush timed out")
        tracker.failed += remaining - 1
    if tracker.failed:
        raise CliError(f"{tracker.failed} record(s) failed; {tracker.delivered} delivered")
    return 0
