"""Where format("pylog") runs: a Spark standalone cluster (master + worker on 127.0.0.1, separate
executor processes) and a non-pylog Kafka-protocol broker (Tansu)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.conftest import REPO, produce_records, read_pylog
from tests.support.broker_process import free_port, wait_for_port
from tests.support.clients import create_topic
from peers.tansu import TansuProcess

SPARK_HOME = Path(__import__("pyspark").__file__).resolve().parent


def _start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _alive_workers(ui_port: int) -> int:
    """Workers the master counts as alive (its web UI's JSON); 0 while it is not answering yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as r:
            return int(json.load(r).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A master and one worker from pyspark's bundled bin/spark-class, started once per run; always stopped."""
    tmp_path = tmp_path_factory.mktemp("standalone")
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
           "PYSPARK_PYTHON": sys.executable, "SPARK_CONF_DIR": str(REPO / "conf"),
           "SPARK_WORKER_DIR": str(tmp_path / "work")}
    port, ui, wui = free_port(), free_port(), free_port()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    procs = [_start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                     "--webui-port", str(ui)], tmp_path / "master.log", env)]
    try:
        wait_for_port(port, 90, procs[0])
        procs.append(_start([spark_class, "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                             "--host", "127.0.0.1", "--webui-port", str(wui), "--cores", "2", "--memory", "1g"],
                            tmp_path / "worker.log", env))
        deadline = time.monotonic() + 120
        while _alive_workers(ui) < 1:
            assert procs[1].poll() is None and time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
            time.sleep(0.5)
        yield f"spark://127.0.0.1:{port}"
    finally:
        for p in reversed(procs):
            _stop(p)


CLUSTER_JOB = textwrap.dedent("""
    import json, os, sys
    from pyspark.sql import SparkSession
    master, bootstrap, topic = sys.argv[1:4]
    spark = (SparkSession.builder.master(master).appName("pylog-cluster-smoke")
             .config("spark.executor.memory", "512m").config("spark.cores.max", "2")
             .config("spark.pyspark.python", sys.executable).config("spark.ui.enabled", "false")
             .config("spark.python.authenticate.socketTimeout", "120s").getOrCreate())
    df = (spark.read.format("pylog").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).load())
    rows = df.selectExpr("partition", "offset", "cast(value as string) v").collect()
    pids = df.rdd.mapPartitions(lambda _: [os.getpid()]).collect()
    print(json.dumps({"rows": sorted([r.partition, r.offset, r.v] for r in rows),
                      "executor_pids": pids, "driver_pid": os.getpid()}))
    spark.stop()
""")


def test_standalone_cluster_executors_import_and_run_the_reader(standalone_cluster, pylog_broker, topic_name, tmp_path):
    """On pylog's broker only: what this checks (executors on other JVMs import the source and read) does not
    depend on the broker, and the reads from Apache Kafka are covered in local mode."""
    topic = topic_name("cluster")
    create_topic(pylog_broker.bootstrap, topic, 2)
    produce_records(pylog_broker.bootstrap, topic, [{"value": f"r{i}".encode(), "partition": i % 2} for i in range(40)])
    script = tmp_path / "job.py"
    script.write_text(CLUSTER_JOB)
    # The job runs outside the repository. Spark's auto-registration lists `pyspark_*` modules with
    # pkgutil.iter_modules, which sees a regular install but not setuptools' editable finder, so put
    # the source tree on PYTHONPATH as a deployed package would be.
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_CONF_DIR": str(REPO / "conf"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script), standalone_cluster, pylog_broker.bootstrap, topic],
                          capture_output=True, text=True, timeout=240, env=env, cwd=str(tmp_path))
    if done.returncode != 0:
        (tmp_path / "job.stderr").write_text(done.stderr)
        errors = [ln for ln in done.stderr.splitlines() if "Error" in ln or "Exception" in ln][:20]
        pytest.fail("cluster job failed:\n" + "\n".join(errors) + "\n...\n" + done.stderr[-2000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rows"] == sorted([i % 2, i // 2, f"r{i}"] for i in range(40))
    assert result["driver_pid"] not in result["executor_pids"]


@pytest.fixture
def tansu(tmp_path: Path) -> Iterator[str]:
    server = TansuProcess(tmp_path / "tansu").start()
    try:
        yield server.bootstrap
    finally:
        server.close()


def test_reads_and_writes_a_non_pylog_broker_tansu(spark, tansu, topic_name, tmp_path):
    topic = topic_name("tansu")
    create_topic(tansu, topic, 2)
    # One record per produce request: Tansu 0.6.0 (memory engine) reports the high watermark as the
    # last batch's base offset + 1, so multi-record batches would hide records from ListOffsets.
    for i in range(30):
        produce_records(tansu, topic, [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 2}])
    rows = read_pylog(spark, tansu, subscribe=topic).collect()
    assert sorted((r["key"], r["value"]) for r in rows) == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(30))
    spark.createDataFrame([("x", "y")], "key string, value string").write.format("pylog").mode("append") \
        .option("kafka.bootstrap.servers", tansu).option("topic", topic).save()
    assert read_pylog(spark, tansu, subscribe=topic).count() == 31
