"""LogManager: discovering partitions, clean-shutdown marker, create/delete, periodic chores."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.support.batches import batch_of_size, encode_batch
from broker.config import TopicConfig
from broker.log import LogManager
from broker.log.log_manager import parse_partition_dir
from broker.log.segment import LogSegment

CFG = TopicConfig.default()
NOW_MS = 1_700_000_000_000


def manager(tmp_path: Path) -> LogManager:
    return LogManager(tmp_path, clock=lambda: NOW_MS / 1000)


@pytest.mark.parametrize("name, parsed", [
    ("orders-0", ("orders", 0)),
    ("my-dashed-topic-12", ("my-dashed-topic", 12)),
    ("__consumer_offsets-49", ("__consumer_offsets", 49)),
    ("__cluster_metadata-0", None),
    ("meta", None),
    ("orders-", None),
    ("orders-x", None),
    ("orders-0.1b2c-delete", None),
    (".hidden-0", None),
])
def test_partition_directory_names_split_on_the_last_dash(name, parsed):
    assert parse_partition_dir(name) == parsed


def test_startup_opens_every_partition_directory_and_ignores_the_rest(tmp_path):
    lm = manager(tmp_path)
    lm.startup({})
    lm.create("a-b", 0, CFG).append(encode_batch([b"x"] * 3))
    lm.create("a-b", 1, CFG)
    lm.create("c", 0, CFG)
    lm.shutdown()
    (tmp_path / "meta").mkdir()
    (tmp_path / "__cluster_metadata-0").mkdir()
    (tmp_path / "notes-1").write_text("a file, not a directory")
    again = manager(tmp_path)
    again.startup({"a-b": CFG, "c": CFG})
    assert sorted((p.topic, p.partition) for p in again.all_logs()) == [("a-b", 0), ("a-b", 1), ("c", 0)]
    assert again.get("a-b", 0).log_end_offset == 3
    assert again.get("zzz", 0) is None


def test_directories_of_unknown_topics_are_left_alone_unless_a_default_config_is_given(tmp_path):
    lm = manager(tmp_path)
    lm.startup({})
    lm.create("old", 0, CFG).append(encode_batch())
    lm.shutdown()
    skipping = manager(tmp_path)
    skipping.startup({})
    assert skipping.all_logs() == [] and (tmp_path / "old-0").exists()
    skipping.shutdown()
    defaulting = manager(tmp_path)
    defaulting.startup({}, default_config=CFG)
    assert defaulting.get("old", 0).log_end_offset == 1


def _recover_calls(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = LogSegment.recover

    def spy(self: LogSegment) -> int:
        calls.append(self.base_offset)
        return real(self)
    monkeypatch.setattr(LogSegment, "recover", spy)
    return calls


def test_a_clean_shutdown_skips_recovery_once_and_the_marker_is_consumed(tmp_path, monkeypatch):
    calls = _recover_calls(monkeypatch)
    lm = manager(tmp_path)
    lm.startup({})
    lm.create("t", 0, CFG).append(encode_batch())
    lm.shutdown()
    assert (tmp_path / LogManager.CLEAN_SHUTDOWN_FILE).exists()
    clean = manager(tmp_path)
    clean.startup({"t": CFG})
    assert calls == [] and not (tmp_path / LogManager.CLEAN_SHUTDOWN_FILE).exists()
    crashed = manager(tmp_path)        # `clean` was never shut down
    crashed.startup({"t": CFG})
    assert calls == [0]


def test_create_is_idempotent(tmp_path):
    lm = manager(tmp_path)
    lm.startup({})
    first = lm.create("t", 0, CFG)
    first.append(encode_batch())
    assert lm.create("t", 0, CFG) is first
    assert (tmp_path / "t-0" / "00000000000000000000.log").exists()


def test_delete_topic_removes_all_its_partitions(tmp_path):
    lm = manager(tmp_path)
    lm.startup({})
    for p in range(3):
        lm.create("gone", p, CFG).append(encode_batch())
    lm.create("kept", 0, CFG)
    lm.delete_topic("gone")
    assert [p.topic for p in lm.all_logs()] == ["kept"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept-0"]


def test_update_topic_config_reaches_every_partition(tmp_path):
    lm = manager(tmp_path)
    lm.startup({})
    logs = [lm.create("t", p, CFG) for p in range(2)]
    new = TopicConfig.default(retention_ms=5)
    lm.update_topic_config("t", new)
    assert all(plog.config is new for plog in logs)


def test_periodic_chores_apply_retention_flush_and_purge(tmp_path):
    lm = manager(tmp_path)
    lm.startup({})
    cfg = TopicConfig.default(segment_bytes=200, retention_ms=1000, file_delete_delay_ms=500, flush_ms=100)
    plog = lm.create("t", 0, cfg)
    for _ in range(5):
        plog.append(batch_of_size(100, timestamp=NOW_MS - 10_000))
    assert lm.run_retention(NOW_MS) == 2
    assert plog.log_start_offset == 4
    assert len(list((tmp_path / "t-0").glob("*.deleted"))) == 6
    lm.purge_deleted_files(NOW_MS + 499)
    assert len(list((tmp_path / "t-0").glob("*.deleted"))) == 6
    lm.purge_deleted_files(NOW_MS + 500)
    assert list((tmp_path / "t-0").glob("*.deleted")) == []
    assert plog.active_segment.dirty
    lm.flush_due(NOW_MS + 10**6)
    assert not plog.active_segment.dirty


def test_a_thousand_mostly_empty_partitions_start_quickly(tmp_path):
    lm = manager(tmp_path)
    lm.startup({})
    for p in range(1000):
        plog = lm.create("t", p, CFG)
        if p % 10 == 0:
            plog.append(encode_batch([b"x"] * 10))
    lm.shutdown()
    for recover in (False, True):
        if recover:
            (tmp_path / LogManager.CLEAN_SHUTDOWN_FILE).unlink(missing_ok=True)
        started = time.process_time()     # CPU time: a busy machine (make test's other processes) does not count
        again = manager(tmp_path)
        again.startup({"t": CFG})
        elapsed = time.process_time() - started
        assert len(again.all_logs()) == 1000
        assert elapsed < 3.0, f"startup took {elapsed:.2f} s of CPU (recover={recover})"
        again.shutdown()
