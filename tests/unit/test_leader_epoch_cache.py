"""LeaderEpochCache: Kafka's LeaderEpochFileCache rules and its `leader-epoch-checkpoint` file."""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache

UNDEFINED = (UNDEFINED_EPOCH, UNDEFINED_OFFSET)


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for epoch, offset in entries:
        cache.assign(epoch, offset)
    return cache


# --- assign -------------------------------------------------------------------------------------

def test_a_new_cache_is_empty_and_writes_no_file(tmp_path):
    cache = cache_with(tmp_path)
    assert (cache.entries, cache.latest_epoch, len(cache)) == ([], None, 0)
    assert not cache.path.exists()


def test_a_higher_epoch_is_appended(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (2, 10), (5, 25))
    assert cache.entries == [(0, 0), (2, 10), (5, 25)]
    assert cache.latest_epoch == 5


def test_the_latest_epoch_again_is_a_no_op(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (2, 10))
    cache.path.unlink()
    cache.assign(2, 30)
    assert cache.entries == [(1, 0), (2, 10)]
    assert not cache.path.exists(), "a no-op must not rewrite the file"


def test_the_latest_epoch_with_a_lower_start_offset_replaces_it(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (2, 10))
    cache.assign(2, 5)
    assert cache.entries == [(1, 0), (2, 5)]


def test_a_start_offset_below_later_entries_removes_them(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (2, 10), (3, 20))
    cache.assign(4, 15)
    assert cache.entries == [(1, 0), (2, 10), (4, 15)]


def test_an_epoch_below_later_entries_removes_them(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (2, 10), (3, 20))
    cache.assign(2, 30)          # Kafka: entries with epoch >= 2 conflict with it
    assert cache.entries == [(1, 0), (2, 30)]


def test_a_higher_epoch_at_the_same_start_offset_replaces_the_empty_epoch(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (2, 10))
    cache.assign(3, 10)          # epoch 2 wrote nothing
    assert cache.entries == [(1, 0), (3, 10)]


@pytest.mark.parametrize("epoch, offset", [(-1, 0), (0, -1)])
def test_negative_entries_are_refused(tmp_path, epoch, offset):
    with pytest.raises(ValueError, match="invalid leader epoch entry"):
        cache_with(tmp_path).assign(epoch, offset)


# --- end_offset_for (OffsetsForLeaderEpoch) -------------------------------------------------------

def test_end_offset_of_the_latest_epoch_is_the_log_end_offset(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (3, 10))
    assert cache.end_offset_for(3, 42) == (3, 42)


def test_end_offset_of_an_older_epoch_is_the_next_epochs_start(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (3, 10), (6, 25))
    assert cache.end_offset_for(1, 42) == (1, 10)
    assert cache.end_offset_for(3, 42) == (3, 25)


def test_an_unknown_epoch_between_entries_answers_with_the_largest_epoch_below_it(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (3, 10), (6, 25))
    assert cache.end_offset_for(2, 42) == (1, 10)
    assert cache.end_offset_for(5, 42) == (3, 25)


def test_an_epoch_below_the_first_entry_answers_with_the_first_start_offset(tmp_path):
    cache = cache_with(tmp_path, (4, 100), (6, 125))
    assert cache.end_offset_for(2, 142) == (2, 100)


@pytest.mark.parametrize("requested", [UNDEFINED_EPOCH, 7, 100])
def test_undefined_or_future_epochs_have_no_end_offset(tmp_path, requested):
    assert cache_with(tmp_path, (1, 0), (6, 25)).end_offset_for(requested, 42) == UNDEFINED


def test_an_empty_cache_has_no_end_offsets(tmp_path):
    assert cache_with(tmp_path).end_offset_for(0, 42) == UNDEFINED


def test_epoch_for_offset(tmp_path):
    cache = cache_with(tmp_path, (1, 5), (3, 10), (6, 25))
    assert [cache.epoch_for_offset(o) for o in (0, 4, 5, 9, 10, 24, 25, 1000)] == [None, None, 1, 1, 3, 3, 6, 6]


# --- truncation ----------------------------------------------------------------------------------

def test_truncate_from_end_drops_entries_starting_at_or_after_the_end(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (3, 10), (6, 25))
    cache.truncate_from_end(25)
    assert cache.entries == [(1, 0), (3, 10)]
    cache.truncate_from_end(11)
    assert cache.entries == [(1, 0), (3, 10)]
    cache.truncate_from_end(0)
    assert cache.entries == []
    assert LeaderEpochCache(cache.path).entries == []


def test_truncate_from_start_moves_the_covering_entry_to_the_new_start(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (3, 10), (6, 25))
    cache.truncate_from_start(12)
    assert cache.entries == [(3, 12), (6, 25)]
    cache.truncate_from_start(25)
    assert cache.entries == [(6, 25)]
    assert LeaderEpochCache(cache.path).entries == [(6, 25)]


def test_truncate_from_start_before_the_first_entry_changes_nothing(tmp_path):
    cache = cache_with(tmp_path, (3, 10), (6, 25))
    cache.truncate_from_start(4)
    assert cache.entries == [(3, 10), (6, 25)]


def test_clear_empties_the_cache_and_its_file(tmp_path):
    cache = cache_with(tmp_path, (1, 0), (3, 10))
    cache.clear()
    assert cache.entries == []
    assert LeaderEpochCache(cache.path).entries == []


# --- the checkpoint file --------------------------------------------------------------------------

def test_the_file_is_kafkas_checkpoint_format_byte_for_byte(tmp_path):
    cache_with(tmp_path, (0, 0), (3, 120))
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n2\n0 0\n3 120\n"


def test_entries_survive_a_reopen(tmp_path):
    cache = cache_with(tmp_path, (0, 0), (2, 17), (9, 4000))
    assert LeaderEpochCache(cache.path).entries == [(0, 0), (2, 17), (9, 4000)]


def test_a_kafka_written_file_is_read(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"0\n3\n0 0\n1 57\n4 300\n")
    cache = LeaderEpochCache(path)
    assert (cache.entries, cache.latest_epoch) == ([(0, 0), (1, 57), (4, 300)], 4)


@pytest.mark.parametrize("content", [b"1\n0\n", b"0\n2\n0 0\n", b"0\nx\n", b"0\n1\n0\n", b""])
def test_a_malformed_file_is_an_error_naming_it(tmp_path, content):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(content)
    with pytest.raises(ValueError, match="malformed leader epoch checkpoint .*leader-epoch-checkpoint"):
        LeaderEpochCache(path)


def test_deferred_assigns_of_many_partitions_are_written_in_one_batch_as_one_at_a_time_would_be(tmp_path):
    """A broker taking over many leaderships defers each checkpoint and writes them together
    (fileutil.atomic_write_many): each file then reads back as the cache that wrote it, with no temp file left."""
    from broker.log.fileutil import atomic_write_many
    caches = []
    for p in range(20):
        (tmp_path / f"t-{p}").mkdir()
        caches.append(cache_with(tmp_path / f"t-{p}", (0, 0)))
    pending: list[tuple[Path, bytes]] = []
    for p, cache in enumerate(caches):
        cache.assign(3, 10 * p + 1, defer=pending)
    assert len(pending) == 20
    assert all(LeaderEpochCache(c.path).entries == [(0, 0)] for c in caches)     # the files wait for the batch
    atomic_write_many(pending)
    for p, cache in enumerate(caches):
        assert LeaderEpochCache(cache.path).entries == [(0, 0), (3, 10 * p + 1)]
    assert sorted(x.name for x in tmp_path.rglob("*")) == sorted(
        [f"t-{p}" for p in range(20)] + ["leader-epoch-checkpoint"] * 20)
