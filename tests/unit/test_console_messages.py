"""The console's message browser rules (pylog/console/messages.py): how keys and values are shown, and which
browse requests are refused with which sentence."""
from __future__ import annotations

import pytest

from pylog.console.errors import BadInput
from pylog.console.messages import (
    Record,
    check_offset,
    iso_time,
    last_page_start,
    parse_browse,
    parse_partition,
    show,
    show_records,
)


def test_utf8_text_is_shown_as_written() -> None:
    shown = show("grüße".encode(), "utf8")
    assert (shown.text, shown.shown_as, shown.note) == ("grüße", "utf8", None)


def test_json_is_pretty_printed_keeping_key_order_and_non_ascii() -> None:
    shown = show(b'{"b":1,"a":{"x":"\xc3\xa9"}}', "json")
    assert shown.shown_as == "json" and shown.note is None
    assert shown.text == '{\n  "b": 1,\n  "a": {\n    "x": "é"\n  }\n}'


def test_text_that_is_not_json_falls_back_to_utf8_and_says_so() -> None:
    shown = show(b"plain text", "json")
    assert (shown.text, shown.shown_as, shown.note) == ("plain text", "utf8", "not JSON: shown as UTF-8")


@pytest.mark.parametrize("fmt", ["utf8", "json"])
def test_bytes_that_are_not_utf8_fall_back_to_hex_and_say_so(fmt: str) -> None:
    shown = show(b"\xff\xfeA\x00", fmt)
    assert (shown.text, shown.shown_as, shown.note) == ("ff fe 41 00", "hex", "not UTF-8: shown as hex")


def test_hex_is_every_byte_and_null_is_null() -> None:
    assert show(b"hi", "hex").text == "68 69" and show(b"", "hex").text == ""
    assert (show(None, "json").text, show(None, "json").shown_as) == ("null", "null")


def test_records_are_shown_with_their_time_in_utc_and_headers_in_the_value_format() -> None:
    (r,) = show_records([Record(0, 7, 1_700_000_000_123, 1, b"k", b"\x80", (("h", b"1"),))], "utf8", "hex")
    assert (r.offset, r.time, r.timestamp_type) == (7, "2023-11-14T22:13:20.123Z", "CreateTime")
    assert (r.key.text, r.value.text, r.value.note, r.headers[0][1].text) == ("k", "80", None, "31")
    assert iso_time(-1) == ""


def test_a_browse_by_offset_by_timestamp_or_the_latest_page() -> None:
    by_offset = parse_browse("12", None, "5", "hex", "json")
    assert (by_offset.offset, by_offset.timestamp_ms, by_offset.limit) == (12, None, 5)
    assert (by_offset.key_format, by_offset.value_format) == ("hex", "json")
    by_time = parse_browse("", "2024-01-31T10:00:00Z", None, None, "")
    assert (by_time.offset, by_time.timestamp_ms, by_time.limit, by_time.value_format) == \
        (None, 1_706_695_200_000, 20, "utf8")
    assert parse_browse(None, "1706695200000", None, None, None).timestamp_ms == 1_706_695_200_000
    assert last_page_start(3, 100, 20) == 80 and last_page_start(3, 10, 20) == 3


@pytest.mark.parametrize("offset, timestamp, limit, fmt, sentence", [
    ("abc", None, None, None, "bad offset 'abc': expected a whole number"),
    ("-1", None, None, None, "bad offset '-1': offsets start at 0"),
    ("1", "2024-01-01", None, None, "give either an offset or a timestamp, not both"),
    (None, "yesterday", None, None, "bad timestamp 'yesterday': expected epoch milliseconds or ISO-8601"),
    (None, None, "0", None, "bad limit 0: show between 1 and 500 messages"),
    (None, None, None, "base64", "bad value format 'base64': choose one of utf8, json, hex"),
])
def test_bad_browse_parameters_are_one_sentence_naming_the_problem(offset: str | None, timestamp: str | None,
                                                                   limit: str | None, fmt: str | None,
                                                                   sentence: str) -> None:
    with pytest.raises(BadInput) as e:
        parse_browse(offset, timestamp, limit, None, fmt)
    assert str(e.value).startswith(sentence) and e.value.status == 400


def test_partitions_and_offsets_out_of_range_name_the_range() -> None:
    assert parse_partition("2", "events", 3) == 2
    with pytest.raises(BadInput, match=r"^topic 'events' has no partition 3: it has 3 partitions, pick 0 to 2$"):
        parse_partition("3", "events", 3)
    with pytest.raises(BadInput, match=r"^offset 11 is beyond the end of events-0 \(high watermark 10\): "
                                       r"pick an offset from 4 to 10$"):
        check_offset("events", 0, 11, 4, 10)
    with pytest.raises(BadInput, match=r"^offset 3 is before the start of events-0 \(log start 4"):
        check_offset("events", 0, 3, 4, 10)
    check_offset("events", 0, 10, 4, 10)        # the high watermark itself: nothing there yet, not an error
    check_offset("events", 0, 4, 4, 10)
