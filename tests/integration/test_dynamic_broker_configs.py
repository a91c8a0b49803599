"""Dynamic broker configs (KIP-226) on a real broker: applied to existing topics at once, kept across restarts."""
from __future__ import annotations

import datetime

from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.support.batches import encode_batch
from tests.support.clients import create_topic
from tests.support.wire import WireClient


def _produce(w: WireClient, records: bytes) -> ErrorCode:
    resp = w.request(ProduceRequest(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=5), topic_data=(
        TopicProduceData(name="dyn", partition_data=(PartitionProduceData(index=0, records=records),)),)))
    return resp.responses[0].partition_responses[0].error_code


def _set(w: WireClient, scope_name: str, key: str, value: str | None) -> ErrorCode:
    op = 0 if value is not None else 1
    resp = w.request(IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=4, resource_name=scope_name, configs=(AlterableConfig(name=key, config_operation=op,
                                                                            value=value),)),), validate_only=False))
    return resp.responses[0].error_code


def _describe(w: WireClient, key: str) -> tuple[str | None, int]:
    resp = w.request(DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=4, resource_name="0", configuration_keys=(key,)),), include_synonyms=True,
        include_documentation=False))
    c = resp.results[0].configs[0]
    return c.value, c.config_source


def test_a_dynamic_message_max_bytes_applies_to_existing_topics_and_survives_a_restart(broker_factory):
    b = broker_factory()
    create_topic(b.bootstrap, "dyn")
    big = encode_batch([b"x" * 2_000_000])
    with WireClient("127.0.0.1", b.port) as w:
        assert _produce(w, big) == ErrorCode.message_too_large
        assert _set(w, "", "message.max.bytes", "3000000") == ErrorCode.none       # the cluster-wide default
        assert _produce(w, big) == ErrorCode.none, "the topic without an override follows the new default"
        assert _set(w, "0", "message.max.bytes", "1500000") == ErrorCode.none      # this broker's own wins
        assert _produce(w, big) == ErrorCode.message_too_large
        assert _describe(w, "message.max.bytes") == ("1500000", 2)
    b.stop()
    b.start()
    with WireClient("127.0.0.1", b.port) as w:
        assert _describe(w, "message.max.bytes") == ("1500000", 2), "kept across a restart"
        assert _produce(w, big) == ErrorCode.message_too_large
        assert _set(w, "0", "message.max.bytes", None) == ErrorCode.none
        assert _describe(w, "message.max.bytes") == ("3000000", 3)
        assert _produce(w, big) == ErrorCode.none
