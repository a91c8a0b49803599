"""Transactions (KIP-98) benchmark: pylog against Apache Kafka 3.9, transactional vs idempotent produce, read_committed consume.

Same confluent-kafka (librdkafka) client against both brokers, alternating the brokers block by block in
one run (pylog, kafka, pylog, kafka, ...; `--reps` blocks per broker and topic layout; medians with
min-max reported). In every block, on fresh topics of `--partitions` partitions (1 and 8 by default):

- produce, idempotent: `--records` (default 1,000,000) records of 100 B with enable.idempotence=true,
  acks=all, linger.ms 5, batch.size 1 MB, no compression; a tight produce() loop with poll(0) every
  1,000 records, record i to partition i % partitions. The partition is named because librdkafka's default
  partitioner puts keyless records on a random partition (sticky for 10 ms): the two brokers then held
  different layouts (in a probe, one broker's 8-partition topic had data in 2 partitions, the other's in 3),
  and a reader's speed depends on how many partitions it reads in parallel and on librdkafka growing a
  partition's fetch size after a fetch that brought only aborted batches; timed from the first send to the end of flush(). The clock starts after one delivered
  warm-up record (librdkafka's idempotent producer waits 500 ms for its producer id otherwise);
- produce, transactional: the same producer settings plus transactional.id; after init_transactions()
  and one committed 1-record warm-up transaction, `--records` / `--per-txn` transactions (default 10 of
  100,000): begin_transaction(), produce the records, flush(), commit_transaction(); timed from the
  first begin_transaction() to the return of the last commit. The flush() before the commit is what
  commit_transaction() does first anyway; calling it separately splits each transaction's time into
  producing, draining (flush) and the EndTxn round trip (commit_transaction after the drain), all
  recorded per transaction. The two produce modes run back to back on the same broker, their order
  swapped every repetition, and the ratio transactional/idempotent (target >= 0.8) is reported per
  broker, as the ratio of the medians and the min-max of the per-block ratios;
- produce, every other transaction aborted: the transactional producer again, on a third topic,
  aborting transactions 1, 3, 5, ... and committing 2, 4, 6, ... (flush() before abort_transaction(),
  so the aborted records are on the log and a reader must skip them; the last one is committed, so the
  last committed record is the end of the log);
- consume read_committed: a Consumer with isolation.level=read_committed that assign()s every partition
  from offset 0 (no group commits; fetch.max.bytes 64 MB and fetch.queue.backoff.ms 10 as in
  bench/broker_throughput.py) reads (a) the topic the transactional producer filled, (b) the topic with
  every other transaction aborted (the broker sends the aborted-transactions list, librdkafka drops those
  batches) and (c) the idempotent producer's topic (no transactions: what read_committed costs by itself);
  timed from assign() until the last committed record is delivered (the end of each log: every producer
  here ends with a commit). The reader then waits, untimed, until every partition has reported its end
  (enable.partition.eof) and checks the count (a leaked aborted record or a lost one is an error).
  The producers' batches depend on the broker: with linger.ms 5 a broker that acks sooner gets smaller
  batches (pylog's half-aborted topic held 1,208 batches to Kafka's 715 in a probe), and a reader pays per
  batch. So (d): a fourth topic written like (b) with linger.ms 200 (full 1 MB batches on both brokers; 240
  batches each in the probe) and read the same way: the read_committed comparison on one layout.
  librdkafka reports a partition's end only from the next Fetch, which comes back empty after
  fetch.wait.max.ms (500 ms) on both brokers; that time is in the JSON (to_eof_s) but not in the figure,
  where it would be a fixed half second beside about one second of reading. consume() is called with a
  10 ms timeout for the same reason (it waits for a full batch of 10,000 or its timeout). Records/s
  are the records delivered; for (b) the log holds twice as many.
- consume read_committed with Kafka's own Java consumer (kafka-consumer-perf-test.sh's class,
  org.apache.kafka.tools.ConsumerPerformance, run as that script runs it: G1, -Xmx512M), reading (a) and (d):
  the Python reader above is the limit on both brokers (its thread turning records into Python objects), so
  it measures the client; the Java consumer takes less CPU per record and shows more of the broker. The
  figure is the tool's own fetch.nMsg.sec (records over the time from the group's assignment to the last
  record; the join is kept out) and the JVM's CPU (its process, all threads) is recorded beside it. Its
  fetch.max.wait.ms is 20 on both brokers: with the default 500 the same read took 0.59-1.68 s on pylog and
  0.59-2.12 s on Kafka in steps of about half a second (a Fetch naming only partitions at their end, while the
  others' records wait in the consumer's buffer, is held for the whole wait, and the consumer sends no other
  Fetch to that broker meanwhile); with 20 ms the runs spread by 10%.
- consume read_committed with pylog's own reader (sparklog's Fetch client and Rust decoder, as the Spark source's
  executors read; `native_consume`), reading (a) and (d) partition after partition from offset 0 to the end
  the broker lists: under a microsecond of client CPU per record, so more of each broker's own time shows.
- the broker's CPU (user+system, /proc/PID/stat) during each measurement, per record, and the client
  process's own CPU (getrusage, all its threads) over the timed part: a client using ~1.2 of 2 cores is the
  limit, not the broker.

Both brokers run with their defaults. Kafka: Apache Kafka 3.9 KRaft one node from peers/kafka.py (heap 1
GB), whose single-node settings are offsets.topic.replication.factor=1,
transaction.state.log.replication.factor=1, transaction.state.log.min.isr=1 (plus the test peer's 4
offsets partitions, no initial rebalance delay, no auto-create). pylog: `python -m pylog broker`, default
settings (its transaction log settings only matter in cluster mode). Each broker first gets one unmeasured
warm-up block (creates __transaction_state, warms Kafka's JIT). Every measurement runs in a fresh client
process (this script with --worker).

Usage:
  .venv/bin/python bench/transactions_bench.py            # full run: 5 repetitions, about 3-4 minutes on 2 cores
  .venv/bin/python bench/transactions_bench.py --quick    # smoke run: 1 repetition, 400,000 records, about 1 minute
  .venv/bin/python bench/transactions_bench.py --reps 3 --partitions 8 --brokers pylog --out results.json
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import shlex
import statistics
import subprocess
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

sys.path.insert(0, str(_common.REPO))
from peers import kafka as peer_kafka  # noqa: E402

MB = 1_000_000
FETCH_MAX_BYTES = 64 * 1024 * 1024
FETCH_QUEUE_BACKOFF_MS = 10
PARTITION_EOF = -191   # librdkafka's _PARTITION_EOF

JAVA_FETCH_MAX_WAIT_MS = 20   # see java_consume: the 500 ms default adds whole long polls to a read, on both brokers
FULL_LINGER_MS = 200   # the equal-layout topic: batches fill to batch.size whatever the broker's ack time

PRODUCER_CONF = {
    "linger.ms": 5,
    "batch.size": 1024 * 1024,
    "acks": "all",
    "enable.idempotence": True,
    "compression.type": "none",
}


# --------------------------------------------------------------------------- workers (client side)

def _cpu() -> float:
    """User + system CPU seconds of this client process so far, all threads (librdkafka's included)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _produce_n(produce, poll, topic: str, payload: bytes, count: int, partitions: int = 1) -> float:
    """`count` produce() calls, record i to partition i % `partitions` (so every broker gets the same layout),
    polling when the local queue is full; the seconds spent waiting for room."""
    full_s = 0.0
    for i in range(count):
        while True:
            try:
                produce(topic, payload, partition=i % partitions)
                break
            except BufferError:
                t = time.perf_counter()
                poll(0.001)
                full_s += time.perf_counter() - t
        if i % 1000 == 0:
            poll(0)
    return full_s


def worker_produce(bootstrap: str, topic: str, count: int, size: int, mode: str, per_txn: int = 100_000,
                   abort_every_other: bool = False, linger_ms: int | None = None, partitions: int = 1) -> dict:
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_error(err, _msg) -> None:   # only failed deliveries are reported
        errors.append(str(err))

    conf = {"bootstrap.servers": bootstrap, **PRODUCER_CONF, "delivery.report.only.error": True, "on_delivery": on_error}
    if linger_ms is not None:
        conf["linger.ms"] = linger_ms
    transactional = mode == "transactional"
    if transactional:
        conf["transactional.id"] = f"bench-tx-{uuid.uuid4().hex[:10]}"
    p = Producer(conf)
    payload = os.urandom(size)
    produce, poll, now = p.produce, p.poll, time.perf_counter
    t = now()
    if transactional:
        p.init_transactions(60)
    init_s = now() - t
    p.list_topics(topic, timeout=10)   # connect and learn the leaders before the clock starts
    # warm-up: one delivered record (one committed 1-record transaction), not timed
    t = now()
    if transactional:
        p.begin_transaction()
        produce(topic, payload, partition=0)
        p.commit_transaction(60)
    else:
        produce(topic, payload, partition=0)
        if p.flush(60):
            raise RuntimeError("warm-up record not delivered in 60 s")
    warmup_s = now() - t
    txns: list[dict] = []
    full_s = 0.0
    committed = 0
    cpu0 = _cpu()
    started = now()
    if transactional:
        n_txn = max(1, count // per_txn)
        for k in range(n_txn):
            n = per_txn if k < n_txn - 1 else count - per_txn * (n_txn - 1)
            t0 = now()
            p.begin_transaction()
            full_s += _produce_n(produce, poll, topic, payload, n, partitions)
            t1 = now()
            left = p.flush(120)
            t2 = now()
            abort = abort_every_other and k % 2 == 0   # aborted first, committed last: the log ends committed
            if abort:
                p.abort_transaction(60)
            else:
                p.commit_transaction(60)
                committed += n
            t3 = now()
            txns.append({"records": n, "aborted": abort, "produce_s": t1 - t0, "flush_s": t2 - t1, "end_txn_s": t3 - t2,
                         "left_after_flush": left})
        remaining = 0
    else:
        full_s = _produce_n(produce, poll, topic, payload, count, partitions)
        remaining = p.flush(120)
        committed = count
    elapsed = now() - started
    client_cpu = _cpu() - cpu0
    out = {"seconds": elapsed, "records": count, "committed_records": committed, "client_cpu_s": client_cpu, "errors": len(errors) + remaining,
           "first_error": errors[0] if errors else None, "records_per_s": count / elapsed,
           "mb_per_s": count * size / elapsed / MB, "queue_full_s": full_s, "init_s": init_s, "warmup_s": warmup_s,
           "transactions": txns}
    if txns:
        out["end_txn_s_median"] = statistics.median(x["end_txn_s"] for x in txns)
        out["end_txn_s_max"] = max(x["end_txn_s"] for x in txns)
        out["flush_s_median"] = statistics.median(x["flush_s"] for x in txns)
        out["end_txn_share"] = sum(x["end_txn_s"] for x in txns) / elapsed
        out["flush_share"] = sum(x["flush_s"] for x in txns) / elapsed
    return out


def worker_consume(bootstrap: str, topic: str, partitions: int, expected: int, size: int, isolation: str) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": isolation,
        "enable.partition.eof": True,
        "fetch.max.bytes": FETCH_MAX_BYTES,
        "receive.message.max.bytes": FETCH_MAX_BYTES + 1024 * 1024,
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,   # see bench/broker_throughput.py
    })
    c.list_topics(topic, timeout=10)
    seen = errors = 0
    first_error = None
    at_end: set[int] = set()
    deadline = time.monotonic() + 180
    now = time.perf_counter
    first = last = None
    cpu0 = _cpu()
    started = now()
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    while (len(at_end) < partitions or seen < expected) and time.monotonic() < deadline:
        # consume() waits until it has 10,000 messages or its timeout: a long timeout would add itself to
        # every run's tail (the last batch is short), the same for both brokers, pulling ratios to 1.0
        for m in c.consume(10000, 0.01):
            err = m.error()
            if err is None:
                seen += 1
            elif err.code() == PARTITION_EOF:
                at_end.add(m.partition() or 0)
            else:
                errors += 1
                first_error = first_error or str(err)
        if last is None and seen >= expected:
            last = now()
            client_cpu = _cpu() - cpu0
        if first is None and seen:
            first = now()
    eof = now()
    c.close()
    timed_out = len(at_end) < partitions or seen < expected
    if last is None:
        last, client_cpu = eof, _cpu() - cpu0
    # the figure is the time to the last committed record (every producer here ends with a committed
    # transaction, so that is the end of the log); librdkafka reports a partition's end only from the next,
    # empty Fetch, which both brokers hold for fetch.wait.max.ms (500 ms): timed apart (to_eof_s), not in the figure
    elapsed = last - started
    return {"seconds": elapsed, "to_first_record_s": (first - started) if first else None, "to_eof_s": eof - started,
            "records": seen, "expected": expected, "client_cpu_s": client_cpu, "errors": errors + abs(expected - seen),
            "first_error": first_error or (f"read {seen} of {expected} records, {len(at_end)}/{partitions} partitions "
                                           f"at their end{' (timed out)' if timed_out else ''}" if seen != expected or timed_out else None),
            "records_per_s": seen / elapsed, "mb_per_s": seen * size / elapsed / MB}


def native_consume(bootstrap: str, topic: str, partitions: int, expected: int, size: int, isolation: str) -> dict:
    """Every partition of `topic` read by pylog's own reader, as the Spark source's executors read (sparklog's
    Fetch client, the Rust decoder into Arrow, aborted transactions dropped under read_committed), one partition
    after the other from 0 to its end, in this process: a client that spends far less CPU per record than the
    two above, so more of the broker shows."""
    from sparklog.executor import read_range
    from sparklog.kafka_client import LATEST, ClientConfig, KafkaClient
    from sparklog.options import parse_batch_options
    from sparklog.planner import OffsetRange
    from sparklog.reader_settings import ReaderSettings

    settings = ReaderSettings.from_options(parse_batch_options({
        "kafka.bootstrap.servers": bootstrap, "subscribe": topic, "kafka.isolation.level": isolation}))
    client = KafkaClient(ClientConfig(bootstrap))
    ends = {p: client.list_offset(topic, p, LATEST) for p in range(partitions)}
    client.close()
    list(read_range(OffsetRange(topic, 0, 0, min(ends[0], 1)), settings))     # connections and imports, untimed
    cpu0 = _cpu()
    started = time.perf_counter()
    seen = sum(b.num_rows for p in range(partitions) for b in read_range(OffsetRange(topic, p, 0, ends[p]), settings))
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "records": seen, "expected": expected, "client_cpu_s": _cpu() - cpu0,
            "errors": abs(expected - seen), "first_error": None if seen == expected else
            f"read {seen} of {expected} records", "records_per_s": seen / elapsed, "mb_per_s": seen * size / elapsed / MB}


def java_consume(bootstrap: str, topic: str, expected: int, isolation: str = "read_committed") -> dict:
    """`expected` records of `topic` read by Kafka's ConsumerPerformance in its own JVM (`isolation` its
    isolation.level); its fetch.nMsg.sec, and the JVM's CPU seconds."""
    workdir = Path(tempfile.mkdtemp(prefix="txbench-java-"))
    conf = workdir / "consumer.properties"
    conf.write_text(f"isolation.level={isolation}\nfetch.max.bytes={FETCH_MAX_BYTES}\n"
                    f"fetch.max.wait.ms={JAVA_FETCH_MAX_WAIT_MS}\n")
    cmd = [peer_kafka._java(), "-Xmx512M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
           "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-Djava.awt.headless=true",
           "-Dlog4j.configuration=" + (workdir / "log4j.properties").as_uri(), "-cp", peer_kafka._classpath(),
           "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", bootstrap, "--topic", topic,
           "--messages", str(expected), "--consumer.config", str(conf), "--timeout", "60000",
           "--group", f"bench-java-{uuid.uuid4().hex[:8]}"]
    (workdir / "log4j.properties").write_text("log4j.rootLogger=WARN, stderr\n"
                                              "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
                                              "log4j.appender.stderr.Target=System.err\n"
                                              "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    except subprocess.TimeoutExpired:
        return {"failed": "ConsumerPerformance timed out after 180 s"}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    if out.returncode != 0 or len(lines) < 2:
        return {"failed": (out.stderr or out.stdout).strip()[-2000:]}
    # start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms,
    # fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
    cols = [c.strip() for c in lines[-1].split(",")]
    records, fetch_ms = int(cols[4]), float(cols[7])
    return {"seconds": fetch_ms / 1000, "records": records, "expected": expected,
            "errors": abs(expected - records), "first_error": None if records == expected else
            f"read {records} of {expected} records", "records_per_s": float(cols[9]),
            "mb_per_s": float(cols[8]), "rebalance_s": float(cols[6]) / 1000,
            "jvm_cpu_s": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)}


def run_worker(args: argparse.Namespace) -> int:
    spec = json.loads(args.worker_spec)
    kind = spec.pop("kind")
    workers = {"produce": worker_produce, "consume": worker_consume, "java_consume": java_consume,
               "native_consume": native_consume}
    result = workers[kind](**spec)
    print(json.dumps(result))
    return 0


def call_worker(spec: dict, broker_pid: int, timeout_s: float = 300.0) -> dict:
    """One measurement in a fresh client process, with the broker's CPU seconds meanwhile and the load average."""
    cmd = [sys.executable, __file__, "--worker", "--worker-spec", json.dumps(spec)]
    load = os.getloadavg()[0]
    cpu0 = _common.cpu_split(broker_pid)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"failed": f"worker timed out after {timeout_s}s", "load1_before": load}
    if out.returncode != 0:
        return {"failed": (out.stderr or out.stdout).strip()[-2000:], "load1_before": load}
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["load1_before"] = load
    try:
        user, system = _common.cpu_split(broker_pid)
        result["broker_cpu_s"] = user + system - sum(cpu0)
        if result.get("records"):
            result["broker_cpu_us_per_record"] = result["broker_cpu_s"] / result["records"] * 1e6
    except OSError:
        pass
    return result


# --------------------------------------------------------------------------- orchestration

class Brokers:
    """The brokers under test; restarts one that died so a run carries on (the restart is recorded)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: dict[str, _common.BrokerProc] = {}
        self.restarts = {"pylog": 0, "kafka": 0}

    def start(self, name: str) -> _common.BrokerProc:
        if name == "pylog":
            bp = _common.start_pylog(self.workdir / f"pylog-data-{self.restarts['pylog']}",
                                     log_path=self.workdir / "pylog.log")
        else:
            bp = _common.start_kafka(self.workdir / f"kafka-{self.restarts['kafka']}")
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

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=_common.REPO, capture_output=True, text=True, timeout=10).stdout.strip()
        except Exception:  # noqa: BLE001
            return "?"

    status = git("status", "--porcelain")
    kafka_jar = sorted(p.name for p in (_common.REPO / ".cache" / "jars" / "kafka-broker").glob("kafka_2.13-*.jar"))
    return {"nproc": os.cpu_count(), "cpu": cpu, "memory_gib": round(mem_gb, 1), "os": platform.platform(),
            "python": platform.python_version(), "confluent_kafka": confluent_kafka.__version__,
            "librdkafka": confluent_kafka.libversion()[0], "kafka_jar": kafka_jar[0] if kafka_jar else "?",
            "commit": git("rev-parse", "HEAD"),
            "working_tree_changes": len(status.splitlines()) if status != "?" else "?",
            "working_tree_status": status.splitlines()}


def _ok(r: dict) -> bool:
    return "failed" not in r and not r.get("errors")


def _stats(vals: list[float]) -> dict | None:
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)} if vals else None


def summarize(runs: dict, brokers: list[str], layouts: list[int]) -> dict:
    """Per layout: each figure's records/s per broker (median, min, max), txn/idem per broker, pylog/kafka."""
    out: dict = {}
    for parts in layouts:
        lay: dict = {}
        blocks = {b: runs[str(parts)].get(b, []) for b in brokers}
        figures = ["produce_idempotent", "produce_transactional", "produce_abort_every_other",
                   "consume_committed", "consume_aborted_half", "consume_idempotent_topic",
                   "consume_aborted_half_full_batches", "java_consume_committed",
                   "java_consume_aborted_half_full_batches", "native_consume_committed",
                   "native_consume_aborted_half_full_batches"]
        for fig in figures:
            row: dict = {}
            for b in brokers:
                vals = [blk[fig]["records_per_s"] for blk in blocks[b] if fig in blk and _ok(blk[fig])]
                row[b] = _stats(vals)
                row[f"{b}_runs"] = [round(blk[fig]["records_per_s"]) if fig in blk and _ok(blk[fig]) else None
                                    for blk in blocks[b]]
                row[f"{b}_failed"] = [blk[fig].get("failed") or blk[fig].get("first_error")
                                      for blk in blocks[b] if fig in blk and not _ok(blk[fig])]
                cpu = [blk[fig]["broker_cpu_us_per_record"] for blk in blocks[b]
                       if fig in blk and _ok(blk[fig]) and "broker_cpu_us_per_record" in blk[fig]]
                row[f"{b}_broker_cpu_us_per_record"] = _stats(cpu)
                busy = [blk[fig]["client_cpu_s"] / blk[fig]["seconds"] for blk in blocks[b]
                        if fig in blk and _ok(blk[fig]) and "client_cpu_s" in blk[fig]]
                row[f"{b}_client_cpu_per_wall_s"] = _stats(busy)
            if "pylog" in brokers and "kafka" in brokers and row["pylog"] and row["kafka"]:
                paired = [p / k for p, k in zip(row["pylog_runs"], row["kafka_runs"]) if p and k]
                row["pylog_over_kafka"] = {"of_medians": row["pylog"]["median"] / row["kafka"]["median"],
                                           "paired": _stats(paired)}
            lay[fig] = row
        ratio: dict = {}
        for b in brokers:
            i, t = lay["produce_idempotent"][b], lay["produce_transactional"][b]
            paired = [tt / ii for ii, tt in zip(lay["produce_idempotent"][f"{b}_runs"],
                                                lay["produce_transactional"][f"{b}_runs"]) if ii and tt]
            ratio[b] = {"of_medians": t["median"] / i["median"] if i and t else None, "paired": _stats(paired),
                        "target": 0.8}
            end = [x["end_txn_s"] for blk in blocks[b] for key in ("produce_transactional",)
                   if key in blk and _ok(blk[key]) for x in blk[key]["transactions"]]
            flush = [x["flush_s"] for blk in blocks[b] if "produce_transactional" in blk and _ok(blk["produce_transactional"])
                     for x in blk["produce_transactional"]["transactions"]]
            ratio[b]["end_txn_ms"] = _stats([x * 1000 for x in end])
            ratio[b]["flush_ms"] = _stats([x * 1000 for x in flush])
        lay["transactional_over_idempotent"] = ratio
        out[str(parts)] = lay
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 repetition, 400,000 records (about 1 minute)")
    ap.add_argument("--reps", type=int, default=None, help="blocks per broker and layout (default 5; quick 1)")
    ap.add_argument("--records", type=int, default=None, help="records per produce run (default 1,000,000; quick 400,000)")
    ap.add_argument("--per-txn", type=int, default=100_000, help="records per transaction (default 100,000)")
    ap.add_argument("--size", type=int, default=100, help="record value bytes (default 100)")
    ap.add_argument("--partitions", default="1,8", help="comma list of topic layouts (default 1,8)")
    ap.add_argument("--brokers", default="pylog,kafka", help="comma list out of pylog,kafka, in alternation order")
    ap.add_argument("--no-warmup", action="store_true", help="skip the unmeasured warm-up block on each broker")
    ap.add_argument("--workdir", type=Path, default=None, help="parent of the brokers' temporary data dirs")
    ap.add_argument("--out", type=Path, default=None, help="JSON result file (default bench/results/transactions_bench-<date>.json)")
    ap.add_argument("--prefault-gib", type=float, default=0.0,
                    help="touch this much fresh memory first (the VM's first-touch cost, _common.prefault_memory)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-spec", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return run_worker(args)

    reps = args.reps or (1 if args.quick else 5)
    count = args.records or (400_000 if args.quick else 1_000_000)
    if count % args.per_txn or (count // args.per_txn) % 2:
        raise SystemExit("--records must be an even number of --per-txn transactions (every other one is aborted)")
    n_txn = count // args.per_txn
    size = args.size
    layouts = [int(x) for x in args.partitions.split(",") if x.strip()]
    brokers = [b.strip() for b in args.brokers.split(",") if b.strip()]
    stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    out = args.out or _common.REPO / "bench" / "results" / f"transactions_bench-{stamp}.json"
    command = shlex.join([sys.executable] + sys.argv)
    begun = time.monotonic()
    date = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    machine = machine_info()
    load_before = os.getloadavg()
    prefault_s = _common.prefault_memory(args.prefault_gib) if args.prefault_gib > 0 else None
    print(f"{date}: {machine['nproc']} cores, {machine['cpu']}, {machine['memory_gib']} GiB; load {load_before}; "
          f"commit {machine['commit'][:10]} ({machine['working_tree_changes']} changed paths)", file=sys.stderr)

    runs: dict[str, dict[str, list[dict]]] = {str(p): {b: [] for b in brokers} for p in layouts}
    warmups: dict[str, dict] = {}

    def block(bk: Brokers, b: str, parts: int, rep: int, n: int) -> dict:
        """Every figure once on broker `b`: two produce modes back to back (order by `rep`), aborts, three reads."""
        bp = bk.get(b)
        tag = uuid.uuid4().hex[:6]
        topics = {m: f"tx-{m}-{parts}p-{rep}-{tag}" for m in ("idem", "txn", "abort", "full")}
        res: dict = {"load1_start": os.getloadavg()[0]}
        try:
            for t in topics.values():
                _common.create_topic(bp.bootstrap, t, parts)
        except Exception as e:  # noqa: BLE001
            return {"failed": f"create topic: {e}"}
        base = {"kind": "produce", "bootstrap": bp.bootstrap, "count": n, "size": size, "per_txn": args.per_txn,
                "partitions": parts}
        order = ["idempotent", "transactional"] if rep % 2 == 0 else ["transactional", "idempotent"]
        for mode in order:
            topic = topics["idem" if mode == "idempotent" else "txn"]
            res[f"produce_{mode}"] = call_worker({**base, "topic": topic, "mode": mode}, bp.proc.pid)
        res["produce_abort_every_other"] = call_worker({**base, "topic": topics["abort"], "mode": "transactional",
                                                        "abort_every_other": True}, bp.proc.pid)
        # the same, with linger.ms 200: full 1 MB batches on both brokers, so the reads below compare one layout
        res["produce_full_batches"] = call_worker({**base, "topic": topics["full"], "mode": "transactional",
                                                   "abort_every_other": True, "linger_ms": FULL_LINGER_MS}, bp.proc.pid)
        cons = {"kind": "consume", "bootstrap": bp.bootstrap, "partitions": parts, "size": size,
                "isolation": "read_committed"}
        # expected: the records plus the warm-up record (committed) of each producer
        res["consume_committed"] = call_worker({**cons, "topic": topics["txn"], "expected": n + 1}, bp.proc.pid)
        res["consume_aborted_half"] = call_worker({**cons, "topic": topics["abort"], "expected": n // 2 + 1}, bp.proc.pid)
        res["consume_idempotent_topic"] = call_worker({**cons, "topic": topics["idem"], "expected": n + 1}, bp.proc.pid)
        res["consume_aborted_half_full_batches"] = call_worker({**cons, "topic": topics["full"], "expected": n // 2 + 1},
                                                               bp.proc.pid)
        java = {"kind": "java_consume", "bootstrap": bp.bootstrap}
        res["java_consume_committed"] = call_worker({**java, "topic": topics["txn"], "expected": n + 1}, bp.proc.pid)
        res["java_consume_aborted_half_full_batches"] = call_worker(
            {**java, "topic": topics["full"], "expected": n // 2 + 1}, bp.proc.pid)
        native = {**cons, "kind": "native_consume"}
        res["native_consume_committed"] = call_worker({**native, "topic": topics["txn"], "expected": n + 1}, bp.proc.pid)
        res["native_consume_aborted_half_full_batches"] = call_worker(
            {**native, "topic": topics["full"], "expected": n // 2 + 1}, bp.proc.pid)
        for t in topics.values():
            _common.delete_topic(bp.bootstrap, t)
        res["load1_end"] = os.getloadavg()[0]
        return res

    with tempfile.TemporaryDirectory(prefix="pylog-txbench-", dir=args.workdir) as tmp:
        bk = Brokers(Path(tmp))
        try:
            for b in brokers:
                t = time.monotonic()
                bk.get(b)
                print(f"  [{time.monotonic() - begun:6.0f}s] {b} up in {time.monotonic() - t:.1f}s", file=sys.stderr)
            if not args.no_warmup:
                for b in brokers:
                    w = block(bk, b, max(layouts), -1, min(count, 2 * args.per_txn))
                    warmups[b] = w
                    print(f"  [{time.monotonic() - begun:6.0f}s] warm-up {b}: {_fmt_block(w)}", file=sys.stderr)
            for parts in layouts:
                for rep in range(reps):
                    for b in brokers:
                        r = block(bk, b, parts, rep, count)
                        runs[str(parts)][b].append(r)
                        print(f"  [{time.monotonic() - begun:6.0f}s] {parts}p rep {rep + 1}/{reps} {b:5s}: {_fmt_block(r)}",
                              file=sys.stderr)
            rss = {}
            for b, bp in bk.procs.items():
                try:
                    rss[b] = {"rss_mb": _common.rss_mb(bp.proc.pid), "hwm_mb": _common.rss_mb(bp.proc.pid, "VmHWM")}
                except (OSError, KeyError):
                    pass
        finally:
            exit_codes = bk.stop_all()

    summary = summarize(runs, brokers, layouts)
    doc = {
        "benchmark": "transactions_bench",
        "date": date,
        "command": command,
        "machine": machine,
        "machine_shared": "yes: other sessions run tests and Spark jobs on the same 2 cores; see the load averages",
        "settings": {"reps": reps, "records": count, "per_txn": args.per_txn, "transactions_per_run": n_txn,
                     "size": size, "partitions": layouts, "brokers": brokers, "quick": args.quick,
                     "producer": PRODUCER_CONF, "consumer": {"isolation.level": "read_committed",
                                                            "fetch.max.bytes": FETCH_MAX_BYTES,
                                                            "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS},
                     "warmup_block": not args.no_warmup, "prefault_gib": args.prefault_gib, "prefault_s": prefault_s,
                     "pylog": "defaults (python -m pylog broker, disk, no fsync per message)",
                     "kafka": "Apache Kafka 3.9 KRaft one node, heap 1 GB, peers/kafka.py settings "
                              "(offsets.topic.replication.factor=1, transaction.state.log.replication.factor=1, "
                              "transaction.state.log.min.isr=1, offsets.topic.num.partitions=4, "
                              "group.initial.rebalance.delay.ms=0, auto.create.topics.enable=false)"},
        "wall_seconds": round(time.monotonic() - begun, 1),
        "loadavg_start": [round(x, 2) for x in load_before],
        "loadavg_end": [round(x, 2) for x in os.getloadavg()],
        "broker_memory_at_end": rss,
        "broker_exit_codes": exit_codes,
        "broker_restarts": bk.restarts,
        "summary": summary,
        "warmups": warmups,
        "runs": runs,
    }
    _common.write_json(out, doc)
    print_table(summary, brokers, layouts, doc)
    print(f"results written to {out}")
    return 0


def _fmt(r: dict | None) -> str:
    if r is None:
        return "-"
    if "failed" in r:
        return "FAILED " + r["failed"].splitlines()[-1][:160]
    s = f"{r['records_per_s'] / 1000:5.0f}k"
    if r.get("errors"):
        s += f" ERRORS {r['errors']} ({r.get('first_error')})"
    return s


def _fmt_block(r: dict) -> str:
    if "failed" in r:
        return "FAILED " + r["failed"]
    pt = r.get("produce_transactional", {})
    end = f" endtxn {pt['end_txn_s_median'] * 1000:.0f}ms" if "end_txn_s_median" in pt else ""
    return (f"idem {_fmt(r.get('produce_idempotent'))} txn {_fmt(pt)}{end} abort-half {_fmt(r.get('produce_abort_every_other'))}"
            f" | rc committed {_fmt(r.get('consume_committed'))} aborted-half {_fmt(r.get('consume_aborted_half'))}"
            f" idem-topic {_fmt(r.get('consume_idempotent_topic'))} full-batches "
            f"{_fmt(r.get('consume_aborted_half_full_batches'))} java committed {_fmt(r.get('java_consume_committed'))}"
            f" java full-batches {_fmt(r.get('java_consume_aborted_half_full_batches'))}"
            f" native committed {_fmt(r.get('native_consume_committed'))} native full-batches "
            f"{_fmt(r.get('native_consume_aborted_half_full_batches'))} | load {r.get('load1_start', 0):.1f}")


def print_table(summary: dict, brokers: list[str], layouts: list[int], doc: dict) -> None:
    def cell(s: dict | None) -> str:
        return "-" if not s else f"{s['median']:,.0f} ({s['min']:,.0f}-{s['max']:,.0f})"

    names = {"produce_idempotent": "produce idempotent", "produce_transactional": "produce transactional",
             "produce_abort_every_other": "produce txn, every other aborted",
             "consume_committed": "read_committed, committed txns", "consume_aborted_half": "read_committed, half aborted",
             "consume_idempotent_topic": "read_committed, no-txn topic",
             "consume_aborted_half_full_batches": "read_committed, half aborted, same batches on both",
             "java_consume_committed": "Java consumer read_committed, committed txns",
             "java_consume_aborted_half_full_batches": "Java consumer read_committed, half aborted, same batches",
             "native_consume_committed": "pylog's reader read_committed, committed txns",
             "native_consume_aborted_half_full_batches": "pylog's reader read_committed, half aborted, same batches"}
    both = "pylog" in brokers and "kafka" in brokers
    print(f"\nmedian (min-max) of {doc['settings']['reps']}, {doc['settings']['records']:,} x {doc['settings']['size']} B, "
          f"{doc['settings']['per_txn']:,} per transaction; {doc['machine']['nproc']} cores; load "
          f"{doc['loadavg_start'][0]} -> {doc['loadavg_end'][0]}")
    head = "| layout | figure (rec/s) | " + " | ".join(brokers) + (" | pylog/kafka |" if both else " |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for parts in layouts:
        lay = summary[str(parts)]
        for fig, name in names.items():
            row = lay[fig]
            cells = [cell(row[b]) for b in brokers]
            if both:
                pk = row.get("pylog_over_kafka")
                cells.append("-" if not pk else f"{pk['of_medians']:.2f}" + (
                    f" ({pk['paired']['min']:.2f}-{pk['paired']['max']:.2f})" if pk["paired"] else ""))
            print(f"| {parts}p | {name} | " + " | ".join(cells) + " |")
            cpu = [(row[f"{b}_broker_cpu_us_per_record"], row[f"{b}_client_cpu_per_wall_s"]) for b in brokers]
            print(f"| {parts}p | {name}: broker CPU us/rec; client CPU s per s | " + " | ".join(
                "-" if not c else f"{c['median']:.2f} ({c['min']:.2f}-{c['max']:.2f}); {k['median']:.2f}" if k else "-"
                for c, k in cpu) + (" | |" if both else " |"))
        r = lay["transactional_over_idempotent"]
        cells = []
        for b in brokers:
            x = r[b]
            cells.append("-" if x["of_medians"] is None else f"{x['of_medians']:.2f}" + (
                f" ({x['paired']['min']:.2f}-{x['paired']['max']:.2f})" if x["paired"] else ""))
        print(f"| {parts}p | transactional/idempotent (target >= 0.8) | " + " | ".join(cells) + (" | |" if both else " |"))
        print(f"| {parts}p | commit_transaction after flush, ms per txn | " + " | ".join(
            "-" if not r[b]["end_txn_ms"] else f"{r[b]['end_txn_ms']['median']:.1f} ({r[b]['end_txn_ms']['min']:.1f}-"
            f"{r[b]['end_txn_ms']['max']:.1f})" for b in brokers) + (" | |" if both else " |"))


if __name__ == "__main__":
    sys.exit(main())
