"""One rule for typed times: epoch ms, or ISO-8601 in UTC unless a zone is named, whatever the local zone."""
from __future__ import annotations

import os
import time

import pytest

from kafka_protocol.timestamps import parse_instant_ms
from pylog.tools.errors import CliError
from pylog.tools.groups import parse_datetime


@pytest.fixture
def far_from_utc():
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Pacific/Kiritimati"   # UTC+14: a local-time reading would be 14 hours off
    time.tzset()
    yield
    if old is None:
        os.environ.pop("TZ")
    else:
        os.environ["TZ"] = old
    time.tzset()


def test_a_time_without_a_zone_is_utc_on_any_machine(far_from_utc):
    assert parse_instant_ms("2024-01-31T10:00:00.000") == 1_706_695_200_000
    assert parse_instant_ms("2024-01-31T10:00:00Z") == 1_706_695_200_000
    assert parse_instant_ms("2024-01-31T12:00:00+02:00") == 1_706_695_200_000
    assert parse_instant_ms(" 1706695200000 ") == 1_706_695_200_000


def test_the_groups_tool_and_the_reprocess_job_read_times_alike(far_from_utc):
    from jobs.config import JobConfig
    from jobs.reprocess import parse_from

    text = "2024-01-31T10:00:00.000"
    assert parse_datetime(text) == 1_706_695_200_000
    assert parse_from(JobConfig("reprocess", {"reprocess.from": f"timestamp:{text}"})) == ("timestamp", 1_706_695_200_000)


def test_bad_times_name_the_accepted_forms():
    with pytest.raises(ValueError, match="ISO-8601"):
        parse_instant_ms("yesterday")
    with pytest.raises(CliError, match="bad --to-datetime.*UTC unless a zone"):
        parse_datetime("31/01/2024")
