"""Bad options fail with Spark Kafka's explanation, or with one naming the option and the allowed values."""
from __future__ import annotations

import re

import pytest

BOOT = "127.0.0.1:1"   # never contacted: every case fails during validation

BATCH_CASES = [
    ({"subscribe": "t", "assign": '{"t":[0]}'}, "Only one of the following options can be specified for Kafka source"),
    ({}, "One of the following options must be specified for Kafka source"),
    ({"subscribe": " , "}, "No topics to subscribe to as specified value for option 'subscribe' is ' , '"),
    ({"assign": "t-0"}, "No topicpartitions to assign as specified value for option 'assign' is 't-0'"),
    ({"subscribe": "t", "kafka.auto.offset.reset": "earliest"}, "Kafka option 'auto.offset.reset' is not supported."),
    ({"subscribe": "t", "kafka.key.deserializer": "x"}, "Kafka option 'key.deserializer' is not supported as keys are deserialized"),
    ({"subscribe": "t", "kafka.value.deserializer": "x"}, "Kafka option 'value.deserializer' is not supported as values"),
    ({"subscribe": "t", "kafka.enable.auto.commit": "true"}, "Kafka option 'enable.auto.commit' is not supported"),
    ({"subscribe": "t", "kafka.group.id": " "}, "Invalid value '' for option 'kafka.group.id'"),
    ({"subscribe": "t", "startingOffsets": "latest"}, "starting offset can't be latest for batch queries on Kafka"),
    ({"subscribe": "t", "endingOffsets": "earliest"}, "ending offset can't be earliest for batch queries on Kafka"),
    ({"subscribe": "t", "startingOffsets": "soonest"}, "Invalid value for option 'startingoffsets': allowed values are earliest, latest"),
    ({"subscribe": "t", "startingOffsets": '{"t":{"0":5}}', "endingOffsets": '{"t":{"0":2}}'},
     "The start offset 5 for topic t partition 0 is greater than the end offset 2"),
    ({"subscribe": "t", "minPartitions": "0"}, "minPartitions must be positive"),
    ({"subscribe": "t", "minPartitions": "many"}, "Invalid value 'many' for option 'minPartitions': expected a positive integer"),
    ({"subscribe": "t", "failOnDataLoss": "maybe"}, "Invalid value 'maybe' for option 'failOnDataLoss': allowed values are true, false"),
    ({"subscribe": "t", "startingTimestamp": "yesterday"}, "Expected a single long value, got yesterday"),
    ({"subscribe": "t", "startingTimestamp": "1", "startingOffsetsByTimestampStrategy": "nearest"},
     "Invalid value 'nearest' for option 'startingOffsetsByTimestampStrategy': allowed values are error, latest"),
    ({"subscribe": "t", "kafka.no.such.setting": "1"}, "Kafka option 'kafka.no.such.setting' was rejected by the Kafka client"),
]

STREAM_CASES = [
    ({"subscribe": "t", "endingOffsets": "latest"}, "ending offset not valid in streaming queries"),
    ({"subscribe": "t", "endingOffsetsByTimestamp": '{"t":{"0":1}}'}, "ending timestamp not valid in streaming queries"),
    ({"subscribe": "t", "minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
     "The value of minOffsetPerTrigger(10) is higher than the maxOffsetsPerTrigger(5)."),
    ({"subscribe": "t", "maxTriggerDelay": "soon"}, "Invalid value 'soon' for option 'maxTriggerDelay'"),
]


def _batch(spark, options):
    r = spark.read.format("pylog")
    for k, v in options.items():
        r = r.option(k, v)
    if "kafka.bootstrap.servers" not in options:
        r = r.option("kafka.bootstrap.servers", BOOT)
    r.load().collect()


@pytest.mark.parametrize("options,message", BATCH_CASES, ids=[m[:40] for _, m in BATCH_CASES])
def test_bad_batch_option_is_rejected_with_a_precise_error(spark, options, message):
    with pytest.raises(Exception, match=re.escape(message)):
        _batch(spark, options)


def test_missing_bootstrap_servers_is_rejected(spark):
    with pytest.raises(Exception, match=re.escape("Option 'kafka.bootstrap.servers' must be specified")):
        spark.read.format("pylog").option("subscribe", "t").load().collect()


@pytest.mark.parametrize("options,message", STREAM_CASES, ids=[m[:40] for _, m in STREAM_CASES])
def test_bad_stream_option_is_rejected_with_a_precise_error(spark, tmp_path, options, message):
    r = spark.readStream.format("pylog").option("kafka.bootstrap.servers", BOOT)
    for k, v in options.items():
        r = r.option(k, v)
    with pytest.raises(Exception, match=re.escape(message)):
        q = r.load().writeStream.format("noop").option("checkpointLocation", str(tmp_path)).start()
        try:
            q.awaitTermination(60)
        finally:
            q.stop()


def test_bad_sink_input_and_modes_are_rejected(spark):
    no_value = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match=re.escape("Required attribute 'value' not found")):
        no_value.write.format("pylog").mode("append").option("kafka.bootstrap.servers", BOOT).option("topic", "t").save()
    no_topic = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match=re.escape("topic option required when no 'topic' attribute is present")):
        no_topic.write.format("pylog").mode("append").option("kafka.bootstrap.servers", BOOT).save()
    with pytest.raises(Exception, match=re.escape("Save mode Overwrite not allowed")):
        no_topic.write.format("pylog").mode("overwrite").option("kafka.bootstrap.servers", BOOT).option("topic", "t").save()
    with pytest.raises(Exception, match=re.escape("Kafka option 'key.serializer' is not supported")):
        no_topic.write.format("pylog").mode("append").option("kafka.bootstrap.servers", BOOT) \
            .option("kafka.key.serializer", "x").option("topic", "t").save()
