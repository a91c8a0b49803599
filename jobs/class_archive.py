"""A class-data archive of the Spark driver's JVM (the JDK's AppCDS), so every job's JVM starts on less CPU.

A job's driver JVM loads and verifies some 15,000 Spark classes before it runs anything: about 8 s of CPU
on this project's 2-core machines, every run (bench/RESULTS.md, "Spark JVM start with a class archive"). A
dynamic CDS archive made once from a short Spark workload lets later JVMs map those classes instead:
measured 8.4 -> 5.2 s of CPU and 7.9 -> 4.9 s to a first result. Nothing about Spark's behaviour changes.

`make` builds the archive (`python -m jobs.class_archive`) into `.cache/spark-classes/`, named for the
pyspark version, the JDK and the pyspark installation it was made with. `jvm_options()` gives the driver's JVM options that use it;
`build_session` adds them. The JDK only uses an archive whose class path matches the JVM's, and class paths
holding a non-empty directory cannot be archived at all: SPARK_CONF_DIR puts one first, so with
SPARK_CONF_DIR set no archive is used (a job's own settings do what a spark-defaults.conf would), nor with a
user's `spark.driver.extraClassPath`. A missing, stale or unusable archive costs nothing but the saving:
the JVM then loads its classes as usual, without a word (`-Xlog:cds*=off`).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from jobs import spark_home

REPO = Path(__file__).resolve().parents[1]
FOLDER = REPO / ".cache" / "spark-classes"
QUIET = "-Xlog:cds*=off"       # the JDK's own notes about archives it cannot use, on the job's stdout otherwise

# What the archive is made from: the parts of Spark every job touches (SQL planning and code generation,
# Python workers, a Python data source batch and stream, Parquet, a streaming query with its checkpoint).
_WORKLOAD = '''
import sys, tempfile
from pyspark.sql import SparkSession
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
import pyspark.sql.functions as F

class Source(DataSource):
    @classmethod
    def name(cls): return "warmup"
    def schema(self): return "id long, v string"
    def reader(self, schema): return Reader()
    def streamReader(self, schema): return StreamReader()

class Reader(DataSourceReader):
    def read(self, partition):
        for i in range(10):
            yield (i, str(i))

class StreamReader(DataSourceStreamReader):
    def initialOffset(self): return {"o": 0}
    def latestOffset(self): return {"o": 10}
    def partitions(self, start, end): return [InputPartition(0)]
    def read(self, partition):
        for i in range(10):
            yield (i, str(i))
    def commit(self, end): pass

spark = (SparkSession.builder.master("local[2]").appName("pylog class archive")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
spark.dataSource.register(Source)
out = tempfile.mkdtemp()
df = spark.read.format("warmup").load()
df.withColumn("k", F.col("id") % 3).groupBy("k").agg(F.count("*"), F.max("v")).collect()
spark.createDataFrame([(i, str(i)) for i in range(50)], "id long, v string").join(df, "id").collect()
F.udf(lambda s: s.upper(), "string")
df.selectExpr("id", "cast(v as binary) as b", "to_json(struct(*)) as j").write.mode("append").parquet(out + "/p")
spark.read.parquet(out + "/p").filter("id > 3").count()
q = (spark.readStream.format("warmup").load().writeStream.format("memory").queryName("w")
     .option("checkpointLocation", out + "/c").trigger(availableNow=True).start())
q.awaitTermination(120)
spark.stop()
'''


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    java = Path(home) / "bin" / "java" if home else (Path(w) if (w := shutil.which("java")) else None)
    return java.resolve() if java is not None and java.exists() else None


def archive_path() -> Path | None:
    """Where the archive for this pyspark, its Spark home (jobs/spark_home.py: the class path names its jars
    folder) and this JDK is (or goes); None without a JDK."""
    import pyspark
    java = _java()
    if java is None:
        return None
    st = java.stat()
    jars = spark_home.current() / "jars"     # the class path the archive holds, as the JVM names it, and its files
    key = hashlib.sha1(f"{java}:{st.st_size}:{st.st_mtime_ns}:{jars}:{jars.resolve()}".encode()).hexdigest()[:12]
    return FOLDER / f"spark-{pyspark.__version__}-{key}.jsa"


def usable() -> Path | None:
    """The archive, when there is one and the driver's class path can match it (no SPARK_CONF_DIR)."""
    if os.environ.get("SPARK_CONF_DIR"):
        return None
    path = archive_path()
    return path if path is not None and path.is_file() else None


def jvm_options() -> str:
    """The driver JVM's options that use the archive; empty when there is none to use."""
    path = usable()
    return f"-XX:SharedArchiveFile={path} {QUIET}" if path is not None else ""


def build(force: bool = False) -> Path:
    """Run the workload in a driver JVM that writes the archive as it exits; the archive's path."""
    spark_home.use()
    path = archive_path()
    if path is None:
        raise RuntimeError("no Java found (JAVA_HOME or java on PATH): Spark needs a JDK 17")
    if path.is_file() and not force:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    submit = spark_home.current() / "bin" / "spark-submit"
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONF_DIR"}
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP=env.get("SPARK_LOCAL_IP", "127.0.0.1"),
               SPARK_SUBMIT_OPTS=f"-XX:ArchiveClassesAtExit={tmp} {QUIET}")
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        script.write(_WORKLOAD)
    try:
        done = subprocess.run([str(submit), "--master", "local[2]", script.name], env=env, capture_output=True,
                              text=True, timeout=600)
        if done.returncode != 0 or not tmp.is_file():
            raise RuntimeError(f"the Spark class archive was not written (exit {done.returncode}): "
                               f"{(done.stderr or done.stdout)[-1500:]}")
        os.replace(tmp, path)
    finally:
        os.unlink(script.name)
        tmp.unlink(missing_ok=True)
    return path


def main() -> int:
    path = build(force="--force" in sys.argv[1:])
    print(f"Spark class archive: {path} ({path.stat().st_size // 2**20} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
