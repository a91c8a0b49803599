"""`pylog consume`: the console consumer (kafka-console-consumer equivalent).

Owns: choosing where to start (assign() without a group, subscribe() with one), the isolation level
(read_uncommitted unless --isolation-level read_committed, as kafka-console-consumer), the stop
conditions (--max-messages, idle --timeout-ms, --exit-at-end) and writing records to stdout in the
default (Kafka's DefaultMessageFormatter), kcat-style --format, or JSON layout.
Must never: commit offsets when no --group was given.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
from typing import Any, Callable

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_STORED,
    Consumer,
    KafkaError,
    Message,
    TopicPartition,
)

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

FORMATTER_PROPERTIES = ("print.key", "print.value", "print.offset", "print.partition",
                        "print.timestamp", "print.headers", "key.separator", "line.separator",
                        "headers.separator", "null.literal")
TIMESTAMP_TYPES = {0: "NO_TIMESTAMP", 1: "CreateTime", 2: "LogAppendTime"}
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
BATCH_SIZE = 1000
POLL_TIMEOUT_S = 0.2

Formatter = Callable[[Message], bytes]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "consume", help="print records of a topic (console consumer)",
        description="Print records to stdout. Formatter properties (print.key, print.offset, "
                    "print.partition, print.timestamp, print.headers, print.value, key.separator, "
                    "line.separator, headers.separator, null.literal) may be given with --property; "
                    "any other --property is a consumer setting.")
    add_connection_args(parser)
    parser.add_argument("--topic", required=True)
    start = parser.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument("--offset", default=None, metavar="N|earliest|latest",
                       help="start offset (default latest; with --group: the committed offset)")
    parser.add_argument("--partition", type=int, default=None, help="read only this partition")
    parser.add_argument("--group", default=None,
                        help="consumer group (subscribe and commit); without it, partitions are assigned "
                             "directly and nothing is committed")
    parser.add_argument("--max-messages", type=int, default=None, help="stop after N records")
    parser.add_argument("--timeout-ms", type=int, default=None,
                        help="stop after N ms without a record (default: wait forever)")
    parser.add_argument("--exit-at-end", action="store_true",
                        help="stop when every assigned partition has been read to its end")
    parser.add_argument("--isolation-level", choices=ISOLATION_LEVELS, default=None,
                        help="read_committed: only records of committed transactions, up to the last stable "
                             "offset; read_uncommitted (the default, as kafka-console-consumer): every record "
                             "up to the high watermark")
    parser.add_argument("--formatter", choices=["default", "json"], default="default",
                        help="json: one object per record with topic, partition, offset, timestamp, "
                             "timestampType, key, value, headers")
    parser.add_argument("--format", default=None, metavar="FMT",
                        help="kcat-style format: %%t topic, %%p partition, %%o offset, %%k key, "
                             "%%v value, %%T timestamp, %%h headers, %%K/%%S key/value length; "
                             "a newline is added unless FMT ends with one")
    for name in ("key", "offset", "partition", "timestamp", "headers"):
        parser.add_argument(f"--print-{name}", action="store_true", help=f"print the record's {name}")
    parser.add_argument("--key-separator", default=None, metavar="SEP",
                        help="separator between printed fields (default TAB)")
    parser.set_defaults(func=run)


def _text(data: bytes | None, null: bytes) -> bytes:
    return null if data is None else data


def default_formatter(props: dict[str, str], args: argparse.Namespace) -> Formatter:
    """Kafka's DefaultMessageFormatter: [ts][sep partition][sep offset][sep headers][sep key][sep value]."""
    def flag(name: str, cli: bool, default: bool = False) -> bool:
        return cli or bool_property(props.get(f"print.{name}"), f"print.{name}", default)

    show_ts, show_part = flag("timestamp", args.print_timestamp), flag("partition", args.print_partition)
    show_off, show_hdr = flag("offset", args.print_offset), flag("headers", args.print_headers)
    show_key, show_val = flag("key", args.print_key), flag("value", False, True)
    sep_text = args.key_separator if args.key_separator is not None else props.get("key.separator", "\t")
    sep = unescape(sep_text).encode()
    line_sep = unescape(props.get("line.separator", "\n")).encode()
    hdr_sep = unescape(props.get("headers.separator", ",")).encode()
    null = props.get("null.literal", "null").encode()

    def fmt(m: Message) -> bytes:
        fields: list[bytes] = []
        if show_ts:
            ts_type, ts = m.timestamp()
            fields.append(f"{TIMESTAMP_TYPES[ts_type]}:{ts}".encode() if ts_type else b"NO_TIMESTAMP")
        if show_part:
            fields.append(b"Partition:%d" % m.partition())
        if show_off:
            fields.append(b"Offset:%d" % m.offset())
        if show_hdr:
            headers = m.headers()
            fields.append(hdr_sep.join(k.encode() + b":" + _text(v, null) for k, v in headers)
                          if headers else b"NO_HEADERS")
        if show_key:
            fields.append(_text(m.key(), null))
        if show_val:
            fields.append(_text(m.value(), null))
        return sep.join(fields) + line_sep

    return fmt


def pattern_formatter(pattern: str) -> Formatter:
    """kcat-style `-f` format with %-tokens and backslash escapes; ends each record with a newline."""
    text = unescape(pattern)
    if not text.endswith("\n"):
        text += "\n"
    parts: list[str | Callable[[Message], bytes]] = []
    tokens: dict[str, Callable[[Message], bytes]] = {
        "t": lambda m: m.topic().encode(),
        "p": lambda m: b"%d" % m.partition(),
        "o": lambda m: b"%d" % m.offset(),
        "k": lambda m: m.key() or b"",
        "v": lambda m: m.value() or b"",
        "T": lambda m: b"%d" % m.timestamp()[1],
        "K": lambda m: b"%d" % len(m.key() or b""),
        "S": lambda m: b"%d" % len(m.value() or b""),
        "h": lambda m: b",".join(k.encode() + b"=" + (v or b"") for k, v in (m.headers() or [])),
    }
    i, literal = 0, ""
    while i < len(text):
        ch = text[i]
        if ch == "%" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "%":
                literal += "%"
            elif nxt in tokens:
                if literal:
                    parts.append(literal)
                    literal = ""
                parts.append(tokens[nxt])
            else:
                raise CliError(f"bad --format {pattern!r}: unknown token %{nxt}")
            i += 2
            continue
        literal += ch
        i += 1
    if literal:
        parts.append(literal)
    compiled = [p.encode() if isinstance(p, str) else p for p in parts]

    def fmt(m: Message) -> bytes:
        return b"".join(p if isinstance(p, bytes) else p(m) for p in compiled)

    return fmt


def _json_bytes(data: bytes | None, name: str, obj: dict[str, Any]) -> None:
    if data is None:
        obj[name] = None
        return
    try:
        obj[name] = data.decode("utf-8")
    except UnicodeDecodeError:
        obj[name] = base64.b64encode(data).decode("ascii")
        obj[f"{name}Encoding"] = "base64"


def json_formatter(m: Message) -> bytes:
    """One JSON object per record; binary keys/values are base64 with a keyEncoding/valueEncoding field."""
    ts_type, ts = m.timestamp()
    obj: dict[str, Any] = {"topic": m.topic(), "partition": m.partition(), "offset": m.offset(),
                           "timestamp": ts if ts_type else None,
                           "timestampType": TIMESTAMP_TYPES[ts_type]}
    _json_bytes(m.key(), "key", obj)
    _json_bytes(m.value(), "value", obj)
    obj["headers"] = [[k, None if v is None else v.decode("utf-8", "backslashreplace")]
                      for k, v in (m.headers() or [])]
    return json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n"


def start_offset(args: argparse.Namespace) -> int:
    if args.from_beginning:
        return OFFSET_BEGINNING
    spec = args.offset
    if spec is None:
        return OFFSET_STORED if args.group else OFFSET_END
    if spec in ("earliest", "beginning"):
        return OFFSET_BEGINNING
    if spec in ("latest", "end"):
        return OFFSET_END
    if spec.isdigit():
        return int(spec)
    raise CliError(f"bad --offset '{spec}': expected a non-negative number, earliest or latest")


def run(args: argparse.Namespace) -> int:
    tool_props, client_props = split_properties(parse_kv(args.properties, "--property"),
                                                FORMATTER_PROPERTIES)
    if args.formatter == "json":
        formatter: Formatter = json_formatter
    elif args.format is not None:
        formatter = pattern_formatter(args.format)
    else:
        formatter = default_formatter(tool_props, args)
    offset = start_offset(args)
    for flag in ("max_messages", "timeout_ms"):
        value = getattr(args, flag)
        if value is not None and value < 0:
            raise CliError(f"bad --{flag.replace('_', '-')} {value}: must not be negative")
    check_reachable(args.bootstrap_server)
    watch = BrokerWatch(args.bootstrap_server)
    consumer = _make_consumer(args, client_props, offset, watch)
    try:
        _start(consumer, args, offset)
        count = _loop(consumer, args, formatter, watch)
    finally:
        consumer.close()
    print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0


class BrokerWatch:
    """librdkafka's error callback for the console consumer: when every broker is unreachable (the broker went
    away while reading) it says so on stderr, once, and again when the connection is back."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap, self.down = bootstrap, False

    def __call__(self, err: KafkaError) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN and not self.down:
            self.down = True
            print(f"pylog consume: warning: lost the connection to every broker ({self.bootstrap}); still trying "
                  "(Ctrl-C to stop)", file=sys.stderr, flush=True)

    def message(self) -> None:
        if self.down:
            self.down = False
            print("pylog consume: connected again", file=sys.stderr, flush=True)


def _make_consumer(args: argparse.Namespace, client_props: dict[str, str], offset: int,
                   watch: BrokerWatch | None = None) -> Consumer:
    settings: dict[str, Any] = {
        "group.id": args.group or f"pylog-console-consumer-{os.getpid()}",
        "enable.auto.commit": bool(args.group),
        "auto.offset.reset": "earliest" if offset == OFFSET_BEGINNING else "latest",
        "enable.partition.eof": args.exit_at_end,
        "isolation.level": "read_uncommitted",    # librdkafka's default is read_committed; Kafka's tool's is not
    }
    settings.update(command_config(args))
    settings.update(client_props)
    if args.isolation_level is not None:
        given = client_props.get("isolation.level")
        if given is not None and given != args.isolation_level:
            raise CliError(f"--isolation-level {args.isolation_level} contradicts --property isolation.level={given}")
        settings["isolation.level"] = args.isolation_level
    if watch is not None:
        settings["error_cb"] = watch
    try:
        return Consumer(base_config(args.bootstrap_server, settings))
    except Exception as e:  # noqa: BLE001 - a bad client setting
        raise CliError(f"bad consumer settings: {e}") from None


def _start(consumer: Consumer, args: argparse.Namespace, offset: int) -> None:
    tm = topic_metadata(consumer, args.bootstrap_server, args.topic)
    if args.partition is not None and args.partition not in tm.partitions:
        raise CliError(f"partition {args.partition} does not exist in topic '{args.topic}' "
                       f"({len(tm.partitions)} partitions)")
    if args.group and args.partition is None:
        if offset >= 0:
            raise CliError("--offset N with --group needs --partition")
        consumer.subscribe([args.topic])
        return
    partitions = [args.partition] if args.partition is not None else sorted(tm.partitions)
    consumer.assign([TopicPartition(args.topic, p, offset) for p in partitions])


def _loop(consumer: Consumer, args: argparse.Namespace, formatter: Formatter, watch: BrokerWatch) -> int:
    out = sys.stdout.buffer
    limit = args.max_messages
    idle_s = None if args.timeout_ms is None else args.timeout_ms / 1000
    count = 0
    at_end: set[tuple[str, int]] = set()
    last = time.monotonic()
    while limit is None or count < limit:
        batch = consumer.consume(BATCH_SIZE if limit is None else min(BATCH_SIZE, limit - count),
                                 POLL_TIMEOUT_S)
        now = time.monotonic()
        lines: list[bytes] = []
        for m in batch:
            err = m.error()
            if err is None:
                lines.append(formatter(m))
                at_end.discard((m.topic(), m.partition()))
            elif err.code() == KafkaError._PARTITION_EOF:
                at_end.add((m.topic(), m.partition()))
            elif err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise CliError(f"unknown topic '{args.topic}'")
            elif err.fatal():
                raise CliError(f"consumer failed: {err.name()}: {err.str()}")
            else:
                print(f"pylog consume: warning: {err.name()}: {err.str()}", file=sys.stderr)
        if lines:
            watch.message()
            last = now
            count += len(lines)
            if not _write(out, lines):
                break
        if args.exit_at_end and at_end and len(at_end) >= len(consumer.assignment()):
            break
        if idle_s is not None and not lines and now - last >= idle_s:
            break
    return count


def _write(out: Any, lines: list[bytes]) -> bool:
    """Write a batch; False when the reader went away (e.g. `| head`)."""
    try:
        out.write(b"".join(lines))
        out.flush()
        return True
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # keep interpreter shutdown from failing again
        return False
