"""Structure-aware mutator against a LIVE broker process, with a healthy client beside it.

`run(seconds, seed)` starts `pylog broker` (pylog.launch.process.BrokerProcess) over a temporary directory,
then, for `seconds`:
  - a healthy client (confluent-kafka, idempotent producer, acks=all) produces numbered records of
    varied sizes with headers into its own topic while a consumer reads them back as they arrive;
  - mutator threads send mutated valid requests of every advertised API (fuzz/request_model.py:
    seeds from fuzz/corpus/requests, fields changed by type, versions switched, bytes edited) over
    many short connections: whole frames (one or several, pipelined), frames whose size prefix lies,
    truncated frames, slow partial frames trickled with pauses, half-closed and reset connections;
  - a sampler reads the broker's VmRSS (/proc/PID/status) every 0.5 s.
At the end it asserts: the broker is alive and answers; its log holds no "Traceback"; its RSS stayed
below `rss_bound_mb` (default 256 MiB; it starts near 55 MiB); every record the healthy client produced was acknowledged and
is read back intact, in order, once (by the live consumer and by a fresh one from the beginning);
the broker then stops cleanly (exit code 0).

Inputs that trigger findings already reported (fuzz/findings/README.md) are not sent unless
`include_known=True`; the connection whose request made a traceback has its payloads written under
`<workdir>/suspects/` (pass `--workdir` to keep them).

Usage: `python -m fuzz.live_broker --seconds 360 --seed 1 [--rss-bound-mb 256] [--workdir DIR]`
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import random
import re
import shutil
import socket
import struct
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from pylog.launch.process import BrokerProcess
from fuzz.request_model import PROTECTED, decode_payload, mutate, seed_payloads
from tests.support.clients import consume, create_topic

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = ROOT / "fuzz" / "corpus" / "requests"
# Bounded state on a small machine: fuzzed CreateTopics and auto-created names stop at this many partitions.
BROKER_SETTINGS: dict[str, object] = {"max.broker.partitions": 300, "log.segment.bytes": 8 << 20}


def known_trigger(payload: bytes) -> str | None:
    """The known finding (fuzz/findings/) this payload would trigger, or None."""
    if len(payload) < 4:
        return None
    return None      # none open (fuzz/findings/README.md lists the fixed ones)


@dataclass
class Stats:
    connections: int = 0
    frames: int = 0
    responses: int = 0
    closed_by_broker: int = 0
    truncated: int = 0
    slow: int = 0
    lying_size: int = 0
    reset: int = 0
    skipped_known: int = 0
    per_api: dict[int, int] = field(default_factory=dict)


class _Mutator(threading.Thread):
    def __init__(self, port: int, rng: random.Random, seeds: list[bytes], stop: threading.Event, stats: Stats,
                 lock: threading.Lock, recent: collections.OrderedDict[int, list[bytes]], slow: bool,
                 include_known: bool) -> None:
        super().__init__(daemon=True, name="mutator-slow" if slow else "mutator")
        self.port, self.rng, self.seeds, self.stop, self.stats = port, rng, seeds, stop, stats
        self.lock, self.recent, self.slow, self.include_known = lock, recent, slow, include_known
        self.pool: list[bytes] = list(seeds)
        self.error: BaseException | None = None

    def _payload(self) -> bytes | None:
        rng = self.rng
        p = rng.choice(self.pool) if rng.random() < 0.5 else rng.choice(self.seeds)
        for _ in range(rng.choice([1, 1, 2, 3])):
            p = mutate(p, rng, 64 << 10)
        if not self.include_known and known_trigger(p) is not None:
            with self.lock:
                self.stats.skipped_known += 1
            return None
        if rng.random() < 0.2:
            self.pool.append(p)
            if len(self.pool) > 500:
                del self.pool[rng.randrange(len(self.seeds), len(self.pool))]
        return p

    def run(self) -> None:
        try:
            while not self.stop.is_set():
                self._one_connection()
        except BaseException as e:  # noqa: BLE001 - reported by the harness
            self.error = e

    def _one_connection(self) -> None:
        rng = self.rng
        payloads = [p for p in (self._payload() for _ in range(rng.choice([1, 1, 1, 2, 5]))) if p is not None]
        if not payloads:
            return
        data = b""
        lied = False
        for p in payloads:
            n = len(p)
            if rng.random() < 0.05:
                n = rng.choice([n + 1, n + 100, max(0, n - 1), n * 2, 1 << 20, 100 << 20, -1, (1 << 31) - 1])
                lied = True
            data += struct.pack(">i", n) + p
        mode = "slow" if self.slow else rng.choice(["whole"] * 6 + ["truncated", "halfclose", "reset"])
        if mode == "truncated":
            data = data[:rng.randrange(len(data))]
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=2)
        except OSError:
            time.sleep(0.05)
            return
        port = sock.getsockname()[1]
        with self.lock:
            self.stats.connections += 1
            self.stats.frames += len(payloads)
            self.stats.truncated += mode == "truncated"
            self.stats.slow += mode == "slow"
            self.stats.lying_size += lied
            self.stats.reset += mode == "reset"
            for p in payloads:
                if len(p) >= 2:
                    key = struct.unpack_from(">h", p)[0]
                    self.stats.per_api[key] = self.stats.per_api.get(key, 0) + 1
            self.recent[port] = payloads
            while len(self.recent) > 5000:
                self.recent.popitem(last=False)
        try:
            if mode == "slow":
                cut = rng.randrange(len(data) + 1) if rng.random() < 0.5 else len(data)
                pos = 0
                while pos < cut and not self.stop.is_set():
                    step = rng.randint(1, 16)
                    sock.sendall(data[pos:min(cut, pos + step)])
                    pos += step
                    time.sleep(rng.choice([0.001, 0.01, 0.05, 0.2]))
            else:
                sock.sendall(data)
            if mode == "reset":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            elif mode == "halfclose":
                sock.shutdown(socket.SHUT_WR)
            if mode in ("whole", "halfclose", "slow"):
                self._read(sock, 0.3 if mode != "slow" else 0.05, len(payloads))
        except OSError:
            pass
        finally:
            sock.close()

    def _read(self, sock: socket.socket, timeout: float, expected: int) -> None:
        """Read responses until `expected` frames came, the broker closed, or `timeout` passed quietly."""
        sock.settimeout(timeout)
        got = b""
        frames = 0
        try:
            while frames < expected:
                chunk = sock.recv(65536)
                if not chunk:
                    with self.lock:
                        self.stats.closed_by_broker += 1
                    break
                got += chunk
                while len(got) >= 4:
                    (n,) = struct.unpack_from(">i", got)
                    if len(got) < 4 + n:
                        break
                    got = got[4 + n:]
                    frames += 1
        except (socket.timeout, OSError):
            pass
        with self.lock:
            self.stats.responses += frames


def _record(i: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """The healthy client's record i: key, value (0-6000 bytes, content derived from i), headers."""
    size = (i * 7919) % 6001 if i % 10 else 0
    digest = hashlib.sha256(str(i).encode()).digest()
    value = (digest * (size // 32 + 1))[:size]
    return f"k{i}".encode(), value, [("i", str(i).encode()), ("h", digest[:4])]


class _Healthy:
    """Produces records 0, 1, 2, ... at a steady pace and reads them back while they are produced."""

    def __init__(self, bootstrap: str, topic: str, stop: threading.Event, rate: float) -> None:
        self.bootstrap, self.topic, self.stop, self.rate = bootstrap, topic, stop, rate
        self.produced = 0
        self.acked: dict[int, int] = {}          # record -> offset
        self.delivery_errors: list[str] = []
        self.consumed: list[tuple[int, bytes | None, bytes | None, Any]] = []
        self.errors: list[str] = []
        self.producer_done = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True, name="healthy-producer"),
                         threading.Thread(target=self._consume, daemon=True, name="healthy-consumer")]

    def start(self) -> None:
        for t in self._threads:
            t.start()

    def join(self, timeout: float) -> None:
        for t in self._threads:
            t.join(timeout)

    def _produce(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                      "linger.ms": 5, "message.timeout.ms": 60000})

        def on_delivery(err: Any, msg: Any, i: int) -> None:
            if err is not None:
                self.delivery_errors.append(f"record {i}: {err}")
            else:
                self.acked[i] = msg.offset()

        try:
            started = time.monotonic()
            while not self.stop.is_set():
                due = int((time.monotonic() - started) * self.rate) + 1
                while self.produced < due:
                    key, value, headers = _record(self.produced)
                    i = self.produced
                    try:
                        p.produce(self.topic, value=value, key=key, headers=headers, partition=0,
                                  on_delivery=lambda e, m, i=i: on_delivery(e, m, i))
                    except BufferError:
                        break
                    self.produced += 1
                p.poll(0.02)
            left = p.flush(60)
            if left:
                self.delivery_errors.append(f"{left} records still unacknowledged 60 s after the end")
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"producer: {e!r}")
        finally:
            self.producer_done.set()

    def _consume(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "pylog-fuzz-unused",
                      "enable.auto.commit": False, "enable.partition.eof": False})
        try:
            c.assign([TopicPartition(self.topic, 0, -2)])
            deadline: float | None = None
            while True:
                if self.producer_done.is_set():
                    if len(self.consumed) >= self.produced:
                        break
                    deadline = deadline or time.monotonic() + 30
                    if time.monotonic() > deadline:
                        break
                for m in c.consume(500, 0.2):
                    if m.error():
                        self.errors.append(f"consumer: {m.error()}")
                        continue
                    self.consumed.append((m.offset(), m.key(), m.value(), m.headers()))
        except Exception as e:  # noqa: BLE001
            self.errors.append(f"consumer: {e!r}")
        finally:
            c.close()

    def problems(self) -> list[str]:
        out = list(self.errors) + self.delivery_errors[:5]
        if len(self.acked) != self.produced:
            out.append(f"{self.produced} produced, {len(self.acked)} acknowledged")
        want_offsets = [self.acked.get(i) for i in range(self.produced)]
        if want_offsets != list(range(self.produced)):
            out.append("acknowledged offsets are not 0..N-1 in production order (a duplicate or a gap)")
        out += _check_records("live consumer", self.consumed, self.produced)
        return out


def _check_records(who: str, got: list[tuple[int, bytes | None, bytes | None, Any]], n: int) -> list[str]:
    if len(got) != n:
        return [f"{who} read {len(got)} records, {n} were produced"]
    for i, (offset, key, value, headers) in enumerate(got):
        k, v, h = _record(i)
        if offset != i or key != k or value != v or [(a, b) for a, b in (headers or [])] != h:
            return [f"{who}: record {i} differs (offset {offset}, key {key!r}, {len(value or b'')} value bytes)"]
    return []


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _alive_and_answering(port: int) -> bool:
    """ApiVersions v0 gets a response."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            payload = struct.pack(">hhih", 18, 0, 7, -1)
            s.sendall(struct.pack(">i", len(payload)) + payload)
            head = s.recv(8)
            return len(head) >= 8 and struct.unpack(">i", head[4:8])[0] == 7
    except OSError:
        return False


@dataclass
class Report:
    seconds: float
    seed: int
    ok: bool
    problems: list[str]
    rss_start_mb: float
    rss_max_mb: float
    rss_bound_mb: float
    healthy_records: int
    stats: Stats
    tracebacks: int
    python_warnings: list[str]      # e.g. RuntimeWarning lines in the broker log: reported, not a failure


def _seeds(corpus_dirs: list[Path]) -> list[bytes]:
    seeds = seed_payloads()
    for d in corpus_dirs:
        if d.is_dir():
            seeds += [f.read_bytes() for f in sorted(d.iterdir()) if f.is_file() and f.stat().st_size < 65536]
    return seeds


def run(seconds: float, seed: int, *, rss_bound_mb: float = 256.0, workdir: Path | None = None,
        corpus_dirs: list[Path] | None = None, healthy_rate: float = 200.0, include_known: bool = False,
        log: Any = print) -> Report:
    own_dir = workdir is None
    root = Path(workdir or tempfile.mkdtemp(prefix="pylog-live-fuzz-"))
    root.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(root / "data", settings=BROKER_SETTINGS)
    broker.start()
    topic = f"healthy-{seed}"
    PROTECTED.add(topic)
    problems: list[str] = []
    stats = Stats()
    try:
        create_topic(broker.bootstrap, topic, 1, config={"retention.ms": "-1", "retention.bytes": "-1"})
        assert broker.proc is not None
        pid = broker.proc.pid
        rss = [_rss_mb(pid)]
        stop, sampler_stop = threading.Event(), threading.Event()

        def sample() -> None:
            while not sampler_stop.wait(0.5):
                if broker.alive():
                    rss.append(_rss_mb(pid))

        sampler = threading.Thread(target=sample, daemon=True, name="rss-sampler")
        sampler.start()
        healthy = _Healthy(broker.bootstrap, topic, stop, healthy_rate)
        healthy.start()
        seeds = _seeds(corpus_dirs if corpus_dirs is not None else [DEFAULT_CORPUS])
        lock = threading.Lock()
        recent: collections.OrderedDict[int, list[bytes]] = collections.OrderedDict()
        mutators = [_Mutator(broker.port, random.Random(seed * 100 + i), seeds, stop, stats, lock, recent,
                             slow=(i == 2), include_known=include_known) for i in range(3)]
        for m in mutators:
            m.start()
        deadline = time.monotonic() + seconds
        next_note = time.monotonic() + 60
        while time.monotonic() < deadline and broker.alive():
            time.sleep(0.2)
            if time.monotonic() >= next_note:
                next_note += 60
                log(f"live fuzz: {int(seconds - (deadline - time.monotonic()))} s, {stats.connections} connections, "
                    f"{stats.frames} frames, rss {rss[-1]:.0f} MiB (max {max(rss):.0f}), "
                    f"healthy {len(healthy.acked)}/{healthy.produced} acked, {len(healthy.consumed)} read")
        stop.set()
        for m in mutators:
            m.join(10)
            if m.error is not None:
                problems.append(f"mutator thread failed: {m.error!r}")
        healthy.join(120)
        sampler_stop.set()
        sampler.join(5)
        if not broker.alive():
            problems.append(f"the broker died (exit code {broker.proc.returncode})")
        elif not _alive_and_answering(broker.port):
            problems.append("the broker does not answer ApiVersions")
        problems += healthy.problems()
        if broker.alive():
            again = consume(broker.bootstrap, topic, [0], healthy.produced, timeout=60)
            problems += _check_records("fresh consumer", [(m.offset(), m.key(), m.value(), m.headers()) for m in again],
                                       healthy.produced)
        if max(rss) >= rss_bound_mb:
            problems.append(f"broker RSS reached {max(rss):.0f} MiB (bound {rss_bound_mb:.0f} MiB)")
        code = broker.stop(30) if broker.alive() else None
        if code not in (0, None):
            problems.append(f"the broker exited with {code} on SIGTERM")
        text = broker.log_text()
        tracebacks = text.count("Traceback")
        if tracebacks:
            problems.append(f"{tracebacks} tracebacks in the broker log; the first:\n"
                            + text[text.index("Traceback") - 300:text.index("Traceback") + 2500])
            _save_suspects(text, recent, root / "suspects")
        warnings = sorted({line.strip() for line in text.splitlines() if re.search(r"\w+Warning: ", line)})
        return Report(seconds, seed, not problems, problems, rss[0], max(rss), rss_bound_mb, healthy.produced, stats,
                      tracebacks, warnings)
    finally:
        PROTECTED.discard(topic)
        broker.close()
        if own_dir:
            shutil.rmtree(root, ignore_errors=True)


def _save_suspects(text: str, recent: collections.OrderedDict[int, list[bytes]], out: Path) -> None:
    """The payloads sent on each connection named in a log line just before a traceback."""
    out.mkdir(parents=True, exist_ok=True)
    ports = {int(p) for p in re.findall(r"\('127\.0\.0\.1', (\d+)\)[^\n]*\nTraceback", text)}
    if not ports:      # a traceback that names no connection: keep the latest ones
        ports = set(list(recent)[-200:])
    for port in ports:
        for j, payload in enumerate(recent.get(port, [])):
            (out / f"conn-{port}-{j}.bin").write_bytes(payload)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rss-bound-mb", type=float, default=256)
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--corpus", type=Path, action="append", help="more seed payloads (default fuzz/corpus/requests)")
    ap.add_argument("--include-known", action="store_true", help="also send inputs of known findings")
    args = ap.parse_args()
    corpus = [DEFAULT_CORPUS] + (args.corpus or [])
    report = run(args.seconds, args.seed, rss_bound_mb=args.rss_bound_mb, workdir=args.workdir, corpus_dirs=corpus,
                 include_known=args.include_known, log=lambda s: print(s, flush=True))
    print(json.dumps(asdict(report), indent=2, default=str))
    raise SystemExit(0 if report.ok else 1)


if __name__ == "__main__":
    main()
