"""Replication throttles (broker/replication/quota.py): Kafka's throttled-replica lists and the windowed rate."""
from __future__ import annotations

import pytest

from broker.config import TopicConfig
from broker.replication.quota import UNLIMITED, ReplicationQuota, is_throttled, parse_throttled_replicas
from kafka_protocol.errors import InvalidConfigError


def test_throttled_replica_lists_name_partition_and_broker_or_everything():
    value = parse_throttled_replicas(" 0:1, 1:2 ,0:3")
    assert value == "0:1,1:2,0:3"
    assert is_throttled(value, 0, 1) and is_throttled(value, 0, 3) and is_throttled(value, 1, 2)
    assert not is_throttled(value, 1, 1) and not is_throttled("", 0, 1) and is_throttled("*", 7, 9)


@pytest.mark.parametrize("bad", ["0", "a:1", "0:b", "0:1,", "*,0:1"])
def test_a_malformed_list_is_refused_as_a_topic_config_with_kafkas_wording(bad):
    with pytest.raises(InvalidConfigError, match=r"\[partitionId\]:\[brokerId\]"):
        TopicConfig.default().with_overrides({"leader.replication.throttled.replicas": bad})


def test_the_rate_is_measured_over_the_window_and_an_unlimited_quota_never_throttles():
    q = ReplicationQuota(rate=1000, windows=3, window_s=1.0)
    q.record(900, 10.0)
    assert not q.exceeded(10.5)             # 900 B over the first (whole) window
    q.record(1500, 10.6)
    assert q.exceeded(10.7)                 # 2400 B in one window
    assert q.bytes_per_second(11.9) == pytest.approx(2400 / 1.9)
    assert not q.exceeded(13.5)             # the window moved past both samples
    free = ReplicationQuota(UNLIMITED)
    free.record(10**12, 1.0)
    assert not free.exceeded(1.0)
