"""Two writers of one Delta commit file on S3, raced deterministically inside a log store's write (run as
`python -m tests.support.log_store_race`, its own JVM: the S3 jars are static to a Spark session).

For each of delta-spark's S3SingleDriverLogStore and pylog's S3ConditionalLogStore: the store writes a new commit
file whose lines come from a Python iterator; when the store asks for the first line, its stream is open and any
existence check is behind it, and a rival (pyarrow, as delta-rs would) puts the same file. Prints, as JSON, what
each store's write did and whose content the file holds after it. The store's S3 settings come from the standard
AWS variables (the test's MinIO).
"""
from __future__ import annotations

import json
import os
import uuid
from typing import Any, Callable

STORES = {"delta's S3SingleDriverLogStore": "io.delta.storage.S3SingleDriverLogStore",
          "pylog's S3ConditionalLogStore": "pylog.delta.S3ConditionalLogStore"}


class _Lines:
    """A java.util.Iterator of lines (py4j callback) that runs `first` when the store asks for its first line."""

    def __init__(self, lines: list[str], first: Callable[[], None]) -> None:
        self.lines, self.first, self.i = lines, first, 0

    def hasNext(self) -> bool:  # noqa: N802 - Java's name
        return self.i < len(self.lines)

    def next(self) -> str:
        if self.i == 0:
            self.first()
        self.i += 1
        return self.lines[self.i - 1]

    class Java:
        implements = ["java.util.Iterator"]


def main() -> None:
    from pyspark.java_gateway import ensure_callback_server_started
    from pyspark.sql import SparkSession
    from pyarrow import fs

    from connectors.table_location import TableLocation
    from jobs import spark_home
    from jobs.spark_session import with_delta_spark

    spark_home.use()
    table = TableLocation.of(f"s3://tables/{uuid.uuid4().hex}/race")
    builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
    spark = with_delta_spark(builder, s3_tables=[table]).getOrCreate()
    gateway = spark.sparkContext._gateway
    ensure_callback_server_started(gateway)
    jvm: Any = spark._jvm
    hadoop = spark._jsc.hadoopConfiguration()
    filesystem, root = table.filesystem()
    # the store the session's Delta log uses for the table: what the jobs' sessions commit through
    delta_log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table.uri)
    delegate = delta_log.store().getDelegate(jvm.org.apache.hadoop.fs.Path(table.uri))
    out: dict[str, Any] = {"the session's log store for s3://": str(delegate.logStoreImpl().getClass().getName())
                           if hasattr(delegate, "logStoreImpl") else str(delegate.getClass().getName())}
    for name, cls in STORES.items():
        key = f"{root}/{cls.rsplit('.', 1)[-1]}/_delta_log/00000000000000000001.json"

        def rival() -> None:
            with filesystem.open_output_stream(key) as f:
                f.write(b'{"rival":true}\n')
        store = getattr(jvm, cls.rsplit(".", 1)[0]).__getattr__(cls.rsplit(".", 1)[1])(hadoop)
        try:
            store.write(jvm.org.apache.hadoop.fs.Path(f"s3://{key}"), _Lines(['{"ours":true}'], rival), False, hadoop)
            outcome = "wrote"
        except Exception as e:  # noqa: BLE001 - py4j wraps the Java exception
            text = str(e)
            outcome = "refused: java.nio.file.FileAlreadyExistsException" \
                if "java.nio.file.FileAlreadyExistsException" in text else f"failed: {text.splitlines()[0][:300]}"
        with filesystem.open_input_stream(key) as f:
            holds = "the rival's" if b"rival" in f.read() else "its own"
        out[name] = {"write": outcome, "the file holds": holds}
    spark.stop()
    print(json.dumps(out))


if __name__ == "__main__":
    assert os.environ.get("AWS_ENDPOINT_URL"), "point the AWS variables at a store"
    main()
