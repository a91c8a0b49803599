"""Broker configs, static and dynamic (KIP-226), on pylog and Apache Kafka: sources, synonyms, scopes.

Each broker is addressed by its own id (pylog 0, Kafka 1), so requests are built per broker. Every
test puts the dynamic settings back as they were, since both brokers live for the whole session.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import pytest
from kio.schema.alter_configs.v2.request import AlterableConfig as LegacyConfig
from kio.schema.alter_configs.v2.request import AlterConfigsRequest, AlterConfigsResource as LegacyResource
from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource
from kio.schema.describe_configs.v4.response import DescribeConfigsResponse
from kio.schema.errors import ErrorCode
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)

from tests.support.differential import IGNORED, Pair, differences, shape

BROKER, TOPIC = 4, 2
SET, DELETE = 0, 1
IDS = {"pylog": "0", "kafka": "1"}
# settings whose defaults pylog and Kafka share (the peers' server.properties differ elsewhere)
KEYS = ("log.retention.ms", "log.segment.bytes", "message.max.bytes", "max.connections", "log.cleanup.policy",
        "socket.request.max.bytes")


def _each(pair: Pair, build: Callable[[str], Any], ignore: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Send `build(broker id or "")` to each broker; assert the answers agree. Kafka applies a dynamic
    change a moment after acknowledging it, so a disagreement is retried for a few seconds."""
    skip = IGNORED | ignore | {"resource_name", "documentation", "config_type"}
    deadline = time.monotonic() + 10
    while True:
        got = {name: pair.send(name, build(IDS[name])) for name in IDS}
        diff = differences(shape(got["pylog"], skip), shape(got["kafka"], skip))
        if not diff or time.monotonic() > deadline or not isinstance(got["kafka"], DescribeConfigsResponse):
            break
        time.sleep(0.2)
    assert not diff, "pylog and Kafka differ:\n  " + "\n  ".join(diff)
    return got


def _describe(scope: str, keys: tuple[str, ...] = KEYS) -> Callable[[str], DescribeConfigsRequest]:
    return lambda node: DescribeConfigsRequest(resources=(DescribeConfigsResource(
        resource_type=BROKER, resource_name=node if scope == "broker" else "", configuration_keys=keys),),
        include_synonyms=True, include_documentation=False)


def _incremental(scope: str, ops: list[tuple[str, int, str | None]]) -> Callable[[str], IncrementalAlterConfigsRequest]:
    return lambda node: IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
        resource_type=BROKER, resource_name=node if scope == "broker" else "",
        configs=tuple(AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops)),), validate_only=False)


@pytest.fixture
def restore(pair: Pair):
    yield
    _each(pair, _incremental("default", [("log.retention.ms", DELETE, None), ("max.connections", DELETE, None)]))
    _each(pair, _incremental("broker", [("message.max.bytes", DELETE, None), ("log.segment.bytes", DELETE, None)]))


def test_static_broker_configs_with_sources_and_synonyms(pair):
    _each(pair, _describe("broker"))


def test_dynamic_settings_in_both_scopes_and_back(pair, restore):
    _each(pair, _incremental("default", [("log.retention.ms", SET, "1234")]))
    _each(pair, _incremental("broker", [("message.max.bytes", SET, "2000000")]))
    got = _each(pair, _describe("broker"))
    values = {c.name: (c.value, c.config_source) for c in got["pylog"].results[0].configs}
    assert values["log.retention.ms"] == ("1234", 3) and values["message.max.bytes"] == ("2000000", 2)
    _each(pair, _describe("default"))
    _each(pair, _incremental("default", [("log.retention.ms", DELETE, None)]))
    _each(pair, _describe("default"))


@pytest.mark.parametrize("ops", [[("num.partitions", SET, "3")], [("socket.request.max.bytes", SET, "3")],
                                 [("max.connections", SET, "abc")]])
def test_settings_that_cannot_change_are_refused(pair, restore, ops):
    got = _each(pair, _incremental("broker", ops))
    assert got["pylog"].responses[0].error_code == ErrorCode.invalid_request


def test_another_broker_id_is_refused(pair):
    got = {name: pair.send(name, _describe("broker", ("message.max.bytes",))("7")) for name in IDS}
    assert {r.results[0].error_code for r in got.values()} == {ErrorCode.invalid_request}


def test_the_legacy_alter_configs_replaces_a_scope(pair, restore):
    def legacy(settings: dict[str, str]) -> Callable[[str], AlterConfigsRequest]:
        return lambda node: AlterConfigsRequest(resources=(LegacyResource(
            resource_type=BROKER, resource_name=node, configs=tuple(LegacyConfig(name=k, value=v)
                                                                    for k, v in settings.items())),),
            validate_only=False)
    _each(pair, legacy({"message.max.bytes": "3000000", "log.segment.bytes": "50000000"}))
    _each(pair, legacy({"log.segment.bytes": "60000000"}))        # message.max.bytes goes back
    _each(pair, _describe("broker"))
