"""The sink engine and mode settings: checked together before any Spark work, errors naming the setting."""
from __future__ import annotations

import pytest

from jobs.config import JobConfig, JobConfigError
from jobs.sink_engine import SinkChoice, sink_choice


def _cfg(**values: str) -> JobConfig:
    return JobConfig("stream_to_delta", {k.replace("_", "."): v for k, v in values.items()})


def test_the_default_is_delta_rs_appending():
    assert sink_choice(_cfg()) == SinkChoice("delta-rs", "append", [])


def test_merge_with_delta_spark_takes_comma_separated_keys():
    choice = sink_choice(_cfg(sink_engine="delta-spark", sink_mode="merge", sink_merge_key="key, region"))
    assert (choice.delta_spark, choice.merge, choice.merge_keys) == (True, True, ["key", "region"])


@pytest.mark.parametrize("values, message", [
    ({"sink_engine": "spark"}, "setting 'sink.engine' must be delta-rs or delta-spark, got 'spark'"),
    ({"sink_mode": "upsert"}, "setting 'sink.mode' must be append or merge, got 'upsert'"),
    ({"sink_mode": "merge", "sink_merge_key": "key"}, "sink.mode=merge needs sink.engine=delta-spark"),
    ({"sink_engine": "delta-spark", "sink_mode": "merge"}, "setting 'sink.merge.key' (the key column(s), e.g. key) "
                                                             "is required with sink.mode=merge"),
    ({"sink_merge_key": "key"}, "setting 'sink.merge.key' is only used with sink.mode=merge"),
])
def test_a_wrong_combination_names_the_setting(values, message):
    with pytest.raises(JobConfigError) as failed:
        sink_choice(_cfg(**values))
    assert message in str(failed.value) and str(failed.value).startswith("job stream_to_delta: ")
