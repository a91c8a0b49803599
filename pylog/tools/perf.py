"""`pylog perf produce|consume`: kafka-producer-perf-test / kafka-consumer-perf-test equivalents.

Owns: the measurement loops (pre-built payload, batched produce with periodic poll(0), one shared
delivery callback using librdkafka's per-message latency, batched consume), progress display (rich bar
on a TTY, one-line summaries on stderr otherwise), and the final summary on stdout (text, plus one
JSON line with --json for benchmark scripts). Must never: do per-record work in the loops beyond what
the numbers need, or report numbers for records that failed.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import string
import sys
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, Message, Producer, TopicPartition

from pylog.tools.errors import CliError
from pylog.tools.client import (add_connection_args, base_config, check_reachable, command_config, parse_kv,
                               topic_metadata)

ACKS = {"all": "all", "-1": "all", "1": "1", "0": "0"}
COMPRESSION = ["none", "gzip", "snappy", "lz4", "zstd"]
PRODUCER_DEFAULTS: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "message.timeout.ms": 60_000,
}
# fetch.queue.backoff.ms: librdkafka stops fetching a partition for this long (default 1000 ms) whenever its local
# queue holds queued.min.messages; a broker that answers faster than the Python loop drains fills the queue and is
# paused a second at a time (pylog measured 0.18M records/s with the default, 1.5M with 10 ms; a slower broker
# never fills it). A throughput tool measures the broker and the client, not that pause.
CONSUMER_DEFAULTS: dict[str, Any] = {"fetch.max.bytes": 52_428_800, "queued.min.messages": 100_000,
                                     "fetch.queue.backoff.ms": 10}
MAX_LATENCY_SAMPLES = 500_000
CHUNK = 1000  # records produced between poll(0)/progress/throttle checks
CONSUME_BATCH = 10_000
MB = 1024 * 1024


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("perf", help="producer and consumer performance tests",
                                   description="Throughput and latency tests (like kafka-*-perf-test).")
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    prod = actions.add_parser("produce", help="send N records of B bytes as fast as allowed")
    add_connection_args(prod)
    prod.add_argument("--topic", required=True)
    prod.add_argument("--num-records", type=int, required=True)
    prod.add_argument("--record-size", type=int, required=True, help="value size in bytes")
    prod.add_argument("--throughput", type=float, default=-1, help="records/s cap (-1: unlimited)")
    prod.add_argument("--acks", choices=sorted(ACKS), default="1", help="default 1")
    prod.add_argument("--compression", choices=COMPRESSION, default="none")
    prod.add_argument("--partition", type=int, default=None, help="send everything to one partition")
    prod.add_argument("--producer-props", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                      help="producer settings (librdkafka names), override the perf defaults "
                           + ", ".join(f"{k}={v}" for k, v in PRODUCER_DEFAULTS.items()))
    _add_output_args(prod)
    prod.set_defaults(func=run_produce)

    cons = actions.add_parser("consume", help="read N records and measure throughput")
    add_connection_args(cons)
    cons.add_argument("--topic", required=True)
    cons.add_argument("--messages", type=int, required=True, help="number of records to read")
    cons.add_argument("--timeout-ms", type=int, default=10_000,
                      help="give up after this long without a record (default 10000)")
    cons.add_argument("--group", default=None, help="subscribe with this group (default: assign, no group)")
    cons.add_argument("--from-latest", action="store_true", help="start at the end instead of the beginning")
    cons.add_argument("--consumer-props", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                      help="consumer settings (librdkafka names)")
    _add_output_args(cons)
    cons.set_defaults(func=run_consume)


def _add_output_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="also print the summary as one JSON line")
    parser.add_argument("--reporting-interval-ms", type=int, default=5000,
                        help="interval of the one-line progress reports when not on a TTY")
    parser.add_argument("--no-progress", action="store_true", help="no progress output")


@dataclass
class Latencies:
    """Latency values (multiplied by `scale` to get ms); percentiles use at most MAX_LATENCY_SAMPLES."""

    scale: float = 1.0
    values: array = field(default_factory=lambda: array("f"))

    def window(self, start: int) -> str:
        """Average and max since index `start`, for progress lines."""
        recent = self.values[start:]
        if not recent:
            return ""
        return (f", {sum(recent) / len(recent) * self.scale:.1f} ms avg latency, "
                f"{max(recent) * self.scale:.1f} ms max latency")

    def summary(self) -> dict[str, float]:
        n = len(self.values)
        if not n:
            return dict.fromkeys(("avg", "max", "p50", "p95", "p99", "p999"), 0.0)
        step = max(1, n // MAX_LATENCY_SAMPLES)
        ordered = sorted(self.values[::step])

        def pct(q: float) -> float:
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * self.scale

        return {"avg": sum(self.values) / n * self.scale, "max": max(self.values) * self.scale,
                "p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99), "p999": pct(0.999)}


class Progress:
    """A rich progress bar on a TTY; otherwise a line on stderr every interval."""

    def __init__(self, total: int, verb: str, interval_ms: int, enabled: bool) -> None:
        self.total, self.verb = total, verb
        self.interval = interval_ms / 1000
        self.enabled = enabled
        self.last_t = self.start = time.monotonic()
        self.last_n = 0
        self.mark = 0  # caller's bookmark, e.g. latency index at the last report
        self._bar: Any = None
        self._task: Any = None
        if enabled and sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress,
                                       TaskProgressColumn, TextColumn, TimeElapsedColumn)
            self._bar = RichProgress(TextColumn(f"[bold]{verb}"), BarColumn(), MofNCompleteColumn(),
                                     TaskProgressColumn(), TextColumn("{task.fields[rate]}"),
                                     TimeElapsedColumn(), console=Console(stderr=True), transient=True)
            self._task = self._bar.add_task(verb, total=total, rate="")
            self._bar.start()

    def due(self) -> bool:
        """Cheap check for the loops: is a display update due?"""
        if not self.enabled:
            return False
        wait = 0.2 if self._bar is not None else self.interval
        return time.monotonic() - self.last_t >= wait

    def update(self, n: int, nbytes_per_record: float, extra: str = "") -> None:
        if not self.due():
            return
        now = time.monotonic()
        if self._bar is not None:
            rate = (n - self.last_n) / (now - self.last_t)
            self._bar.update(self._task, completed=n, rate=f"{rate:,.0f} rec/s")
            self.last_t, self.last_n = now, n
            return
        rate = (n - self.last_n) / (now - self.last_t)
        print(f"{n - self.last_n} records {self.verb}, {rate:.1f} records/sec "
              f"({rate * nbytes_per_record / MB:.2f} MB/sec){extra}.", file=sys.stderr, flush=True)
        self.last_t, self.last_n = now, n

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _payload(size: int) -> bytes:
    rng = random.Random(42)
    return "".join(rng.choices(string.ascii_uppercase, k=size)).encode("ascii")


def run_produce(args: argparse.Namespace) -> int:
    if args.num_records < 1 or args.record_size < 0:
        raise CliError("--num-records must be at least 1 and --record-size not negative")
    props = parse_kv(args.properties, "--property")
    props.update(parse_kv(args.producer_props, "--producer-props"))
    settings: dict[str, Any] = dict(PRODUCER_DEFAULTS, acks=ACKS[args.acks],
                                    **{"compression.type": args.compression})
    if settings["acks"] == "all":
        settings["enable.idempotence"] = True
    settings.update(command_config(args))
    settings.update(props)
    check_reachable(args.bootstrap_server)
    lat = Latencies(scale=1000.0)  # librdkafka reports seconds
    record = lat.values.append
    errors: list[str] = []
    state = {"failed": 0}

    def on_delivery(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            record(msg.latency())
            return
        state["failed"] += 1
        if len(errors) < 5:
            errors.append(f"{err.name()}: {err.str()}")

    settings["on_delivery"] = on_delivery
    pid_state = _track_producer_id(settings)
    try:
        producer = Producer(base_config(args.bootstrap_server, settings))
    except Exception as e:  # noqa: BLE001
        raise CliError(f"bad producer settings: {e}") from None
    tm = topic_metadata(producer, args.bootstrap_server, args.topic, allow_auto_create=True)
    if args.partition is not None and args.partition not in tm.partitions:
        raise CliError(f"partition {args.partition} does not exist in topic '{args.topic}'")
    deadline = time.monotonic() + 10
    while not pid_state["assigned"] and time.monotonic() < deadline:
        producer.poll(0.02)
    progress = Progress(args.num_records, "sent", args.reporting_interval_ms, not args.no_progress)
    try:
        elapsed = _produce_loop(producer, args, _payload(args.record_size), progress, lat)
    finally:
        progress.close()
    result = {"tool": "perf-produce", "topic": args.topic, "records": len(lat.values),
              "failed": state["failed"], "record_size": args.record_size, "acks": settings["acks"],
              "compression": settings["compression.type"]}
    _summary(result, lat, elapsed, args.record_size, "sent", args.json)
    if state["failed"]:
        raise CliError(f"{state['failed']} of {args.num_records} records failed; first: {errors[0]}")
    return 0


def _track_producer_id(settings: dict[str, Any]) -> dict[str, bool]:
    """For an idempotent producer, watch the stats for the producer id so that the wait for it
    (librdkafka often assigns it ~0.5 s after start) stays out of the measurement."""
    idempotent = str(settings.get("enable.idempotence", "false")).lower() == "true"
    user_stats = "stats_cb" in settings or "statistics.interval.ms" in settings
    state = {"assigned": not idempotent or user_stats}
    if not state["assigned"]:
        settings["statistics.interval.ms"] = 100

        def on_stats(stats: str) -> None:
            if not state["assigned"] and '"idemp_state": "Assigned"' in stats:
                state["assigned"] = True

        settings["stats_cb"] = on_stats
    return state


def _produce_loop(producer: Producer, args: argparse.Namespace, payload: bytes,
                  progress: Progress, lat: Latencies) -> float:
    produce, poll, topic = producer.produce, producer.poll, args.topic
    kwargs = {} if args.partition is None else {"partition": args.partition}
    n, rate = args.num_records, args.throughput
    chunk = CHUNK if rate <= 0 else max(1, min(CHUNK, int(rate / 100)))
    start = time.monotonic()
    sent = 0
    while sent < n:
        for _ in range(min(chunk, n - sent)):
            while True:
                try:
                    produce(topic, payload, **kwargs)
                    break
                except BufferError:  # queue full: let delivery reports drain it
                    poll(0.005)
        sent += min(chunk, n - sent)
        poll(0)
        if progress.due():
            progress.update(sent, len(payload), lat.window(progress.mark))
            progress.mark = len(lat.values)
        if rate > 0:
            ahead = sent / rate - (time.monotonic() - start)
            if ahead > 0:
                time.sleep(ahead)
    while producer.flush(0.2) > 0:
        progress.update(sent - len(producer), len(payload))
    return time.monotonic() - start


def _summary(result: dict[str, Any], lat: Latencies, elapsed: float, bytes_per_record: float,
             verb: str, as_json: bool, label: str = "latency") -> None:
    n = result["records"]
    rps = n / elapsed if elapsed > 0 else 0.0
    mbps = rps * bytes_per_record / MB
    s = lat.summary()
    print(f"{n} records {verb}, {rps:.1f} records/sec ({mbps:.2f} MB/sec), "
          f"{s['avg']:.2f} ms avg {label}, {s['max']:.2f} ms max {label}, {s['p50']:.2f} ms 50th, "
          f"{s['p95']:.2f} ms 95th, {s['p99']:.2f} ms 99th, {s['p999']:.2f} ms 99.9th.", flush=True)
    if as_json:
        result.update(elapsed_s=round(elapsed, 6), records_per_sec=round(rps, 1),
                      mb_per_sec=round(mbps, 3), latency_kind=label,
                      **{f"latency_{k}_ms": round(v, 3) for k, v in s.items()})
        print(json.dumps(result), flush=True)


def run_consume(args: argparse.Namespace) -> int:
    if args.messages < 1:
        raise CliError("--messages must be at least 1")
    props = parse_kv(args.properties, "--property")
    props.update(parse_kv(args.consumer_props, "--consumer-props"))
    settings: dict[str, Any] = dict(CONSUMER_DEFAULTS, **{
        "group.id": args.group or f"pylog-perf-consumer-{os.getpid()}",
        "enable.auto.commit": bool(args.group),
        "auto.offset.reset": "latest" if args.from_latest else "earliest",
    })
    settings.update(command_config(args))
    settings.update(props)
    check_reachable(args.bootstrap_server)
    try:
        consumer = Consumer(base_config(args.bootstrap_server, settings))
    except Exception as e:  # noqa: BLE001
        raise CliError(f"bad consumer settings: {e}") from None
    try:
        tm = topic_metadata(consumer, args.bootstrap_server, args.topic)
        if args.group:
            consumer.subscribe([args.topic])
        else:
            start = OFFSET_END if args.from_latest else OFFSET_BEGINNING
            consumer.assign([TopicPartition(args.topic, p, start) for p in sorted(tm.partitions)])
        lat = Latencies(scale=1.0)
        progress = Progress(args.messages, "consumed", args.reporting_interval_ms, not args.no_progress)
        try:
            count, nbytes, elapsed, timed_out = _consume_loop(consumer, args, progress, lat)
        finally:
            progress.close()
    finally:
        consumer.close()
    result = {"tool": "perf-consume", "topic": args.topic, "records": count, "bytes": nbytes,
              "mb": round(nbytes / MB, 3)}
    _summary(result, lat, elapsed, nbytes / count if count else 0.0, "consumed", args.json,
             label="time since produce")
    if timed_out:
        raise CliError(f"consumed {count} of {args.messages} records: no record for {args.timeout_ms} ms")
    return 0


def _consume_loop(consumer: Consumer, args: argparse.Namespace, progress: Progress,
                  lat: Latencies) -> tuple[int, int, float, bool]:
    """Returns (records, bytes, seconds from start to the last record, timed out)."""
    want, idle = args.messages, args.timeout_ms / 1000
    consume, record = consumer.consume, lat.values.append
    every = max(1, want // MAX_LATENCY_SAMPLES)
    count = nbytes = 0
    start = last = time.monotonic()
    while count < want:
        batch = consume(min(CONSUME_BATCH, want - count), 0.1)
        now = time.monotonic()
        if not batch:
            if now - last >= idle:
                return count, nbytes, last - start, True
            continue
        now_ms = time.time() * 1000.0
        got = 0
        for m in batch:
            err = m.error()
            if err is not None:
                if err.fatal() or err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise CliError(f"consumer failed: {err.name()}: {err.str()}")
                continue
            value = m.value()
            nbytes += len(value) if value is not None else 0
            if (count + got) % every == 0:
                record(now_ms - m.timestamp()[1])
            got += 1
        if got:
            count += got
            last = now
            if progress.due():
                progress.update(count, nbytes / count)
    return count, nbytes, last - start, False
