"""Broker throughput benchmark: pylog against Tansu (a Rust Kafka-compatible broker), same client.

Measures with confluent-kafka (librdkafka), alternating the two brokers for every figure in the
same run (pylog, tansu, pylog, tansu, ...; the median of N repetitions is reported):

- produce throughput, records/s and MB/s (1 MB = 10^6 bytes of record value), for 100 B and 1 KB
  records on 1 and 8 partitions: linger.ms 5, batch.size 1 MB, acks=1, no compression, one
  pre-built payload, a tight produce() loop with poll(0) every 1000 records, timed from the first
  send to the end of flush();
- consume throughput for the same four cases: a Consumer that assign()s every partition from
  offset 0 (no group subscription, enable.auto.commit false), default fetch settings except
  fetch.max.bytes 64 MB and fetch.queue.backoff.ms 10 (librdkafka's 1 s default stalls a Python
  consumer on both brokers alike), timed from assign() until all N records are seen (it reads the topic the
  produce measurement just wrote, so it also checks that nothing was lost);
- produce latency p50/p99 at a fixed rate (10,000 records/s of 100 B for 5 s, linger.ms 0,
  acks=1): delivery-callback time minus send time; also at 1,000 records/s, below saturation
  (with linger.ms 0 librdkafka sends about one Produce request per record, so 10,000 records/s
  is 10,000 requests/s; a broker that cannot keep up shows a growing queue, i.e. seconds);
- the broker's CPU time (user+system from /proc/PID/stat) during every measurement, as CPU
  microseconds per record: with one Python client on 2 cores the client is often the bottleneck,
  and this figure shows the broker's own cost even when the throughput figures are client-bound.

Every measurement runs in a fresh client process (this script re-invoked with --worker); each
broker is its own process. pylog runs with its default settings (segments on disk, no fsync per
message, as Kafka's defaults); Tansu with its memory storage engine. Topics are created with
AdminClient on both and deleted after use.

Usage:
  .venv/bin/python bench/broker_throughput.py            # full run (about 7-9 minutes on 2 cores)
  .venv/bin/python bench/broker_throughput.py --quick    # smoke run (about 1 minute)
  .venv/bin/python bench/broker_throughput.py --reps 5 --records-100b 2000000 --out results.json
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402
from peers import tansu  # noqa: E402  (on the path through _common)

MB = 1_000_000
FETCH_MAX_BYTES = 64 * 1024 * 1024
FETCH_QUEUE_BACKOFF_MS = 10


# --------------------------------------------------------------------------- workers (client side)

def worker_produce(bootstrap: str, topic: str, count: int, size: int) -> dict:
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_error(err, _msg) -> None:  # only failed deliveries are reported
        errors.append(str(err))

    p = Producer({
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "batch.size": 1024 * 1024,
        "acks": 1,
        "compression.type": "none",
        "delivery.report.only.error": True,
        "on_delivery": on_error,
    })
    p.list_topics(topic, timeout=10)  # connect and learn the leaders before the clock starts
    payload = os.urandom(size)
    produce, poll = p.produce, p.poll
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                produce(topic, payload)
                break
            except BufferError:  # local queue full: let librdkafka drain it
                poll(0.001)
        if i % 1000 == 0:
            poll(0)
    remaining = p.flush(120)
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "records": count, "errors": len(errors) + remaining,
            "first_error": errors[0] if errors else None,
            "records_per_s": count / elapsed, "mb_per_s": count * size / elapsed / MB}


def worker_consume(bootstrap: str, topic: str, count: int, size: int, partitions: int, extra: dict | None = None) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "fetch.max.bytes": FETCH_MAX_BYTES,
        "receive.message.max.bytes": FETCH_MAX_BYTES + 1024 * 1024,
        # librdkafka's default (1000 ms) pauses fetching for a whole second whenever the local queue
        # holds queued.min.messages (100k): the Python loop drains slower than either broker serves,
        # so with the default both brokers measure the same ~140k rec/s. 10 ms keeps fetching going.
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
        **(extra or {}),
    })
    c.list_topics(topic, timeout=10)
    seen = errors = 0
    first_error = None
    deadline = time.monotonic() + 180
    started = time.perf_counter()
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    while seen < count and time.monotonic() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                seen += 1
            else:
                errors += 1
                first_error = first_error or str(m.error())
    elapsed = time.perf_counter() - started
    c.close()
    return {"seconds": elapsed, "records": seen, "expected": count, "errors": errors + (count - seen),
            "first_error": first_error,
            "records_per_s": seen / elapsed, "mb_per_s": seen * size / elapsed / MB}


def worker_latency(bootstrap: str, topic: str, rate: int, seconds: float, size: int) -> dict:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": 1, "compression.type": "none"})
    p.list_topics(topic, timeout=10)
    payload = os.urandom(size)
    for _ in range(500):  # warm-up: connections, metadata, first segment
        p.produce(topic, payload)
    p.flush(30)
    latencies: list[float] = []
    errors: list[str] = []
    now = time.perf_counter

    def make_cb(sent: float):
        def cb(err, _msg) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                latencies.append(now() - sent)
        return cb

    total = int(rate * seconds)
    interval = 1.0 / rate
    started = now()
    for i in range(total):
        due = started + i * interval
        while True:  # serve callbacks while waiting for the next send slot
            wait = due - now()
            if wait <= 0:
                break
            p.poll(min(wait, 0.0005))
        t = now()
        p.produce(topic, payload, on_delivery=make_cb(t))
        p.poll(0)
    p.flush(60)
    elapsed = now() - started
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000.0

    return {"records": total, "delivered": len(latencies), "errors": len(errors),
            "first_error": errors[0] if errors else None, "seconds": elapsed,
            "achieved_rate": total / elapsed, "p50_ms": pct(0.50), "p99_ms": pct(0.99),
            "p999_ms": pct(0.999), "max_ms": latencies[-1] * 1000.0, "mean_ms": statistics.fmean(latencies) * 1000.0}


def run_worker(args: argparse.Namespace) -> int:
    spec = json.loads(args.worker_spec)
    kind = spec.pop("kind")
    fn = {"produce": worker_produce, "consume": worker_consume, "latency": worker_latency}[kind]
    print(json.dumps(fn(**spec)))
    return 0


def call_worker(spec: dict, broker_pid: int | None = None, timeout_s: float = 300.0) -> dict:
    """Run one measurement in a fresh client process; adds the broker's CPU seconds meanwhile
    (user+system, including the client's connect/metadata set-up, which is small)."""
    cmd = [sys.executable, __file__, "--worker", "--worker-spec", json.dumps(spec)]
    cpu0 = _common.cpu_split(broker_pid) if broker_pid else None
    cache0 = _common.page_cache_mb()
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"failed": f"worker timed out after {timeout_s}s"}
    if out.returncode != 0:
        return {"failed": (out.stderr or out.stdout).strip()[-2000:]}
    result = json.loads(out.stdout.strip().splitlines()[-1])
    if cpu0 is not None:
        try:
            user, system = _common.cpu_split(broker_pid)
            result["broker_cpu_s"] = user + system - sum(cpu0)
            result["broker_sys_share"] = (system - cpu0[1]) / max(result["broker_cpu_s"], 1e-9)
            if result.get("records"):
                result["broker_cpu_us_per_record"] = result["broker_cpu_s"] / result["records"] * 1e6
        except OSError:
            pass
    result["page_cache_mb"] = {"before": cache0, "after": _common.page_cache_mb()}
    return result


# --------------------------------------------------------------------------- orchestration

class Brokers:
    """The two brokers under test; restarts one that died so a run carries on."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: dict[str, _common.BrokerProc] = {}
        self.restarts = {"pylog": 0, "tansu": 0, "kafka": 0}

    def start(self, name: str) -> _common.BrokerProc:
        if name == "pylog":
            data = self.workdir / f"pylog-data-{self.restarts['pylog']}"
            bp = _common.start_pylog(data, log_path=self.workdir / "pylog.log")
        elif name == "kafka":
            bp = _common.start_kafka(self.workdir / f"kafka-{self.restarts['kafka']}")
        else:
            bp = _common.start_tansu(self.workdir / "tansu.log")
        self.procs[name] = bp
        return bp

    def get(self, name: str) -> _common.BrokerProc:
        bp = self.procs.get(name)
        if bp is None or bp.proc.poll() is not None:
            if bp is not None:
                print(f"  !! {name} exited with {bp.proc.returncode}; restarting (see {bp.log_path})", file=sys.stderr)
                self.restarts[name] += 1
            bp = self.start(name)
        return bp

    def stop_all(self) -> dict[str, int | None]:
        return {name: bp.stop() for name, bp in self.procs.items()}


def machine_info() -> dict:
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import confluent_kafka

    try:
        tansu_version = subprocess.run([str(tansu.tansu_binary()), "--version"], capture_output=True,
                                       text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        tansu_version = "?"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=_common.REPO, capture_output=True,
                                text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        commit = "?"
    return {"cores": os.cpu_count(), "cpu": cpu, "memory_gib": round(mem_gb, 1), "os": platform.platform(),
            "python": platform.python_version(), "confluent_kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0], "tansu": tansu_version, "pylog_commit": commit}


def median_of(runs: list[dict], key: str) -> float | None:
    vals = [r[key] for r in runs if "failed" not in r and not r.get("errors") and r.get(key) is not None]
    return statistics.median(vals) if vals else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true", help="smoke run: small sizes, 1 repetition (about 1 minute)")
    ap.add_argument("--reps", type=int, default=None, help="repetitions per broker and figure (default 5; quick 1)")
    ap.add_argument("--records-100b", type=int, default=None, help="records per 100 B case (default 1,000,000)")
    ap.add_argument("--records-1k", type=int, default=None, help="records per 1 KB case (default 300,000)")
    ap.add_argument("--latency-rates", default="10000,1000",
                    help="comma list of records/s for the latency test (default 10000,1000)")
    ap.add_argument("--latency-seconds", type=float, default=None, help="length of the latency test (default 5)")
    ap.add_argument("--brokers", default="pylog,tansu", help="comma list out of pylog,tansu,kafka (Apache Kafka 3.9, "
                    "KRaft, heap 1 GB, from the jars `make test` fetches)")
    ap.add_argument("--skip", default="", help="comma list out of produce,latency (consume needs produce)")
    ap.add_argument("--workdir", type=Path, default=None, help="parent of the temporary pylog data dir")
    ap.add_argument("--out", type=Path, default=None,
                    help="JSON result file (default bench/results/broker_throughput-<date>.json)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-spec", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--prefault-gib", type=float, default=0.0,
                    help="touch this much fresh memory first (the VM's first-touch cost, _common.prefault_memory)")
    args = ap.parse_args()
    if args.prefault_gib > 0:
        print(f"prefaulted {args.prefault_gib:g} GiB in {_common.prefault_memory(args.prefault_gib):.1f}s", flush=True)
    if args.worker:
        return run_worker(args)

    reps = args.reps or (1 if args.quick else 5)
    n100 = args.records_100b or (200_000 if args.quick else 1_000_000)
    n1k = args.records_1k or (50_000 if args.quick else 300_000)
    latency_rates = [int(r) for r in args.latency_rates.split(",") if r.strip()]
    lat_s = args.latency_seconds or (2.0 if args.quick else 5.0)
    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    cases = [(100, 1, n100), (100, 8, n100), (1024, 1, n1k), (1024, 8, n1k)]
    stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    out = args.out or _common.REPO / "bench" / "results" / f"broker_throughput-{stamp}.json"
    command = shlex.join([sys.executable] + sys.argv)

    results: dict[str, dict[str, list[dict]]] = {}

    def record(figure: str, broker: str, r: dict) -> None:
        results.setdefault(figure, {b: [] for b in brokers})[broker].append(r)

    begun = time.monotonic()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="pylog-bench-", dir=args.workdir) as tmp:
        workdir = Path(tmp)
        bk = Brokers(workdir)
        try:
            for b in brokers:
                bk.get(b)
            if "produce" not in skip:
                for size, parts, n in cases:
                    label = f"{'100 B' if size == 100 else '1 KB'} x {parts}p"
                    for rep in range(reps):
                        for b in brokers:
                            bp = bk.get(b)
                            topic = f"tp-{size}-{parts}-{rep}-{uuid.uuid4().hex[:6]}"
                            try:
                                _common.create_topic(bp.bootstrap, topic, parts)
                            except Exception as e:  # noqa: BLE001
                                record(f"produce {label}", b, {"failed": f"create topic: {e}"})
                                record(f"consume {label}", b, {"failed": f"create topic: {e}"})
                                continue
                            pr = call_worker({"kind": "produce", "bootstrap": bp.bootstrap, "topic": topic,
                                              "count": n, "size": size}, bp.proc.pid)
                            record(f"produce {label}", b, pr)
                            cr = call_worker({"kind": "consume", "bootstrap": bp.bootstrap, "topic": topic,
                                              "count": n, "size": size, "partitions": parts}, bp.proc.pid)
                            record(f"consume {label}", b, cr)
                            _common.delete_topic(bp.bootstrap, topic)
                            print(f"  [{time.monotonic() - begun:6.0f}s] {label:12s} rep {rep + 1}/{reps} {b:5s}: "
                                  f"produce {_fmt_run(pr)}  consume {_fmt_run(cr)}", file=sys.stderr)
            if "latency" not in skip:
                for rate in latency_rates:
                    for rep in range(reps):
                        for b in brokers:
                            bp = bk.get(b)
                            topic = f"lat-{rate}-{rep}-{uuid.uuid4().hex[:6]}"
                            _common.create_topic(bp.bootstrap, topic, 1)
                            lr = call_worker({"kind": "latency", "bootstrap": bp.bootstrap, "topic": topic,
                                              "rate": rate, "seconds": lat_s, "size": 100}, bp.proc.pid)
                            record(f"latency {rate}", b, lr)
                            _common.delete_topic(bp.bootstrap, topic)
                            msg = lr.get("failed") or (
                                f"p50 {lr['p50_ms']:.2f} ms p99 {lr['p99_ms']:.2f} ms rate {lr['achieved_rate']:.0f}/s "
                                f"errors {lr['errors']} broker cpu {lr.get('broker_cpu_s', 0):.2f}s")
                            print(f"  [{time.monotonic() - begun:6.0f}s] latency {rate}/s rep {rep + 1}/{reps} {b:5s}: {msg}",
                                  file=sys.stderr)
            rss = {}
            for b, bp in bk.procs.items():
                try:
                    rss[b] = {"rss_mb": _common.rss_mb(bp.proc.pid), "hwm_mb": _common.rss_mb(bp.proc.pid, "VmHWM")}
                except (OSError, KeyError):
                    pass
        finally:
            exit_codes = bk.stop_all()

    summary = summarize(results, brokers)
    doc = {
        "benchmark": "broker_throughput",
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": command,
        "machine": machine_info(),
        "settings": {"reps": reps, "records_100b": n100, "records_1k": n1k, "latency_rates": latency_rates,
                     "latency_seconds": lat_s, "fetch_max_bytes": FETCH_MAX_BYTES, "fetch_queue_backoff_ms": FETCH_QUEUE_BACKOFF_MS, "quick": args.quick,
                     "pylog": "defaults (disk, no fsync per message)", "tansu": "memory://tansu/",
                     "kafka": "Apache Kafka 3.9.1 KRaft one node, heap 1 GB, peers/kafka.py settings"},
        "wall_seconds": round(time.monotonic() - begun, 1),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "broker_memory_at_end": rss,
        "broker_exit_codes": exit_codes,
        "broker_restarts": bk.restarts,
        "summary": summary,
        "runs": results,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2))
    print_table(summary, brokers, doc)
    print(f"results written to {out}")
    return 0


def _fmt_run(r: dict) -> str:
    if "failed" in r:
        return "FAILED " + r["failed"].splitlines()[-1][:120]
    err = f" ERRORS {r['errors']} ({r.get('first_error')})" if r.get("errors") else ""
    cpu = (f" (broker cpu {r['broker_cpu_s']:.2f}s, {r['broker_sys_share']:.0%} system;"
           f" dirty {r['page_cache_mb']['after'].get('dirty_mb', 0):.0f} MiB)") if "broker_cpu_s" in r else ""
    return f"{r['records_per_s'] / 1000:6.0f}k rec/s {r['mb_per_s']:6.1f} MB/s{cpu}{err}"


def summarize(results: dict, brokers: list[str]) -> list[dict]:
    rows = []
    for figure, by_broker in results.items():
        if figure.startswith("latency"):
            rate = int(figure.split()[1])
            metrics = [("p50_ms", "ms"), ("p99_ms", "ms"), ("achieved_rate", "rec/s"), ("broker_cpu_us_per_record", "cpu us/rec")]
        else:
            metrics = [("records_per_s", "rec/s"), ("mb_per_s", "MB/s"), ("broker_cpu_us_per_record", "cpu us/rec")]
        for key, unit in metrics:
            name = figure
            if figure.startswith("latency"):
                what = {"p50_ms": "p50", "p99_ms": "p99", "achieved_rate": "achieved rate",
                        "broker_cpu_us_per_record": "broker CPU"}[key]
                name = f"latency {what} ({rate:,} rec/s of 100 B)"
            elif key == "broker_cpu_us_per_record":
                name = f"{figure}: broker CPU"
            row = {"figure": name, "metric": key, "unit": unit}
            for b in brokers:
                row[b] = median_of(by_broker.get(b, []), key)
                row[f"{b}_runs"] = [round(r[key], 2) if r.get(key) is not None else None for r in by_broker.get(b, [])]
                row[f"{b}_failed"] = sum(1 for r in by_broker.get(b, []) if "failed" in r or r.get("errors"))
            for peer in brokers:
                if peer != "pylog" and "pylog" in brokers and row["pylog"] and row[peer]:
                    row[f"ratio_pylog_over_{peer}"] = row["pylog"] / row[peer]
            rows.append(row)
    return rows


def print_table(summary: list[dict], brokers: list[str], doc: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    peers = [b for b in brokers if b != "pylog"]
    t = Table(title=f"pylog vs {', '.join(peers)}, median of {doc['settings']['reps']} "
                    f"({doc['machine']['cores']} cores, {doc['date']})")
    t.add_column("figure")
    t.add_column("unit")
    for b in brokers:
        t.add_column(b, justify="right")
    for peer in peers:
        t.add_column(f"pylog/{peer}", justify="right")
    t.add_column("note")
    for row in summary:
        cells = [row["figure"], row["unit"]]
        for b in brokers:
            v = row[b]
            cells.append("-" if v is None else (f"{v:,.0f}" if row["unit"] == "rec/s" else f"{v:,.2f}"))
        for peer in peers:
            ratio = row.get(f"ratio_pylog_over_{peer}")
            cells.append("-" if ratio is None else f"{ratio:.2f}")
        bad = [f"{b}: {row[f'{b}_failed']} failed" for b in brokers if row[f"{b}_failed"]]
        lower = row["unit"] in ("ms", "cpu us/rec")
        cells.append(", ".join(bad) + (" (lower is better)" if lower else ""))
        t.add_row(*cells)
    Console(width=150).print(t)


if __name__ == "__main__":
    sys.exit(main())
