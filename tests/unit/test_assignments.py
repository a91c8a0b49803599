"""One parser for `key=value` flags (--set for the broker and the jobs, the tools' --config/--property)."""
from __future__ import annotations

import pytest

from broker.config import BrokerConfig
from kafka_protocol.properties import parse_assignments
from kafka_protocol.errors import InvalidConfigError
from pylog.tools.client import parse_kv
from pylog.tools.errors import CliError
from jobs.config import JobConfig, JobConfigError


def test_assignments_later_ones_win_and_values_may_hold_equals_signs():
    assert parse_assignments(["a=1", " b = x=y ", "a=2"], "--set") == {"a": "2", "b": "x=y"}
    assert parse_kv(["key.separator= "], "--property") == {"key.separator": " "}, "the tools keep values as typed"


@pytest.mark.parametrize("bad", ["novalue", "=v", "  =v"])
def test_every_caller_names_the_flag_and_the_bad_item(bad):
    with pytest.raises(InvalidConfigError, match=f"bad --set '{bad}': expected key=value"):
        BrokerConfig.load(overrides=[bad])
    with pytest.raises(JobConfigError, match=f"job demo: bad --set '{bad}': expected key=value"):
        JobConfig.load("demo", None, [bad])
    with pytest.raises(CliError, match=f"bad --config '{bad}': expected key=value"):
        parse_kv([bad], "--config")
