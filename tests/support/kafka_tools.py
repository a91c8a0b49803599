"""Apache Kafka's own clients against a broker: the command-line tools and the Java client.

`run_tool(main_class, *args)` (or `start_tool` for one left running) runs one of Kafka's tools (the classes behind kafka-topics.sh,
kafka-configs.sh, ...; `TOOLS` names them) from the jars `make` copies into .cache/jars/kafka-broker
(jvm/kafka-broker.xml: kafka_2.13 and kafka-tools 3.9). `java_client(*args)` runs
tests/java/ClientCheck.java, compiled with javac against the same jars into .cache/java-classes
(again only when the source is newer than its class); each of its subcommands prints one JSON line.
Logging goes to stderr at WARN, so stdout holds only what the tool or the check prints. `group_rows` reads
kafka-consumer-groups --describe's table; `key_partition` is where the Java producer puts a key.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from kafka.partitioner.default import murmur2

from tests.support.kafka_broker import JARS, REPO, _classpath, _java

CLASSES = REPO / ".cache" / "java-classes"
CLIENT_SOURCE = REPO / "tests" / "java" / "ClientCheck.java"

# What each of Kafka 3.9's bin/*.sh scripts runs.
TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-console-producer": "kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
}

_LOG4J = (
    "log4j.rootLogger=WARN, stderr\n"
    "log4j.appender.stderr=org.apache.log4j.ConsoleAppender\n"
    "log4j.appender.stderr.Target=System.err\n"
    "log4j.appender.stderr.layout=org.apache.log4j.PatternLayout\n"
    "log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n\n"
)


def _log4j_config() -> Path:
    CLASSES.mkdir(parents=True, exist_ok=True)
    path = CLASSES / "tools-log4j.properties"
    if not path.exists() or path.read_text() != _LOG4J:
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(_LOG4J)
        tmp.replace(path)
    return path


def _archive(classpath: str) -> Path:
    """The class-data archive (the JDK's AppCDS) of the tools' JVMs: a tool maps the Kafka and Scala classes from it
    instead of loading them, 1.15 -> 0.55 s of CPU a run (about a hundred runs a suite). The JDK uses an archive
    only with the jars it was made from and ignores it otherwise, so it is named for them and the JDK."""
    jars = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in JARS.glob("*.jar"))
    key = hashlib.sha256(f"{classpath}\0{os.path.realpath(_java())}\0{jars}".encode()).hexdigest()[:16]
    return CLASSES / f"tools-{key}.jsa"


def _jvm(main_class: str, classpath: str, dump_to: Path | None = None) -> list[str]:
    """The command of a Kafka tool or client on `classpath`; with `dump_to`, the run writes the class archive there
    as it exits (`_run` does so once, when there is none yet)."""
    archive = _archive(classpath) if classpath == _classpath() else None
    cds = [f"-XX:ArchiveClassesAtExit={dump_to}"] if dump_to is not None else \
        [f"-XX:SharedArchiveFile={archive}"] if archive is not None and archive.exists() else []
    return [_java(), "-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *cds, "-Xlog:cds*=off",
            "-Djava.awt.headless=true", f"-Dlog4j.configuration=file:{_log4j_config()}", "-cp", classpath, main_class]


def _run_jvm(main_class: str, classpath: str, args: tuple[str, ...], stdin: str | None,
             timeout: float) -> subprocess.CompletedProcess[str]:
    """Run it; the first run of a tool without an archive makes one (written aside, then renamed into place, so
    concurrent test processes never read half an archive). Not for the Java client check: a class path holding a
    directory (its compiled classes) cannot be archived."""
    archive = _archive(classpath)
    dump_to = None if classpath != _classpath() or archive.exists() else archive.with_suffix(f".{os.getpid()}.tmp")
    done = _run(_jvm(main_class, classpath, dump_to) + list(args), stdin, timeout)
    if dump_to is not None:
        if done.returncode == 0 and dump_to.exists():
            dump_to.replace(archive)
        else:
            dump_to.unlink(missing_ok=True)
    return done


def _run(cmd: list[str], stdin: str | None, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout,
                          stdin=None if stdin is not None else subprocess.DEVNULL)


def run_tool(main_class: str, *args: str, stdin: str | None = None,
             timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools: `main_class` is a class name or a key of `TOOLS` ("kafka-topics")."""
    return _run_jvm(TOOLS.get(main_class, main_class), _classpath(), args, stdin, timeout)


def start_tool(main_class: str, *args: str) -> subprocess.Popen[str]:
    """Start a long-running tool (a console consumer in a group); the caller stops it."""
    return subprocess.Popen(_jvm(TOOLS.get(main_class, main_class), _classpath()) + list(args), text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def key_partition(key: str, partitions: int) -> int:
    """The Java producer's partition for a key: murmur2, made positive, modulo the count."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


def group_rows(out: str, group: str) -> dict[int, dict[str, str]]:
    """kafka-consumer-groups --describe: one row per partition, keyed by partition."""
    header: list[str] = []
    rows = {}
    for line in out.splitlines():
        cols = line.split()
        if cols[:1] == ["GROUP"]:
            header = cols
        elif header and cols[:1] == [group]:
            row = dict(zip(header, cols))
            rows[int(row["PARTITION"])] = row
    return rows


def compile_client() -> Path:
    """Compile ClientCheck.java into .cache/java-classes if its class is missing or older than the source."""
    target = CLASSES / "ClientCheck.class"
    CLASSES.mkdir(parents=True, exist_ok=True)
    with open(CLASSES / ".compile.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent test processes compile once
        if target.exists() and target.stat().st_mtime >= CLIENT_SOURCE.stat().st_mtime:
            return CLASSES
        javac = shutil.which("javac")
        if javac is None:
            raise RuntimeError("javac is not on PATH (a JDK is needed to compile tests/java/ClientCheck.java)")
        with tempfile.TemporaryDirectory(dir=CLASSES) as out:
            done = subprocess.run([javac, "-nowarn", "-encoding", "UTF-8", "-cp", _classpath(), "-d", out,
                                   str(CLIENT_SOURCE)], capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                raise RuntimeError(f"javac {CLIENT_SOURCE.name} failed:\n{done.stdout}{done.stderr}")
            for cls in Path(out).glob("*.class"):  # nested classes first, the main class last
                if cls.name != target.name:
                    cls.replace(CLASSES / cls.name)
            (Path(out) / target.name).replace(target)
    return CLASSES


def java_client(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    """Run `ClientCheck <subcommand> args...`; its stdout's last line is the JSON result."""
    classes = compile_client()
    return _run_jvm("ClientCheck", f"{classes}:{JARS}/*", args, None, timeout)


def java_result(*args: str, timeout: float = 90) -> dict[str, Any]:
    """`java_client` that must succeed: the decoded JSON line (a failure shows the check's stderr)."""
    done = java_client(*args, timeout=timeout)
    lines = done.stdout.strip().splitlines()
    assert done.returncode == 0 and lines, (
        f"ClientCheck {' '.join(args)} exited {done.returncode}\nstdout:\n{done.stdout[-4000:]}\n"
        f"stderr:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result
