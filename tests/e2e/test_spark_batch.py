"""spark.read.format("pylog") and df.write.format("pylog") against a real broker in local[2] Spark."""
from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from tests.e2e.conftest import produce_records, read_pylog
from tests.support.clients import create_topic


def _rows(df):
    return sorted((r["partition"], r["offset"], r["key"], r["value"]) for r in df.collect())


def test_format_is_found_without_register_and_schema_matches_spark_kafka(spark, shared_broker, topic_name):
    topic = topic_name("schema")
    create_topic(shared_broker.bootstrap, topic, 1)
    df = read_pylog(spark, shared_broker.bootstrap, subscribe=topic)
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"), ("value", "binary"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
        ("timestamp", "timestamp"), ("timestampType", "int")]
    with_headers = read_pylog(spark, shared_broker.bootstrap, subscribe=topic, includeHeaders="true")
    assert with_headers.schema["headers"].dataType.simpleString() == "array<struct<key:string,value:binary>>"
    assert df.count() == 0


def test_explicit_register_also_works(spark):
    import sparklog

    sparklog.register(spark)
    assert spark.read.format("pylog").option("kafka.bootstrap.servers", "127.0.0.1:1") \
        .option("subscribe", "x").load().columns[0] == "key"


def test_batch_read_returns_exactly_what_was_produced(spark, shared_broker, topic_name):
    topic = topic_name("batch")
    create_topic(shared_broker.bootstrap, topic, 3)
    sent = [{"key": f"k{i}".encode(), "value": f"v{i}".encode() * (i % 7 + 1), "partition": i % 3} for i in range(300)]
    sent.append({"key": None, "value": b"", "partition": 0})
    where = produce_records(shared_broker.bootstrap, topic, sent)
    df = read_pylog(spark, shared_broker.bootstrap, subscribe=topic)
    got = _rows(df)
    assert got == sorted((p, o, r["key"], r["value"]) for (p, o), r in zip(where, sent))
    assert {r["topic"] for r in df.select("topic").distinct().collect()} == {topic}
    assert df.rdd.getNumPartitions() == 1, "a small read is one task"


def test_bounded_read_with_json_offsets(spark, shared_broker, topic_name):
    topic = topic_name("bounded")
    create_topic(shared_broker.bootstrap, topic, 2)
    produce_records(shared_broker.bootstrap, topic,
                    [{"value": f"{p}-{i}".encode(), "partition": p} for p in (0, 1) for i in range(20)])
    df = read_pylog(spark, shared_broker.bootstrap, subscribe=topic,
                    startingOffsets=f'{{"{topic}":{{"0":5,"1":-2}}}}',
                    endingOffsets=f'{{"{topic}":{{"0":15,"1":-1}}}}')
    got = sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(5, 15)] + [(1, o) for o in range(20)]
    assigned = read_pylog(spark, shared_broker.bootstrap, assign=f'{{"{topic}":[1]}}',
                          startingOffsets=f'{{"{topic}":{{"1":18}}}}', endingOffsets=f'{{"{topic}":{{"1":-1}}}}')
    assert sorted(r["offset"] for r in assigned.collect()) == [18, 19]


def test_bounded_read_with_timestamps(spark, shared_broker, topic_name):
    topic = topic_name("times")
    create_topic(shared_broker.bootstrap, topic, 2)
    base = 1_700_000_000_000
    produce_records(shared_broker.bootstrap, topic,
                    [{"value": f"{p}-{i}".encode(), "partition": p, "timestamp": base + i * 1000}
                     for p in (0, 1) for i in range(10)])
    df = read_pylog(spark, shared_broker.bootstrap, subscribe=topic,
                    startingTimestamp=str(base + 3000), endingTimestamp=str(base + 7000))
    got = sorted((r["partition"], r["offset"]) for r in df.collect())
    assert got == [(p, o) for p in (0, 1) for o in range(3, 7)]
    by_partition = read_pylog(
        spark, shared_broker.bootstrap, subscribe=topic,
        startingOffsetsByTimestamp=f'{{"{topic}":{{"0":{base + 8000},"1":{base}}}}}',
        endingOffsetsByTimestamp=f'{{"{topic}":{{"0":{base + 99_000},"1":{base + 2000}}}}}')
    got = sorted((r["partition"], r["offset"]) for r in by_partition.collect())
    assert got == [(0, 8), (0, 9), (1, 0), (1, 1)], "no match for an end timestamp means latest"
    with pytest.raises(Exception, match="No offset matched"):
        read_pylog(spark, shared_broker.bootstrap, subscribe=topic, startingTimestamp=str(base + 99_000)).collect()
    late = read_pylog(spark, shared_broker.bootstrap, subscribe=topic, startingTimestamp=str(base + 99_000),
                      startingOffsetsByTimestampStrategy="latest")
    assert late.count() == 0


def test_min_partitions_splits_ranges_without_gaps_or_overlaps(spark, shared_broker, topic_name):
    topic = topic_name("split")
    create_topic(shared_broker.bootstrap, topic, 2)
    produce_records(shared_broker.bootstrap, topic,
                    [{"value": b"x", "partition": 0} for _ in range(90)] + [{"value": b"y", "partition": 1} for _ in range(10)])
    df = read_pylog(spark, shared_broker.bootstrap, subscribe=topic, minPartitions="10")
    assert df.rdd.getNumPartitions() == 10     # 90 → 9 pieces, 10 → 1 piece
    tasks = (df.select(F.spark_partition_id().alias("task"), "partition", "offset")
             .groupBy("task", "partition").agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"),
                                               F.count("*").alias("n")).collect())
    for p, total in ((0, 90), (1, 10)):
        pieces = sorted((t["lo"], t["hi"], t["n"]) for t in tasks if t["partition"] == p)
        assert pieces[0][0] == 0 and pieces[-1][1] == total - 1
        for (lo, hi, n), nxt in zip(pieces, pieces[1:] + [(total, None, None)]):
            assert n == hi - lo + 1 and nxt[0] == hi + 1, f"gap or overlap in {pieces}"
    capped = read_pylog(spark, shared_broker.bootstrap, subscribe=topic, maxRecordsPerPartition="25")
    assert capped.rdd.getNumPartitions() == 5 and capped.count() == 100


def test_headers_and_timestamps_round_trip(spark, shared_broker, topic_name):
    topic = topic_name("headers")
    create_topic(shared_broker.bootstrap, topic, 1)
    ts = 1_700_000_123_456
    produce_records(shared_broker.bootstrap, topic, [
        {"value": b"a", "timestamp": ts, "headers": [("h1", b"v1"), ("h2", None), ("h1", b"again")]},
        {"value": b"b", "timestamp": ts + 1},
    ])
    rows = read_pylog(spark, shared_broker.bootstrap, subscribe=topic, includeHeaders="true") \
        .orderBy("offset").collect()
    assert [(h["key"], h["value"]) for h in rows[0]["headers"]] == [("h1", b"v1"), ("h2", None), ("h1", b"again")]
    assert rows[1]["headers"] is None
    utc = spark.createDataFrame([(rows[0]["timestamp"],)], "t timestamp").select(F.unix_micros("t")).first()[0]
    assert utc == ts * 1000
    assert [r["timestampType"] for r in rows] == [0, 0], "0 = CreateTime, as in Spark's Kafka source"


def test_write_then_read_returns_the_data(spark, shared_broker, topic_name):
    topic = topic_name("sink")
    create_topic(shared_broker.bootstrap, topic, 3)
    src = spark.createDataFrame(
        [(f"k{i}", f"value-{i}", i % 3, [("src", b"spark")]) for i in range(200)],
        "key string, value string, partition int, headers array<struct<key:string,value:binary>>")
    src.write.format("pylog").mode("append").option("kafka.bootstrap.servers", shared_broker.bootstrap) \
        .option("topic", topic).save()
    back = read_pylog(spark, shared_broker.bootstrap, subscribe=topic, includeHeaders="true")
    rows = back.collect()
    assert sorted((r["key"].decode(), r["value"].decode(), r["partition"]) for r in rows) == \
        sorted((f"k{i}", f"value-{i}", i % 3) for i in range(200))
    assert all([(h["key"], h["value"]) for h in r["headers"]] == [("src", b"spark")] for r in rows)
    # a topic column instead of the option; binary value; no key
    spark.createDataFrame([(topic, bytearray(b"raw"))], "topic string, value binary").write.format("pylog") \
        .mode("append").option("kafka.bootstrap.servers", shared_broker.bootstrap).save()
    assert read_pylog(spark, shared_broker.bootstrap, subscribe=topic).count() == 201


def test_the_native_sink_writes_what_confluent_kafka_reads_on_the_java_clients_partitions(spark, shared_broker,
                                                                                          topic_name):
    import pylog_native

    from tests.support.clients import consume

    topic = topic_name("native-sink")
    create_topic(shared_broker.bootstrap, topic, 4)
    rows = [(f"key-{i % 37}" if i % 5 else None, f"value-{i}" if i % 11 else None) for i in range(3000)]
    (spark.createDataFrame(rows, "key string, value string").repartition(2).write.format("pylog").mode("append")
     .option("kafka.bootstrap.servers", shared_broker.bootstrap).option("topic", topic).option("producer", "native")
     .option("kafka.compression.type", "lz4").option("kafka.batch.size", "4096").save())
    got = consume(shared_broker.bootstrap, topic, range(4), 3000)
    assert sorted(((m.key() or b"").decode(), (m.value() or b"").decode()) for m in got) == \
        sorted((k or "", v or "") for k, v in rows)
    for m in got:   # keyed rows where Spark's own sink (the Java client's murmur2) puts them
        if m.key() is not None:
            assert m.partition() == (pylog_native.murmur2(m.key()) & 0x7FFFFFFF) % 4
    assert len({m.partition() for m in got if m.key() is None}) > 1, "keyless rows move on between partitions"


def test_spark_python_workers_import_the_installed_pyspark(spark):
    """jobs/spark_home.py: Spark's Python processes import pyspark from site-packages (with its bytecode), not
    from the zip a pip-installed pyspark ships without any: a third of each one's start-up CPU."""
    import pyspark
    where = spark.range(1).select(F.udf(lambda _: __import__("pyspark").__file__, "string")("id")).first()[0]
    assert ".zip" not in where and where == pyspark.__file__, where
