"""Each setting is declared once (broker.config.CONFIG): the limits of a broker setting and of the topic
config it defaults are the same check, dynamic changes are range-checked too, TopicConfig has a field per
topic config, and docs/SETTINGS.md is the page generated from the declarations."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from broker.config import CONFIG, BrokerConfig, TopicConfig, parse_topic_value, settings_page
from broker.config_def import ConfigDef
from kafka_protocol.errors import InvalidConfigError, InvalidRequestError

REPO = Path(__file__).resolve().parents[2]


def test_the_settings_page_is_generated_from_the_declarations():
    assert (REPO / "docs" / "SETTINGS.md").read_text() == settings_page(), \
        "docs/SETTINGS.md is stale: python -m broker.config > docs/SETTINGS.md"
    assert "| `log.segment.bytes` | int | `1073741824` | [14,...] | dynamic" in settings_page()


def test_topic_config_has_a_field_for_each_declared_topic_config():
    fields = {f.name for f in dataclasses.fields(TopicConfig)} - {"overrides"}
    declared = set(CONFIG.topic_to_broker()) | set(CONFIG.topic_only)
    assert fields == {TopicConfig.attr(t) for t in declared}


@pytest.mark.parametrize("broker_key, topic_key, bad", [("log.segment.bytes", "segment.bytes", 13),
                                                        ("log.roll.ms", "segment.ms", 0),
                                                        ("min.insync.replicas", "min.insync.replicas", 0)])
def test_a_limit_is_one_check_for_the_broker_setting_its_topic_config_and_a_dynamic_change(broker_key, topic_key, bad):
    with pytest.raises(InvalidConfigError, match=f"{broker_key}: must be at least"):
        BrokerConfig({broker_key: bad})
    with pytest.raises(InvalidConfigError, match=f"{topic_key}: must be at least"):
        parse_topic_value(topic_key, str(bad))
    with pytest.raises(InvalidRequestError, match=f"{broker_key}: must be at least"):
        BrokerConfig().set_dynamic("default", {broker_key: str(bad)})
    assert parse_topic_value(topic_key, str(bad + 1)) == bad + 1


def test_port_and_static_settings():
    with pytest.raises(InvalidConfigError, match="port: must be at most 65535"):
        BrokerConfig({"port": 70000})
    with pytest.raises(InvalidRequestError, match="Cannot update these configs dynamically: port"):
        BrokerConfig().set_dynamic("broker", {"port": "9093"})
    assert "max.connections" in CONFIG.dynamic_keys() and "log.retention.ms" in CONFIG.dynamic_keys()
    assert CONFIG.synonyms()["log.retention.ms"] == ("log.retention.ms", "log.retention.minutes", "log.retention.hours")


def test_a_setting_cannot_be_declared_twice():
    d = ConfigDef().define("a.b", "int", int, 1, "one")
    with pytest.raises(ValueError, match="a.b is defined twice"):
        d.define("a.b", "int", int, 2, "two")
    with pytest.raises(ValueError, match="t.c is defined twice"):
        d.define("x.c", "int", int, 1, "x", topic="t.c").define_topic("t.c", "int", int, 1, "t")
