"""Apache Kafka itself as a test and benchmark peer: one KRaft node, or brokers in ZooKeeper mode.

`KafkaBroker` formats a fresh log directory with `kafka.tools.StorageTool` and runs `kafka.Kafka` as a
single-node KRaft broker (combined broker and controller). `KafkaZkBroker` runs one broker of a
ZooKeeper-mode cluster (Kafka 3.9 still has it: `zookeeper.connect` and `broker.id`, no `process.roles`);
`kafka_zk_cluster` puts N of them beside a local ZooKeeper (peers/zk_cluster.py). Both run on loopback
ports from the jars `make` copies into .cache/jars/kafka-broker (jvm/kafka-broker.xml: Kafka 3.9 from
Maven Central). Settings are Kafka's own, tuned only for a small test cluster (replication factors no
larger than the cluster, no initial rebalance delay). Starting takes a few seconds; share one per
test module. Never imported by the product.
"""
from __future__ import annotations

import base64
import shutil
import subprocess
import uuid
from pathlib import Path

from pylog.launch.process import HOST, ServerProcess, free_port
from peers.zk_cluster import ZkCluster

REPO = Path(__file__).resolve().parents[1]
JARS = REPO / ".cache" / "jars" / "kafka-broker"


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise RuntimeError("java is not on PATH (make installs default-jre-headless)")
    return java


def _classpath() -> str:
    if not any(JARS.glob("kafka_2.13-*.jar")):
        raise RuntimeError(f"Apache Kafka's jars are missing from {JARS}: run `make test` (it fetches them with Maven)")
    return f"{JARS}/*"


# The JVM's collector and compilers: Kafka's own choice (G1, both JIT tiers) for benchmarks; the tests, which
# use Kafka as the oracle of what it answers and not of how fast, start it with the serial collector and only
# the quick compiler: the same behaviour on 1.5 s less CPU to start and a fifth less idling (bench/RESULTS.md)
PRODUCTION_JVM: tuple[str, ...] = ("-XX:+UseG1GC",)
FUNCTIONAL_JVM: tuple[str, ...] = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def local_tiered_storage(directory: Path) -> dict[str, object]:
    """Kafka's tiered storage (KIP-405) into a local directory: LocalTieredStorage, the RemoteStorageManager Kafka
    ships for its tests (kafka-storage's test jar, in jvm/kafka-broker.xml), its segment metadata in
    __remote_log_metadata; upload and retention passes every half second."""
    return {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
        "remote.log.storage.manager.impl.prefix": "rsm.config.",
        "rsm.config.dir": str(directory),
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.replication.factor": 1,
        "remote.log.manager.task.interval.ms": 500,
        "log.retention.check.interval.ms": 500,
    }


class _KafkaProcess(ServerProcess):
    """`kafka.Kafka` on a loopback port with a generated server.properties and WARN-level logging."""

    name = "apache-kafka"

    def __init__(self, workdir: Path, settings: dict[str, object] | None = None, heap: str = "512m",
                 jvm: tuple[str, ...] = PRODUCTION_JVM) -> None:
        super().__init__(workdir)
        self.heap = heap
        self.jvm = jvm
        self.settings = dict(settings or {})
        self.config_path = self.workdir / "server.properties"

    def mode_properties(self) -> dict[str, object]:
        """What the mode (KRaft or ZooKeeper) adds to the common properties."""
        raise NotImplementedError

    def properties(self) -> dict[str, object]:
        replicas = self.settings.get("default.replication.factor", 1)
        props: dict[str, object] = {
            "listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "log.dirs": str(self.workdir / "logs"),
            "num.partitions": 1,
            "offsets.topic.replication.factor": replicas,
            "offsets.topic.num.partitions": 4,
            "transaction.state.log.replication.factor": replicas,
            "transaction.state.log.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
            "auto.create.topics.enable": "false",
        }
        props.update(self.mode_properties())
        props.update(self.settings)
        return props

    def _write_config(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties().items()))
        (self.workdir / "log4j.properties").write_text(
            "log4j.rootLogger=WARN, stdout\n"
            "log4j.appender.stdout=org.apache.log4j.ConsoleAppender\n"
            "log4j.appender.stdout.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n\n")

    def _jvm(self, main: str) -> list[str]:
        return [_java(), "-Xms256m", f"-Xmx{self.heap}", *self.jvm, "-Djava.awt.headless=true",
                f"-Dlog4j.configuration=file:{self.workdir / 'log4j.properties'}", "-cp", _classpath(), main]

    def command(self) -> list[str]:
        return self._jvm("kafka.Kafka") + [str(self.config_path)]

    def start(self, timeout: float = 90.0) -> "_KafkaProcess":
        self._write_config()
        super().start(timeout)
        return self


class KafkaBroker(_KafkaProcess):
    """Apache Kafka, KRaft mode, one node; `settings` are added to (or override) server.properties."""

    def __init__(self, workdir: Path, settings: dict[str, object] | None = None, heap: str = "512m",
                 jvm: tuple[str, ...] = PRODUCTION_JVM) -> None:
        super().__init__(workdir, settings, heap, jvm)
        self.controller_port = free_port()

    def mode_properties(self) -> dict[str, object]:
        return {
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@{HOST}:{self.controller_port}",
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
        }

    def format(self) -> None:
        """Write the cluster's meta.properties into the log directory (once per fresh directory)."""
        if (self.workdir / "logs" / "meta.properties").exists():
            return
        self._write_config()
        # Kafka's Uuid.randomUuid never starts with "-" (the CLI would read it as an option); 1 in 64 would
        cluster_id = "-"
        while cluster_id.startswith("-"):
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        done = subprocess.run(self._jvm("kafka.tools.StorageTool") + ["format", "-t", cluster_id, "-c",
                                                                      str(self.config_path)],
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"formatting Kafka's storage failed: {done.stdout}{done.stderr}")

    def start(self, timeout: float = 90.0) -> "KafkaBroker":
        self.format()
        super().start(timeout)
        return self


class KafkaZkBroker(_KafkaProcess):
    """One Apache Kafka broker in ZooKeeper mode; `settings` must hold `zookeeper.connect` and `broker.id`.

    Ready (port open) is not registered: the cluster waits for Metadata to list it (ZkCluster.start).
    """

    def __init__(self, workdir: Path, settings: dict[str, object] | None = None, heap: str = "512m",
                 jvm: tuple[str, ...] = PRODUCTION_JVM) -> None:
        super().__init__(workdir, settings, heap, jvm)
        missing = {"zookeeper.connect", "broker.id"} - set(self.settings)
        if missing:
            raise ValueError(f"a ZooKeeper-mode Kafka broker needs {', '.join(sorted(missing))}")

    def mode_properties(self) -> dict[str, object]:
        return {"zookeeper.connection.timeout.ms": 30000}


def kafka_zk_cluster(workdir: Path, size: int = 3, settings: dict[str, object] | None = None,
                     session_timeout_ms: int = 6000, heap: str = "512m") -> ZkCluster:
    """`size` Apache Kafka brokers (ids 1..size) in ZooKeeper mode beside a fresh local ZooKeeper; not started."""
    def make(workdir: Path, broker_settings: dict[str, object]) -> ServerProcess:
        return KafkaZkBroker(workdir, broker_settings, heap)
    return ZkCluster(workdir, make, size, settings, session_timeout_ms)
