"""The streaming offset format of format("pylog"): Spark Kafka's `{"topic":{"0":23}}`."""
from __future__ import annotations

import json

import pytest

from sparklog import offsets as off


def test_json_round_trip_in_spark_kafka_format():
    offsets = {("b", 1): 7, ("a", 10): -1, ("a", 2): 23}
    text = off.to_json(offsets)
    assert text == '{"a":{"2":23,"10":-1},"b":{"1":7}}' or text == '{"a":{"10":-1,"2":23},"b":{"1":7}}'
    assert off.from_json(text) == offsets
    as_dict = off.to_offset_dict(offsets)
    assert off.from_offset_dict(json.loads(json.dumps(as_dict))) == offsets


def test_partition_order_is_numeric_not_lexical():
    assert list(off.to_offset_dict({("t", 10): 1, ("t", 2): 1})["t"]) == ["2", "10"]


@pytest.mark.parametrize("bad", ['{"t":{"x":1}}', '{"t":[1]}', "[]", "not json", '{"t":{"0":"1"}}', '{"t":{"0":true}}'])
def test_bad_offsets_json_gets_sparks_example(bad):
    with pytest.raises(ValueError, match=r'Expected e\.g\. \{"topicA":\{"0":23,"1":-1\},"topicB":\{"0":-2\}\}'):
        off.parse_partition_offsets(bad)


def test_timestamps_and_partitions_json():
    assert off.parse_partition_timestamps('{"t":{"0":1700000000000}}') == {("t", 0): 1700000000000}
    assert off.parse_partitions('{"t":[0,1],"u":[3]}') == [("t", 0), ("t", 1), ("u", 3)]
