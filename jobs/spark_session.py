"""The SparkSession a job runs in: local by default, quiet logs, the venv's Python for workers.

Registers the `pylog` source and the `pylog-delta` sink explicitly, so jobs work from any directory
and any install mode (Spark's own discovery of `pyspark_*` modules depends on how the package was
installed). Spark and py4j log at WARN unless `spark.log.level` says otherwise; Spark's log goes to a file
(`log.file`, default a new file under the temp dir), never to the console, so a failing job ends with
its one line and the file's name.

`with_delta_spark(builder)` puts delta-spark, Spark's own Delta engine, on a session: its jars (fetched
from Maven Central by the Makefile into .cache/jars/delta-spark, see jvm/delta-spark.xml), Delta's SQL
extension and catalog. Jobs that need it pass `delta_spark=True` to build_session (on a local master
with DELTA_SPARK_LOCAL_DEFAULTS unless set); tests use the same function. Both settings are static:
they must be on the builder before the first session of the JVM.
"""
from __future__ import annotations

import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from connectors.table_location import TableLocation
from jobs import class_archive, spark_home
from jobs.config import JobConfig
from jobs.signals import STOPPER, shield_spark_jvm

REPO = Path(__file__).resolve().parents[1]
LOG4J = REPO / "conf" / "log4j2-job.properties"   # Spark's log into a file (job_log_file), none on the console
_log_file: Path | None = None
DELTA_SPARK_JARS = REPO / ".cache" / "jars" / "delta-spark"
# delta-spark on a small local table: snapshots in a few partitions, file listings in a few tasks
DELTA_SPARK_LOCAL_DEFAULTS = {"spark.databricks.delta.snapshotPartitions": "4",
                              "spark.sql.sources.parallelPartitionDiscovery.parallelism": "8"}
HADOOP_AWS_JARS = REPO / ".cache" / "jars" / "hadoop-aws"
S3_LOG_STORE = "pylog.delta.S3ConditionalLogStore"
# s3:// and s3a:// through S3A, commits through pylog's conditional-write log store (delta-spark reads the
# log store per scheme)
S3_CONF = {"spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
           "spark.hadoop.fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
           "spark.delta.logStore.s3.impl": S3_LOG_STORE, "spark.delta.logStore.s3a.impl": S3_LOG_STORE}
DELTA_SPARK_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


class DeltaSparkMissing(RuntimeError):
    """delta-spark's jars are not where the session looks for them."""


def delta_spark_jars(folder: str | Path | None = None) -> list[Path]:
    """The jars of delta-spark (default .cache/jars/delta-spark); raises DeltaSparkMissing naming the fix."""
    where = Path(folder) if folder else DELTA_SPARK_JARS
    jars = sorted(where.glob("*.jar")) if where.is_dir() else []
    if not any(j.name.startswith("delta-spark_") for j in jars):
        raise DeltaSparkMissing(f"delta-spark's jars are not in {where}: run `make .stamps/jars-delta-spark` "
                                "(it fetches them from Maven Central, see jvm/delta-spark.xml)")
    return jars


def hadoop_aws_jars(folder: str | Path | None = None) -> list[Path]:
    """The jars of Hadoop's S3A and pylog's S3 log store (default .cache/jars/hadoop-aws); raises
    DeltaSparkMissing naming the fix."""
    where = Path(folder) if folder else HADOOP_AWS_JARS
    jars = sorted(where.glob("*.jar")) if where.is_dir() else []
    names = {j.name.split("-")[0] for j in jars}
    if not {"hadoop", "bundle", "pylog"} <= names:
        raise DeltaSparkMissing(f"Spark's S3 file system for delta-spark is not in {where}: run `make "
                                ".stamps/jars-hadoop-aws` (it fetches hadoop-aws from Maven Central, see "
                                "jvm/hadoop-aws.xml), or use sink.engine=delta-rs for s3:// tables")
    return jars


def with_delta_spark(builder: Any, jars_folder: str | Path | None = None, extra_jars: str | None = None,
                     extra_extensions: str | None = None, s3_tables: Sequence[TableLocation] = ()) -> Any:
    """`builder` (a SparkSession.Builder) with delta-spark enabled; `extra_jars` and `extra_extensions`: the
    user's own spark.jars and spark.sql.extensions, kept beside Delta's; `s3_tables`: the tables on S3 the session
    will write (their stores' settings, S3A and pylog's log store)."""
    jars = [str(j) for j in delta_spark_jars(jars_folder)]
    if s3_tables:
        # local: Spark's executors use the file where it is instead of copying it into each job's work folder
        # (the SDK bundle is 690 MB)
        jars += [f"local:{j}" for j in hadoop_aws_jars()]
    jars += [j for j in (extra_jars or "").split(",") if j]
    builder = builder.config("spark.jars", ",".join(jars))
    for k, v in DELTA_SPARK_CONF.items():
        if k == "spark.sql.extensions" and extra_extensions:
            v = ",".join([v] + [e for e in extra_extensions.split(",") if e and e != v])
        builder = builder.config(k, v)
    if s3_tables:
        for k, v in S3_CONF.items():
            builder = builder.config(k, v)
        for table in s3_tables:
            for k, v in table.hadoop_s3a_conf().items():
                builder = builder.config(f"spark.hadoop.{k}", v)
    return builder


def has_delta_spark(spark: Any) -> bool:
    """Whether `spark` (a SparkSession) was built with delta-spark's extension."""
    return DELTA_SPARK_CONF["spark.sql.extensions"] in (spark.conf.get("spark.sql.extensions", "") or "")


def job_log_file(cfg: JobConfig) -> Path:
    """Where Spark's own log of this run goes: the `log.file` setting, else a new file under the temp dir."""
    given = cfg.get("log.file")
    if given:
        return Path(given).absolute()
    return Path(tempfile.gettempdir()) / "pylog-logs" / f"{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"


def current_log_file() -> Path | None:
    """Spark's log file of the session this process built (None before one was built)."""
    return _log_file


def s3_tables(cfg: JobConfig) -> list[TableLocation]:
    """The job's tables on S3: its table and a reprocess's new one."""
    keys = ("sink.table.path", "reprocess.target.path")
    return [t for t in (cfg.table(k) for k in keys if cfg.get(k)) if not t.is_local]


def build_session(cfg: JobConfig, app_name: str, *, delta_spark: bool = False) -> Any:  # -> SparkSession
    """The job's SparkSession (pyspark imported lazily); with delta-spark's engine when `delta_spark`."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    from pyspark.sql import SparkSession

    b = (SparkSession.builder.appName(app_name).master(cfg.get("spark.master", "local[2]"))
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", cfg.get("spark.sql.shuffle.partitions", "4"))
         .config("spark.sql.session.timeZone", "UTC"))
    global _log_file
    spark_home.use()                       # Spark's Python processes import pyspark with its bytecode
    jvm = class_archive.jvm_options()      # the driver's classes mapped from the archive `make` built
    if LOG4J.exists():
        _log_file = job_log_file(cfg)
        _log_file.parent.mkdir(parents=True, exist_ok=True)
        jvm = f"{jvm} -Dlog4j2.configurationFile={LOG4J} -Dpylog.log.file={_log_file}".strip()
    if jvm:
        b = b.config("spark.driver.extraJavaOptions", jvm)
    shield_spark_jvm(_log_file)
    for k, v in cfg.values.items():
        if k.startswith("spark.") and k not in ("spark.master", "spark.log.level"):
            b = b.config(k, v)
    if delta_spark:
        b = with_delta_spark(b, extra_jars=cfg.get("spark.jars"), extra_extensions=cfg.get("spark.sql.extensions"),
                             s3_tables=s3_tables(cfg))
        if cfg.get("spark.master", "local[2]").startswith("local"):
            for k, v in DELTA_SPARK_LOCAL_DEFAULTS.items():
                if cfg.get(k) is None:
                    b = b.config(k, v)
    from connectors.delta_sink import DeltaSinkDataSource
    from sparklog import register

    with STOPPER.starting_spark():
        spark = b.getOrCreate()
        spark.sparkContext.setLogLevel(cfg.get("spark.log.level", "WARN"))
        register(spark)
        spark.dataSource.register(DeltaSinkDataSource)
    if delta_spark and not has_delta_spark(spark):
        raise DeltaSparkMissing("a SparkSession without delta-spark was already running in this process; "
                                "delta-spark must be set up before the first session")
    STOPPER.attach(spark)
    return spark
