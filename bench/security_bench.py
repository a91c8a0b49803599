"""Security (issue 28) benchmark: pylog over SASL_SSL (SCRAM-SHA-512) against plaintext, and against Apache Kafka 3.9.

One pylog broker and one Apache Kafka 3.9 (KRaft, one node, peers/kafka.py, heap 1 GB), each with two
listeners on loopback: PLAINTEXT (the operator's: topics are created and SCRAM users added through it,
AlterUserScramCredentials, 4096 iterations) and SASL_SSL with SCRAM-SHA-512 only. Both use the same key and
certificate: RSA 2048 signed by a CA made here with `cryptography` (PEM, key and chain in one file: Kafka's
ssl.keystore.type=PEM, KIP-651), TLS as each side negotiates it (TLS 1.3 here). Three parts, each
alternating the systems:

1. throughput (`--rounds` rounds, default 7; in each, the four cases pylog PLAINTEXT, Kafka SASL_SSL, pylog SASL_SSL,
   Kafka PLAINTEXT, the order reversed every other round): on a fresh topic of `--partitions` partitions,
   a confluent-kafka (librdkafka) producer writes `--records` records of `--size` bytes (acks=all, linger.ms
   5, batch.size 1 MB, no compression, idempotence off; a tight produce() loop with poll(0) every 1,000
   records; timed from the first send to the end of flush(), after the connection and metadata are up),
   then a consumer assign()s every partition from offset 0 (fetch.max.bytes 64 MB, fetch.queue.backoff.ms
   10 as in bench/broker_throughput.py) and is timed from assign() to the last record (its count checked).
   Each in a fresh client process (this script with --worker); the broker's CPU per record (/proc/PID/stat)
   and the client's own CPU are recorded. Figures: pylog SASL_SSL / pylog PLAINTEXT (target >= 0.8) and
   pylog SASL_SSL / Kafka SASL_SSL (target >= 1.0), as the ratio of the medians and the min-max of the
   per-round ratios; Kafka's own SASL_SSL / PLAINTEXT beside them.
2. Spark batch read (`--spark-rounds`): one local[2] SparkSession, a topic of `--spark-records` x `--size` B
   in `--partitions` partitions on pylog; `spark.read.format("pylog")` with fetcher=native over PLAINTEXT and
   over SASL_SSL (kafka.security.protocol, kafka.sasl.mechanism, kafka.sasl.jaas.config,
   kafka.ssl.truststore.type=PEM, kafka.ssl.truststore.location), `select(sum(length(value)), count(*))`,
   checked against what was written; one unmeasured warm-up read of each, then alternating, the order
   swapped every round. Target: SASL_SSL >= 0.9x plaintext.
3. login storm (`--storm-rounds` rounds; in each, a fresh broker of each system, alternating, just started,
   the user created and one SASL_SSL login served): a fresh client process opens `--connections` TLS
   connections to the SASL_SSL listener at once (asyncio + ssl, one event loop) and on each sends
   ApiVersions v0, SaslHandshake v1 (SCRAM-SHA-512) and the two SaslAuthenticate v1 steps (the client side
   of kafka_protocol.security.scram, the server's signature checked). Timed from the first connect to the
   last completed login (target < 10 s); the broker's VmRSS before, sampled every 20 ms while the client
   runs, with all connections open, and 2 s after they are closed; the growth is the peak minus before
   (target < 200 MB). A second storm then runs on the same broker (is the memory given back or reused?).
   The client derives the salted password once per salt (PBKDF2-SHA-512, 4096 iterations, about 2 ms of
   client CPU each): a thousand separate clients would each pay it on their own machine, not on this one's
   two cores; the broker does no PBKDF2 at login either way (it keeps StoredKey and ServerKey).

Every figure comes with the load average: the machine may be shared (other sessions' tests), and on 2 cores
the client, the broker and Spark compete for the same CPUs, so the ratios, measured pairwise in one run,
are the figures to quote.

Usage:
  .venv/bin/python bench/security_bench.py                 # full run, 5-10 minutes on 2 cores (Kafka starts 4 times)
  .venv/bin/python bench/security_bench.py --quick         # smoke run, about 2 minutes
  .venv/bin/python bench/security_bench.py --skip spark,storm --rounds 3
  .venv/bin/python bench/security_bench.py --brokers pylog --skip throughput,spark     # the login storm alone

Writes JSON to bench/results/security_bench-<date>.json (or --out). Benchmarks never import tests/: the
certificate generation is a copy of the ideas of tests/support/certs.py.
"""
from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import functools
import ipaddress
import json
import os
import platform
import resource
import shlex
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

MB = 1_000_000
FETCH_MAX_BYTES = 64 * 1024 * 1024
FETCH_QUEUE_BACKOFF_MS = 10
PARTITION_EOF = -191
MECHANISM = "SCRAM-SHA-512"
USER, PASSWORD = "alice", "alice-secret"
SCRAM_ITERATIONS = 4096
PRODUCER_CONF = {"linger.ms": 5, "batch.size": 1024 * 1024, "acks": "all", "enable.idempotence": False,
                 "compression.type": "none"}
CASES = [("pylog", "PLAINTEXT"), ("kafka", "SASL_SSL"), ("pylog", "SASL_SSL"), ("kafka", "PLAINTEXT")]


# --------------------------------------------------------------------------- certificates

def make_certificates(folder: Path) -> tuple[Path, Path]:
    """A CA (ca.pem) and the broker's key and chain for 127.0.0.1/localhost in one PEM file (broker.pem)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.timezone.utc)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = (x509.CertificateBuilder().subject_name(name("pylog bench CA")).issuer_name(name("pylog bench CA"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    cert = (x509.CertificateBuilder().subject_name(name("localhost")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    ca_path, broker_path = folder / "ca.pem", folder / "broker.pem"
    ca_path.write_bytes(ca.public_bytes(pem))
    broker_path.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
                            + cert.public_bytes(pem) + ca.public_bytes(pem))
    return ca_path, broker_path


# --------------------------------------------------------------------------- client settings

def client_conf(bootstrap: str, protocol: str, ca: str) -> dict:
    """librdkafka's settings for a listener."""
    conf: dict = {"bootstrap.servers": bootstrap, "security.protocol": protocol}
    if protocol == "SASL_SSL":
        conf.update({"sasl.mechanism": MECHANISM, "sasl.username": USER, "sasl.password": PASSWORD,
                     "ssl.ca.location": ca})
    return conf


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# --------------------------------------------------------------------------- workers (client side, own process)

def worker_produce(conf: dict, topic: str, count: int, size: int) -> dict:
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_error(err, _msg) -> None:
        errors.append(str(err))

    p = Producer({**conf, **PRODUCER_CONF, "delivery.report.only.error": True, "on_delivery": on_error})
    payload = os.urandom(size)
    p.list_topics(topic, timeout=20)          # connect, log in and learn the leaders before the clock starts
    p.produce(topic, payload)                 # warm-up record, not timed
    if p.flush(60):
        raise RuntimeError("warm-up record not delivered in 60 s")
    cpu0 = _cpu()
    started = time.perf_counter()
    full_s = _common.produce_all(p, topic, payload, count)
    left = p.flush(180)
    elapsed = time.perf_counter() - started
    return {"seconds": elapsed, "records": count, "records_per_s": count / elapsed, "mb_per_s": count * size / elapsed / MB,
            "client_cpu_s": _cpu() - cpu0, "queue_full_s": full_s, "errors": len(errors) + left,
            "first_error": errors[0] if errors else None}


def worker_consume(conf: dict, topic: str, partitions: int, expected: int, size: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**conf, "group.id": f"bench-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
                  "enable.auto.offset.store": False, "enable.partition.eof": True,
                  "fetch.max.bytes": FETCH_MAX_BYTES, "receive.message.max.bytes": FETCH_MAX_BYTES + 1024 * 1024,
                  "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS})
    c.list_topics(topic, timeout=20)
    seen = errors = 0
    first_error = None
    at_end: set[int] = set()
    deadline = time.monotonic() + 240
    now = time.perf_counter
    last = None
    client_cpu = 0.0
    cpu0 = _cpu()
    started = now()
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    while (len(at_end) < partitions or seen < expected) and time.monotonic() < deadline:
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
    eof = now()
    c.close()
    if last is None:
        last, client_cpu = eof, _cpu() - cpu0
    elapsed = last - started
    return {"seconds": elapsed, "to_eof_s": eof - started, "records": seen, "expected": expected,
            "records_per_s": seen / elapsed, "mb_per_s": seen * size / elapsed / MB, "client_cpu_s": client_cpu,
            "errors": errors + abs(expected - seen),
            "first_error": first_error or (f"read {seen} of {expected}" if seen != expected else None)}


def _frame(api_key: int, version: int, correlation: int, body: bytes) -> bytes:
    cid = b"bench-storm"
    payload = struct.pack(">hhih", api_key, version, correlation, len(cid)) + cid + body
    return struct.pack(">i", len(payload)) + payload


async def _read_frame(reader: asyncio.StreamReader) -> bytes:
    (n,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(n)


async def _one_login(host: str, port: int, ctx: ssl.SSLContext, t0: float) -> dict:
    """TLS connect, ApiVersions v0, SaslHandshake v1, two SaslAuthenticate v1 steps; the writer kept open."""
    from kafka_protocol.security.scram import ScramClient

    reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host,
                                                   ssl_handshake_timeout=300)
    tls_done = time.perf_counter() - t0
    writer.write(_frame(18, 0, 1, b""))                                        # ApiVersions v0
    await _read_frame(reader)
    mech = MECHANISM.encode()
    writer.write(_frame(17, 1, 2, struct.pack(">h", len(mech)) + mech))        # SaslHandshake v1
    resp = await _read_frame(reader)
    (err,) = struct.unpack_from(">h", resp, 4)
    if err:
        raise RuntimeError(f"SaslHandshake error {err}")
    client = ScramClient(MECHANISM, USER, PASSWORD)
    token = client.first()
    answer = b""
    for step in range(2):                                                      # SaslAuthenticate v1, twice
        writer.write(_frame(36, 1, 3 + step, struct.pack(">i", len(token)) + token))
        resp = await _read_frame(reader)
        (err, mlen) = struct.unpack_from(">hh", resp, 4)
        pos = 8 + max(mlen, 0)
        if err:
            raise RuntimeError(f"SaslAuthenticate error {err}: {resp[8:8 + max(mlen, 0)].decode(errors='replace')}")
        (blen,) = struct.unpack_from(">i", resp, pos)
        answer = bytes(resp[pos + 4:pos + 4 + blen])
        if step == 0:
            token = client.final(answer)
    client.verify(answer)
    return {"tls_s": tls_done, "login_s": time.perf_counter() - t0, "writer": writer}


async def _storm(host: str, port: int, n: int, ca: str) -> tuple[dict, list]:
    ctx = ssl.create_default_context(cafile=ca)
    cpu0 = _cpu()
    t0 = time.perf_counter()
    results = await asyncio.gather(*(_one_login(host, port, ctx, t0) for _ in range(n)), return_exceptions=True)
    wall = time.perf_counter() - t0
    ok = [r for r in results if isinstance(r, dict)]
    failed = [repr(r) for r in results if not isinstance(r, dict)]
    logins = sorted(r["login_s"] for r in ok)
    tls = sorted(r["tls_s"] for r in ok)

    def q(xs: list[float], f: float) -> float | None:
        return xs[min(len(xs) - 1, int(f * len(xs)))] if xs else None

    return ({"connections": n, "authenticated": len(ok), "failed": len(failed), "first_failure": failed[0] if failed else None,
             "all_authenticated_s": wall if not failed else None, "wall_s": wall, "client_cpu_s": _cpu() - cpu0,
             "login_s_p50": q(logins, 0.5), "login_s_p99": q(logins, 0.99), "login_s_max": logins[-1] if logins else None,
             "tls_s_p50": q(tls, 0.5), "tls_s_max": tls[-1] if tls else None},
            [r["writer"] for r in ok])


def worker_storm(host: str, port: int, connections: int, ca: str) -> int:
    """Open the connections, print the result, hold them until a line arrives on stdin, then close them."""
    import kafka_protocol.security.scram as scram

    scram.salted_password = functools.lru_cache(maxsize=16)(scram.salted_password)   # once per salt (see the docstring)
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)

    async def main() -> None:
        result, writers = await _storm(host, port, connections, ca)
        print(json.dumps(result), flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        for w in writers:
            w.close()
        await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)

    asyncio.run(main())
    return 0


def run_worker(args: argparse.Namespace) -> int:
    spec = json.loads(args.worker_spec)
    kind = spec.pop("kind")
    if kind == "storm":
        return worker_storm(**spec)
    result = worker_produce(**spec) if kind == "produce" else worker_consume(**spec)
    print(json.dumps(result))
    return 0


def call_worker(spec: dict, broker_pid: int, timeout_s: float = 400.0) -> dict:
    """One measurement in a fresh client process, with the broker's CPU meanwhile and the load average."""
    cmd = [sys.executable, __file__, "--worker", "--worker-spec", json.dumps(spec)]
    load = os.getloadavg()[0]
    cpu0 = _common.cpu_seconds(broker_pid)
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"failed": f"worker timed out after {timeout_s}s", "load1_before": load}
    if out.returncode != 0:
        return {"failed": (out.stderr or out.stdout).strip()[-2000:], "load1_before": load}
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["load1_before"] = load
    result["broker_cpu_s"] = _common.cpu_seconds(broker_pid) - cpu0
    if result.get("records"):
        result["broker_cpu_us_per_record"] = result["broker_cpu_s"] / result["records"] * 1e6
    return result


# --------------------------------------------------------------------------- brokers

class Systems:
    """pylog and Kafka, each with a PLAINTEXT and a SASL_SSL listener and the SCRAM user."""

    def __init__(self, workdir: Path, ca: Path, keystore: Path) -> None:
        self.workdir, self.ca, self.keystore = workdir, ca, keystore
        self.procs: dict[str, _common.BrokerProc] = {}
        self.ports: dict[str, dict[str, int]] = {}

    def start(self, name: str) -> None:
        if name == "pylog":
            plain, sasl = _common.free_port(), _common.free_port()
            sets = [f"listeners=PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl}",
                    f"sasl.enabled.mechanisms={MECHANISM}", f"ssl.keystore.location={self.keystore}"]
            bp = _common.start_pylog(self.workdir / "pylog-data", port=plain, sets=sets,
                                     log_path=self.workdir / "pylog.log")
        else:
            kb = _common.KafkaBroker(self.workdir / "kafka", heap="1g")
            plain, sasl, ctl = kb.port, _common.free_port(), kb.controller_port
            kb.settings.update({
                "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl},CONTROLLER://127.0.0.1:{ctl}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT",
                "sasl.enabled.mechanisms": MECHANISM,
                "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(self.keystore),
            })
            kb.start()
            assert kb.proc is not None
            bp = _common.BrokerProc("kafka", plain, kb.proc, kb.log_path)
        self.procs[name] = bp
        self.ports[name] = {"PLAINTEXT": plain, "SASL_SSL": sasl}
        _common.wait_port(sasl, bp.proc)
        create_scram_user(f"127.0.0.1:{plain}")

    def bootstrap(self, name: str, protocol: str) -> str:
        return f"127.0.0.1:{self.ports[name][protocol]}"

    def conf(self, name: str, protocol: str) -> dict:
        return client_conf(self.bootstrap(name, protocol), protocol, str(self.ca))

    def stop_all(self) -> dict[str, int | None]:
        return {name: bp.stop() for name, bp in self.procs.items()}


def create_scram_user(bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})
    up = UserScramCredentialUpsertion(USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS),
                                      PASSWORD.encode())
    for _, fut in admin.alter_user_scram_credentials([up]).items():
        fut.result(timeout=30)


def wait_login(conf: dict, timeout_s: float = 30.0) -> None:
    """Until a SASL_SSL client can log in and list topics (a new SCRAM user reaches Kafka's listener through its
    metadata log)."""
    from confluent_kafka.admin import AdminClient

    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        try:
            AdminClient({**conf, "log_level": 0}).list_topics(timeout=5)
            return
        except Exception as e:  # noqa: BLE001
            last = e
            time.sleep(0.5)
    raise RuntimeError(f"cannot log in over SASL_SSL: {last}")


# --------------------------------------------------------------------------- part 1: throughput

def throughput_case(sy: Systems, name: str, protocol: str, count: int, size: int, partitions: int, tag: str) -> dict:
    bp = sy.procs[name]
    topic = f"sec-{name}-{protocol.lower()}-{tag}-{uuid.uuid4().hex[:6]}"
    res: dict = {"load1_start": os.getloadavg()[0]}
    try:
        _common.create_topic(sy.bootstrap(name, "PLAINTEXT"), topic, partitions)
    except Exception as e:  # noqa: BLE001
        return {"failed": f"create topic: {e}"}
    conf = sy.conf(name, protocol)
    res["produce"] = call_worker({"kind": "produce", "conf": conf, "topic": topic, "count": count, "size": size},
                                 bp.proc.pid)
    res["consume"] = call_worker({"kind": "consume", "conf": conf, "topic": topic, "partitions": partitions,
                                  "expected": count + 1, "size": size}, bp.proc.pid)
    _common.delete_topic(sy.bootstrap(name, "PLAINTEXT"), topic)
    res["load1_end"] = os.getloadavg()[0]
    return res


def _ok(r: dict | None) -> bool:
    return bool(r) and "failed" not in r and not r.get("errors")


def _stats(vals: list[float]) -> dict | None:
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals), "n": len(vals)}


def summarize_throughput(rounds: list[dict], systems: list[str]) -> dict:
    out: dict = {}
    for fig in ("produce", "consume"):
        row: dict = {}
        for name, protocol in CASES:
            if name not in systems:
                continue
            key = f"{name}/{protocol}"
            runs = [r.get(key, {}).get(fig) for r in rounds]
            row[key] = {"records_per_s": _stats([x["records_per_s"] if _ok(x) else None for x in runs]),
                        "mb_per_s": _stats([x["mb_per_s"] if _ok(x) else None for x in runs]),
                        "runs": [round(x["records_per_s"]) if _ok(x) else None for x in runs],
                        "failed": [x.get("failed") or x.get("first_error") for x in runs if x and not _ok(x)],
                        "broker_cpu_us_per_record": _stats([x.get("broker_cpu_us_per_record") if _ok(x) else None
                                                            for x in runs]),
                        "client_cpu_per_s": _stats([x["client_cpu_s"] / x["seconds"] if _ok(x) else None for x in runs])}

        def ratio(a: str, b: str, target: float | None) -> dict | None:
            if a not in row or b not in row or not row[a]["records_per_s"] or not row[b]["records_per_s"]:
                return None
            paired = [x / y for x, y in zip(row[a]["runs"], row[b]["runs"]) if x and y]
            return {"of_medians": row[a]["records_per_s"]["median"] / row[b]["records_per_s"]["median"],
                    "paired": _stats(paired), "target": target}

        row["pylog_sasl_over_plain"] = ratio("pylog/SASL_SSL", "pylog/PLAINTEXT", 0.8)
        row["pylog_sasl_over_kafka_sasl"] = ratio("pylog/SASL_SSL", "kafka/SASL_SSL", 1.0)
        row["kafka_sasl_over_plain"] = ratio("kafka/SASL_SSL", "kafka/PLAINTEXT", None)
        row["pylog_plain_over_kafka_plain"] = ratio("pylog/PLAINTEXT", "kafka/PLAINTEXT", None)
        out[fig] = row
    return out


# --------------------------------------------------------------------------- part 2: Spark

def load_topic(conf: dict, topic: str, records: int, size: int, partitions: int) -> float:
    from confluent_kafka import Producer

    p = Producer({**conf, "linger.ms": 20, "batch.size": 1_000_000, "acks": 1, "compression.type": "none",
                  "queue.buffering.max.kbytes": 1_048_576})
    value = os.urandom(size)
    t0 = time.perf_counter()
    for i in range(records):
        while True:
            try:
                p.produce(topic, value, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(300):
        raise SystemExit("records left undelivered")
    return time.perf_counter() - t0


def spark_part(sy: Systems, records: int, size: int, partitions: int, rounds: int, log) -> dict:
    _common.spark_env()
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    bp = sy.procs["pylog"]
    topic = f"sec-spark-{uuid.uuid4().hex[:6]}"
    _common.create_topic(sy.bootstrap("pylog", "PLAINTEXT"), topic, partitions)
    load_s = load_topic(sy.conf("pylog", "PLAINTEXT"), topic, records, size, partitions)
    log(f"spark: loaded {records:,} x {size} B into {partitions} partitions in {load_s:.1f}s")
    spark = (SparkSession.builder.master("local[2]").appName("pylog-security-bench")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" '
            f'password="{PASSWORD}";')
    options = {
        "PLAINTEXT": {"kafka.bootstrap.servers": sy.bootstrap("pylog", "PLAINTEXT")},
        "SASL_SSL": {"kafka.bootstrap.servers": sy.bootstrap("pylog", "SASL_SSL"), "kafka.security.protocol": "SASL_SSL",
                     "kafka.sasl.mechanism": MECHANISM, "kafka.sasl.jaas.config": jaas,
                     "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(sy.ca)},
    }

    def read(protocol: str) -> dict:
        df = spark.read.format("pylog").options(**options[protocol]).option("subscribe", topic) \
            .option("fetcher", "native").load()
        cpu0 = _common.cpu_seconds(bp.proc.pid)
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        row = df.select(F.sum(F.length("value")).alias("bytes"), F.count("*").alias("rows")).collect()[0]
        took = time.perf_counter() - t0
        if row["rows"] != records or row["bytes"] != records * size:
            raise RuntimeError(f"Spark read {row['rows']} rows / {row['bytes']} bytes over {protocol}, "
                               f"expected {records} / {records * size}")
        return {"seconds": took, "records_per_s": records / took, "mb_per_s": records * size / took / MB,
                "broker_cpu_s": _common.cpu_seconds(bp.proc.pid) - cpu0, "load1_before": load}

    runs: dict[str, list[dict]] = {"PLAINTEXT": [], "SASL_SSL": []}
    warm = {}
    try:
        for protocol in ("PLAINTEXT", "SASL_SSL"):
            warm[protocol] = read(protocol)
            log(f"spark warm-up {protocol}: {warm[protocol]['seconds']:.2f}s")
        for r in range(rounds):
            for protocol in (("PLAINTEXT", "SASL_SSL") if r % 2 == 0 else ("SASL_SSL", "PLAINTEXT")):
                x = read(protocol)
                runs[protocol].append(x)
                log(f"spark round {r + 1}/{rounds} {protocol:9s}: {x['seconds']:.2f}s {x['records_per_s'] / 1000:.0f}k rec/s "
                    f"broker {x['broker_cpu_s']:.2f} CPU-s load {x['load1_before']:.1f}")
    finally:
        spark.stop()
        _common.delete_topic(sy.bootstrap("pylog", "PLAINTEXT"), topic)
    plain = [x["records_per_s"] for x in runs["PLAINTEXT"]]
    sasl = [x["records_per_s"] for x in runs["SASL_SSL"]]
    return {"records": records, "size": size, "partitions": partitions, "load_s": load_s, "warmup": warm, "runs": runs,
            "PLAINTEXT": _stats(plain), "SASL_SSL": _stats(sasl),
            "broker_cpu_s": {p: _stats([x["broker_cpu_s"] for x in runs[p]]) for p in runs},
            "sasl_over_plain": {"of_medians": statistics.median(sasl) / statistics.median(plain),
                                "paired": _stats([s / p for s, p in zip(sasl, plain)]), "target": 0.9}}


# --------------------------------------------------------------------------- part 3: login storm

def storm(sy: Systems, name: str, connections: int) -> dict:
    bp = sy.procs[name]
    pid = bp.proc.pid
    spec = {"kind": "storm", "host": "127.0.0.1", "port": sy.ports[name]["SASL_SSL"], "connections": connections,
            "ca": str(sy.ca)}
    load = os.getloadavg()[0]
    rss0 = _common.rss_mb(pid)
    cpu0 = _common.cpu_seconds(pid)
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                samples.append(_common.rss_mb(pid))
            except (OSError, KeyError):
                pass
            stop.wait(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    proc = subprocess.Popen([sys.executable, __file__, "--worker", "--worker-spec", json.dumps(spec)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    cpu_ready = _common.cpu_seconds(pid)
    rss_open = _common.rss_mb(pid)
    time.sleep(1.0)
    rss_open_1s = _common.rss_mb(pid)
    try:
        proc.stdin.write("close\n")
        proc.stdin.flush()
    except BrokenPipeError:
        pass
    try:
        _, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    time.sleep(2.0)
    stop.set()
    th.join()
    if not line.strip():
        return {"failed": (err or "").strip()[-2000:], "load1_before": load}
    res = json.loads(line)
    res.update({"load1_before": load, "load1_after": os.getloadavg()[0], "rss_before_mb": rss0,
                "rss_all_open_mb": rss_open, "rss_all_open_1s_mb": rss_open_1s,
                "rss_peak_mb": max(samples + [rss_open, rss_open_1s]), "rss_after_close_mb": _common.rss_mb(pid),
                "broker_cpu_s_to_ready": cpu_ready - cpu0})
    res["rss_growth_mb"] = res["rss_peak_mb"] - rss0
    return res


def storm_part(work: Path, ca: Path, keystore: Path, systems: list[str], rounds: int, connections: int, log) -> dict:
    """Every round: a fresh broker of each system (alternating), one storm on it (its RSS growth from a broker
    that has only started, created the user and served one SASL_SSL login), then a second storm on the same
    broker once the first one's connections are closed (does the memory come back, is it reused)."""
    runs: dict[str, list[dict]] = {n: [] for n in systems}
    for r in range(rounds):
        for name in (systems if r % 2 == 0 else systems[::-1]):
            folder = work / f"storm-{r}-{name}"
            folder.mkdir()
            sy = Systems(folder, ca, keystore)
            try:
                sy.start(name)
                wait_login(sy.conf(name, "SASL_SSL"))
                time.sleep(2.0)                    # let start-up settle (Kafka's JIT and GC) before the baseline
                first = storm(sy, name, connections)
                log(f"storm {r + 1}/{rounds} {name}, fresh broker: {_fmt_storm(first)}")
                again = storm(sy, name, connections)
                log(f"storm {r + 1}/{rounds} {name}, again:        {_fmt_storm(again)}")
            finally:
                sy.stop_all()
            runs[name].append({"fresh": first, "again": again})

    def col(name: str, which: str, key: str) -> dict | None:
        return _stats([x[which].get(key) for x in runs[name]])

    summary = {n: {"all_authenticated_s": col(n, "fresh", "all_authenticated_s"),
                   "rss_growth_mb": col(n, "fresh", "rss_growth_mb"),
                   "rss_after_close_mb": col(n, "fresh", "rss_after_close_mb"),
                   "rss_before_mb": col(n, "fresh", "rss_before_mb"),
                   "broker_cpu_s_to_ready": col(n, "fresh", "broker_cpu_s_to_ready"),
                   "client_cpu_s": col(n, "fresh", "client_cpu_s"),
                   "again_all_authenticated_s": col(n, "again", "all_authenticated_s"),
                   "again_rss_growth_mb": col(n, "again", "rss_growth_mb"),
                   "targets": {"all_authenticated_s": 10.0, "rss_growth_mb": 200.0}} for n in systems}
    return {"runs": runs, "summary": summary}


# --------------------------------------------------------------------------- orchestration

def machine_info() -> dict:
    cpu = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    import confluent_kafka

    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=_common.REPO, capture_output=True, text=True, timeout=10).stdout.strip()
        except Exception:  # noqa: BLE001
            return "?"

    kafka_jar = sorted(p.name for p in (_common.REPO / ".cache" / "jars" / "kafka-broker").glob("kafka_2.13-*.jar"))
    return {"nproc": os.cpu_count(), "cpu": cpu,
            "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
            "os": platform.platform(), "python": platform.python_version(), "openssl": ssl.OPENSSL_VERSION,
            "confluent_kafka": confluent_kafka.__version__, "librdkafka": confluent_kafka.libversion()[0],
            "kafka_jar": kafka_jar[0] if kafka_jar else None, "commit": git("rev-parse", "HEAD"),
            "working_tree_changes": len([x for x in git("status", "--porcelain").splitlines() if x.strip()])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--quick", action="store_true", help="smoke run: 1 round, smaller sizes")
    ap.add_argument("--rounds", type=int, default=None, help="throughput rounds (default 7; quick 1)")
    ap.add_argument("--records", type=int, default=None, help="records per produce (default 200,000; quick 50,000)")
    ap.add_argument("--size", type=int, default=1024, help="record value bytes (default 1024)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--spark-records", type=int, default=None, help="records of the Spark topic (default 500,000; quick 100,000)")
    ap.add_argument("--spark-rounds", type=int, default=None, help="Spark read rounds (default 5; quick 1)")
    ap.add_argument("--connections", type=int, default=1000)
    ap.add_argument("--storm-rounds", type=int, default=None, help="login storms per system (default 3; quick 1)")
    ap.add_argument("--brokers", default="pylog,kafka", help="pylog,kafka (the Spark part uses pylog only)")
    ap.add_argument("--skip", default="", help="comma list out of throughput,spark,storm")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--worker-spec", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return run_worker(args)

    rounds = args.rounds or (1 if args.quick else 7)
    count = args.records or (50_000 if args.quick else 200_000)
    spark_records = args.spark_records or (100_000 if args.quick else 500_000)
    spark_rounds = args.spark_rounds or (1 if args.quick else 5)
    storm_rounds = args.storm_rounds or (1 if args.quick else 3)
    systems = [b.strip() for b in args.brokers.split(",") if b.strip()]
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    stamp = dt.datetime.now().strftime("%Y-%m-%d-%H%M%S")
    out = args.out or _common.REPO / "bench" / "results" / f"security_bench-{stamp}.json"
    begun = time.monotonic()
    date = dt.datetime.now().astimezone().isoformat(timespec="seconds")
    machine = machine_info()
    load_before = os.getloadavg()

    def log(msg: str) -> None:
        print(f"  [{time.monotonic() - begun:6.0f}s] {msg}", file=sys.stderr, flush=True)

    print(f"{date}: {machine['nproc']} cores, {machine['cpu']}; load {load_before}; commit {machine['commit'][:10]} "
          f"({machine['working_tree_changes']} changed paths)", file=sys.stderr)
    doc: dict = {"benchmark": "security_bench", "date": date, "command": shlex.join([sys.executable] + sys.argv),
                 "machine": machine, "loadavg_start": [round(x, 2) for x in load_before],
                 "settings": {"rounds": rounds, "records": count, "size": args.size, "partitions": args.partitions,
                              "spark_records": spark_records, "spark_rounds": spark_rounds,
                              "connections": args.connections, "storm_rounds": storm_rounds, "systems": systems,
                              "producer": PRODUCER_CONF, "mechanism": MECHANISM, "scram_iterations": SCRAM_ITERATIONS,
                              "certificate": "RSA 2048, SHA-256, CA-signed, PEM keystore (key + chain)",
                              "kafka": "Apache Kafka 3.9 KRaft one node, peers/kafka.py, heap 1 GB",
                              "pylog": "python -m pylog broker, defaults + listeners/SASL/TLS settings"}}
    with tempfile.TemporaryDirectory(prefix="pylog-secbench-", dir=args.workdir) as tmp:
        work = Path(tmp)
        ca, keystore = make_certificates(work)
        sy = Systems(work, ca, keystore)
        try:
            for name in systems:
                t = time.monotonic()
                sy.start(name)
                wait_login(sy.conf(name, "SASL_SSL"))
                log(f"{name} up (PLAINTEXT {sy.ports[name]['PLAINTEXT']}, SASL_SSL {sy.ports[name]['SASL_SSL']}) "
                    f"in {time.monotonic() - t:.1f}s")
            if "throughput" not in skip:
                warm = {}
                for name, protocol in CASES:
                    if name in systems:
                        warm[f"{name}/{protocol}"] = throughput_case(sy, name, protocol, min(count, 50_000), args.size,
                                                                     args.partitions, "warm")
                        log(f"warm-up {name}/{protocol}: {_fmt_case(warm[f'{name}/{protocol}'])}")
                rlist: list[dict] = []
                for r in range(rounds):
                    order = CASES if r % 2 == 0 else CASES[::-1]
                    res: dict = {}
                    for name, protocol in order:
                        if name not in systems:
                            continue
                        res[f"{name}/{protocol}"] = throughput_case(sy, name, protocol, count, args.size,
                                                                    args.partitions, f"r{r}")
                        log(f"round {r + 1}/{rounds} {name}/{protocol}: {_fmt_case(res[f'{name}/{protocol}'])}")
                    rlist.append(res)
                doc["throughput"] = {"warmup": warm, "rounds": rlist, "summary": summarize_throughput(rlist, systems)}
            if "spark" not in skip and "pylog" in systems:
                doc["spark"] = spark_part(sy, spark_records, args.size, args.partitions, spark_rounds, log)
            doc["broker_memory_at_end"] = {n: {"rss_mb": _common.rss_mb(bp.proc.pid),
                                               "hwm_mb": _common.rss_mb(bp.proc.pid, "VmHWM")}
                                           for n, bp in sy.procs.items() if bp.proc.poll() is None}
            if "storm" not in skip:
                doc["broker_exit_codes"] = sy.stop_all()      # the storms run on fresh brokers of their own
                doc["storm"] = storm_part(work, ca, keystore, systems, storm_rounds, args.connections, log)
        finally:
            doc.setdefault("broker_exit_codes", sy.stop_all())
    doc["wall_seconds"] = round(time.monotonic() - begun, 1)
    doc["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    _common.write_json(out, doc)
    print_summary(doc)
    print(f"results written to {out}")
    return 0


def _fmt_case(r: dict) -> str:
    if "failed" in r:
        return "FAILED " + r["failed"]

    def one(x: dict | None) -> str:
        if not x:
            return "-"
        if "failed" in x:
            return "FAILED " + x["failed"].splitlines()[-1][:200]
        s = f"{x['records_per_s'] / 1000:5.0f}k rec/s {x['mb_per_s']:5.0f} MB/s broker {x.get('broker_cpu_us_per_record', 0):.1f} us/rec"
        return s + (f" ERRORS {x['errors']} ({x.get('first_error')})" if x.get("errors") else "")
    return f"produce {one(r.get('produce'))} | consume {one(r.get('consume'))} | load {r.get('load1_start', 0):.1f}"


def _fmt_storm(x: dict) -> str:
    if "failed" in x and isinstance(x["failed"], str):
        return "FAILED " + x["failed"][-300:]
    return (f"{x['authenticated']}/{x['connections']} logged in, all in {x['wall_s']:.2f}s (p50 {x['login_s_p50']:.2f}s, "
            f"max {x['login_s_max']:.2f}s), failed {x['failed']}; broker RSS {x['rss_before_mb']:.0f} -> peak "
            f"{x['rss_peak_mb']:.0f} MB (+{x['rss_growth_mb']:.0f}), after close {x['rss_after_close_mb']:.0f}; "
            f"broker {x['broker_cpu_s_to_ready']:.2f} CPU-s, client {x['client_cpu_s']:.2f} CPU-s; load {x['load1_before']:.1f}")


def print_summary(doc: dict) -> None:
    def cell(s: dict | None, scale: float = 1.0, fmt: str = ",.0f") -> str:
        return "-" if not s else f"{s['median'] * scale:{fmt}} ({s['min'] * scale:{fmt}}-{s['max'] * scale:{fmt}})"

    def rcell(r: dict | None) -> str:
        if not r:
            return "-"
        p = r["paired"]
        return f"{r['of_medians']:.2f}" + (f" (per round: median {p['median']:.2f}, {p['min']:.2f}-{p['max']:.2f})" if p else "")

    print(f"\nload {doc['loadavg_start']} -> {doc['loadavg_end']}, wall {doc['wall_seconds']} s")
    if "throughput" in doc:
        s = doc["throughput"]["summary"]
        print("| figure | " + " | ".join(f"{n}/{p}" for n, p in CASES) + " |")
        print("|---|" + "---:|" * len(CASES))
        for fig in ("produce", "consume"):
            row = s[fig]
            print(f"| {fig} rec/s | " + " | ".join(cell(row.get(f"{n}/{p}", {}).get("records_per_s")) for n, p in CASES) + " |")
            print(f"| {fig} MB/s | " + " | ".join(cell(row.get(f"{n}/{p}", {}).get("mb_per_s"), fmt=".0f") for n, p in CASES) + " |")
            print(f"| {fig} broker CPU us/rec | " + " | ".join(cell(row.get(f"{n}/{p}", {}).get("broker_cpu_us_per_record"), fmt=".2f")
                                                            for n, p in CASES) + " |")
        for fig in ("produce", "consume"):
            row = s[fig]
            print(f"{fig}: pylog SASL_SSL/PLAINTEXT {rcell(row['pylog_sasl_over_plain'])} (target >= 0.8); "
                  f"pylog/Kafka SASL_SSL {rcell(row['pylog_sasl_over_kafka_sasl'])} (target >= 1.0); "
                  f"Kafka SASL_SSL/PLAINTEXT {rcell(row['kafka_sasl_over_plain'])}; "
                  f"pylog/Kafka PLAINTEXT {rcell(row['pylog_plain_over_kafka_plain'])}")
    if "spark" in doc:
        sp = doc["spark"]
        print(f"spark read rec/s: PLAINTEXT {cell(sp['PLAINTEXT'])}, SASL_SSL {cell(sp['SASL_SSL'])}; "
              f"SASL_SSL/PLAINTEXT {rcell(sp['sasl_over_plain'])} (target >= 0.9)")
    if "storm" in doc:
        for n, s in doc["storm"]["summary"].items():
            print(f"storm {n}, fresh broker: all authenticated s {cell(s['all_authenticated_s'], fmt='.2f')} (target < 10); "
                  f"RSS growth MB {cell(s['rss_growth_mb'], fmt='.0f')} (target < 200) from {cell(s['rss_before_mb'], fmt='.0f')}, "
                  f"after close {cell(s['rss_after_close_mb'], fmt='.0f')}; broker CPU-s {cell(s['broker_cpu_s_to_ready'], fmt='.2f')}, "
                  f"client CPU-s {cell(s['client_cpu_s'], fmt='.2f')}; second storm on the same broker: "
                  f"{cell(s['again_all_authenticated_s'], fmt='.2f')} s, RSS growth {cell(s['again_rss_growth_mb'], fmt='.0f')} MB")


if __name__ == "__main__":
    sys.exit(main())
