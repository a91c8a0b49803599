"""Whose a checkpoint is, and when a job may resume it: the rules of connectors.checkpoint_owner, fed files."""
from __future__ import annotations

import json

import pytest

from connectors import checkpoint_owner
from connectors.checkpoint_owner import Owner, disagreement
from connectors.errors import CheckpointMismatchError
from connectors.offset_txns import AppState
from connectors.spark_checkpoint import kafka_position, progress
from sparklog.offsets import to_offset_dict, with_origin


def _spark_checkpoint(root, ends: list[dict], committed: int | None, origin: dict | None = None):
    """Spark's offsets/ and commits/ logs for batches with the given end offsets ({(t, p): o})."""
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    for i, end in enumerate(ends):
        src = to_offset_dict(end)
        if i == 0 and origin is not None:
            src = with_origin(src, origin)
        (root / "offsets" / str(i)).write_text('v1\n{"batchWatermarkMs":0}\n' + json.dumps(src) + "\n")
    for i in range(0 if committed is None else committed + 1):
        (root / "commits" / str(i)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    return str(root)


def test_a_checkpoint_of_another_app_or_table_is_refused_and_left_alone(tmp_path):
    mine = Owner("/data/a", "id-a", "app-a")
    checkpoint_owner.write(tmp_path, mine)
    assert checkpoint_owner.check(tmp_path, mine, "x") == mine
    before = (tmp_path / checkpoint_owner.OWNER_FILE).read_text()
    with pytest.raises(CheckpointMismatchError, match="belongs to app 'app-a' writing /data/a.*own checkpoint"):
        checkpoint_owner.check(tmp_path, Owner("/data/b", "id-b", "app-b"), "setting sink.checkpoint.location")
    with pytest.raises(CheckpointMismatchError, match="belongs to table /data/a"):
        checkpoint_owner.check(tmp_path, Owner("/data/b", None, "app-a"), "x")
    with pytest.raises(CheckpointMismatchError, match="deleted and created again"):
        checkpoint_owner.check(tmp_path, Owner("/data/a", "id-new", "app-a"), "x")
    assert (tmp_path / checkpoint_owner.OWNER_FILE).read_text() == before
    assert checkpoint_owner.check(tmp_path / "new", mine, "x") is None


def test_the_plain_sinks_legacy_file_still_names_its_app(tmp_path):
    (tmp_path / checkpoint_owner.LEGACY_SINK_FILE).write_text('{"appId": "old", "generation": 3}')
    assert checkpoint_owner.read(tmp_path) == Owner("", None, "old", 3)
    with pytest.raises(CheckpointMismatchError, match="app 'old'"):
        checkpoint_owner.check(tmp_path, Owner("/t", None, "new"), "x")


def test_batch_start_is_the_previous_end_or_the_queries_origin(tmp_path):
    ckpt = _spark_checkpoint(tmp_path, [{("t", 0): 5}, {("t", 0): 9}], committed=0, origin={("t", 0): 2})
    assert kafka_position(ckpt, 0).start == {("t", 0): 2} and kafka_position(ckpt, 0).offsets == {("t", 0): 5}
    assert kafka_position(ckpt, 1).start == {("t", 0): 5}
    p = progress(ckpt)
    assert (p.planned, p.committed, p.origin) == (1, 0, {("t", 0): 2})
    assert p.ends == {0: {("t", 0): 5}, 1: {("t", 0): 9}}


def test_spark_kafka_sources_initial_offsets_are_batch_zeros_start(tmp_path):
    ckpt = _spark_checkpoint(tmp_path, [{("t", 0): 5}], committed=None)
    (tmp_path / "sources" / "0").mkdir(parents=True)
    (tmp_path / "sources" / "0" / "0").write_text('v1\n{"t":{"0":3}}')
    assert kafka_position(ckpt, 0).start == {("t", 0): 3}


def _state(offsets: dict, markers: dict) -> AppState:
    return AppState(5, offsets, {}, max(markers) if markers else 0, None, markers)


def test_a_checkpoint_that_agrees_with_the_table_is_resumed(tmp_path):
    ckpt = progress(_spark_checkpoint(tmp_path, [{("t", 0): 5}, {("t", 0): 9}], committed=0, origin={("t", 0): 0}))
    assert disagreement(ckpt, _state({("t", 0): 5}, {0: 0}), 0) is None     # batch 1 planned, not committed
    assert disagreement(ckpt, _state({("t", 0): 9}, {0: 1}), 0) is None     # batch 1 in Delta, not in commits/


def test_a_checkpoint_the_table_moved_past_is_not_resumed(tmp_path):
    ckpt = progress(_spark_checkpoint(tmp_path, [{("t", 0): 5}, {("t", 0): 9}], committed=1, origin={("t", 0): 0}))
    # a batch_load of the same app committed up to 12 after the stream's batch 1
    assert "another writer" in disagreement(ckpt, _state({("t", 0): 12}, {0: 1}), 0)
    # the table holds a later batch of the generation than the checkpoint ever planned
    assert "last batch of generation 0 is 4" in disagreement(ckpt, _state({("t", 0): 9}, {0: 4}), 0)
    # the table holds no batch of this generation, yet the checkpoint committed one
    assert "holds no batch" in disagreement(ckpt, _state({("t", 0): 9}, {}), 0)


def test_before_any_batch_the_table_must_hold_the_checkpoints_origin(tmp_path):
    ckpt = progress(_spark_checkpoint(tmp_path, [{("t", 0): 5}], committed=None, origin={("t", 0): 0}))
    assert disagreement(ckpt, _state({("t", 0): 0}, {}), 0) is None
    assert "first batch starts at" in disagreement(ckpt, _state({("t", 0): 3}, {}), 0)


def test_a_partition_the_table_moved_on_that_the_checkpoint_never_read_is_a_disagreement(tmp_path):
    # a batch_load of the app loaded t-2 (added after the stream's last batch); the stream's checkpoint lacks it
    ckpt = progress(_spark_checkpoint(tmp_path, [{("t", 0): 5}], committed=0, origin={("t", 0): 0}))
    assert "another writer" in disagreement(ckpt, _state({("t", 0): 5, ("t", 2): 37}, {0: 0}), 0)
    # offsets of another topic are not the checkpoint's business
    assert disagreement(ckpt, _state({("t", 0): 5, ("u", 0): 9}, {0: 0}), 0) is None


def test_a_table_that_read_another_incarnation_of_the_topic_since_is_a_disagreement(tmp_path):
    ckpt = progress(_spark_checkpoint(tmp_path, [{("t", 0): 5}], committed=0, origin={("t", 0): 0}))
    ids = {0: {"t": "old"}}
    agreeing = AppState(5, {("t", 0): 5}, {"t": "old"}, 0, None, {0: 0})
    moved_on = AppState(6, {("t", 0): 5}, {"t": "new"}, 0, None, {0: 0})   # the same number, another log
    from dataclasses import replace
    assert disagreement(replace(ckpt, topic_ids=ids), agreeing, 0) is None
    assert "another writer" in disagreement(replace(ckpt, topic_ids=ids), moved_on, 0)
