"""The Delta commit rule on real Delta tables: one commit per batch, replays and races never duplicate."""
from __future__ import annotations

import threading

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from connectors.delta_commit import (
    BatchCommit,
    CommitConflictError,
    FencedError,
    SchemaMismatchError,
    app_state,
    claim_generation,
    commit_batch,
    committed_offsets,
)
from connectors.delta_log_reader import list_app_transactions
from connectors.errors import TableLogError
from connectors.offset_manager import OffsetManager
from connectors.parquet_files import write_files

SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64())])


def _batch(table: str, start: int, end: int, schema: pa.Schema = SCHEMA) -> list[dict]:
    data = {"topic": ["t"] * (end - start), "partition": [0] * (end - start), "offset": list(range(start, end))}
    for f in schema:
        if f.name not in data:
            data[f.name] = [None] * (end - start)
    rb = pa.RecordBatch.from_pydict(data, schema=schema)
    return [f.to_dict() for f in write_files(table, [rb], [])]


def _offsets(dt_path: str) -> list[int]:
    return sorted(DeltaTable(dt_path).to_pyarrow_table(columns=["offset"]).column("offset").to_pylist())


def test_a_replayed_batch_is_skipped_and_its_files_removed(tmp_path):
    table = str(tmp_path / "t")
    assert commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 10), SCHEMA, end_offsets={("t", 0): 10}))
    replay_files = _batch(table, 0, 10)
    assert not commit_batch(BatchCommit(table, "app", 0, replay_files, SCHEMA, end_offsets={("t", 0): 10}))
    assert _offsets(table) == list(range(10))
    assert not any((tmp_path / "t" / f["path"]).exists() for f in replay_files), "orphans removed"
    assert committed_offsets(table, "app") == {("t", 0): 10}


def test_a_batch_below_the_stored_offsets_is_written_not_taken_for_a_replay(tmp_path):
    # a re-created topic starts again at offset 0: only the batch identity may call a batch a replay
    table = str(tmp_path / "t")
    assert commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 10), SCHEMA, end_offsets={("t", 0): 10},
                                    topic_ids={"t": "old-id"}))
    assert commit_batch(BatchCommit(table, "app", 1, _batch(table, 0, 4), SCHEMA, end_offsets={("t", 0): 4},
                                    topic_ids={"t": "new-id"}))
    assert _offsets(table) == sorted(list(range(10)) + list(range(4)))
    state = app_state(table, "app")
    assert state.offsets == {("t", 0): 4} and state.topic_ids == {"t": "new-id"} and state.last_batch == 1


def test_a_claimed_generation_fences_the_older_writer_and_keeps_its_commits(tmp_path):
    table = str(tmp_path / "t")
    commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 10), SCHEMA, end_offsets={("t", 0): 10}))
    claim = claim_generation(table, "app", SCHEMA)
    assert claim.generation == 1 and claim.offsets == {("t", 0): 10}
    late = _batch(table, 10, 20)
    with pytest.raises(FencedError, match=r"generation 0 was superseded by generation 1.*batch 1 was not committed"):
        commit_batch(BatchCommit(table, "app", 1, late, SCHEMA, end_offsets={("t", 0): 20}))
    assert not any((tmp_path / "t" / f["path"]).exists() for f in late), "the fenced batch's files are removed"
    assert _offsets(table) == list(range(10))
    assert commit_batch(BatchCommit(table, "app", 0, _batch(table, 10, 20), SCHEMA, generation=1,
                                    end_offsets={("t", 0): 20}))
    assert _offsets(table) == list(range(20))


def test_an_overwrite_never_removes_a_commit_it_did_not_read(tmp_path):
    table = str(tmp_path / "t")
    commit_batch(BatchCommit(table, "stream", 0, _batch(table, 0, 10), SCHEMA, end_offsets={("t", 0): 10}))
    read = claim_generation(table, "rebuild", SCHEMA).table_version
    commit_batch(BatchCommit(table, "stream", 1, _batch(table, 10, 15), SCHEMA, end_offsets={("t", 0): 15}))
    with pytest.raises(CommitConflictError, match=rf"read version {read}.*by stream.*Nothing was replaced"):
        commit_batch(BatchCommit(table, "rebuild", 0, _batch(table, 0, 3), SCHEMA, mode="overwrite",
                                 read_version=read))
    assert _offsets(table) == list(range(15))


def test_appends_of_different_apps_racing_all_land(tmp_path):
    table = str(tmp_path / "t")
    commit_batch(BatchCommit(table, "a0", 0, _batch(table, 0, 1), SCHEMA))
    results: list[object] = []
    start = threading.Barrier(4)

    def writer(i: int) -> None:
        files = _batch(table, 10 * (i + 1), 10 * (i + 1) + 5)
        start.wait()
        results.append(commit_batch(BatchCommit(table, f"app{i}", 0, files, SCHEMA)))

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4
    assert len(_offsets(table)) == 1 + 4 * 5


def test_two_writers_with_the_same_app_id_race_and_one_wins(tmp_path):
    table = str(tmp_path / "t")
    commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 5), SCHEMA, end_offsets={("t", 0): 5}))
    results: list[object] = []
    start = threading.Barrier(2)

    def writer() -> None:
        files = _batch(table, 5, 10)
        start.wait()
        try:
            results.append(commit_batch(BatchCommit(table, "app", 1, files, SCHEMA, end_offsets={("t", 0): 10})))
        except Exception as e:  # noqa: BLE001
            results.append(e)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(map(str, results)) == ["False", "True"], results
    assert _offsets(table) == list(range(10))


def test_offsets_survive_checkpoints_and_log_cleanup(tmp_path):
    table = str(tmp_path / "t")
    for i in range(12):
        commit_batch(BatchCommit(table, "app", i, _batch(table, i * 2, i * 2 + 2), SCHEMA, end_offsets={("t", 0): i * 2 + 2}))
    dt = DeltaTable(table)
    dt.create_checkpoint()
    dt.cleanup_metadata()  # with default retention nothing may go; remove the early JSON commits by hand too
    for f in sorted((tmp_path / "t" / "_delta_log").glob("0000000000000000000[0-5].json")):
        f.unlink()
    txns = list_app_transactions(table)
    assert txns["app"] == 11 and txns['pylog.offsets:["app","t",0]'] == 24, "the txn encoding tables resume from"
    assert OffsetManager(table, "app").committed() == {("t", 0): 24}
    assert OffsetManager(table, "app").starting_offsets_json() == '{"t":{"0":24}}'


def test_incompatible_schemas_fail_naming_columns_and_merge_adds_nullable_ones(tmp_path):
    table = str(tmp_path / "t")
    commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 1), SCHEMA))
    wrong = pa.schema([("topic", pa.string()), ("partition", pa.string()), ("offset", pa.int64())])
    with pytest.raises(SchemaMismatchError, match="partition"):
        commit_batch(BatchCommit(table, "app", 1, [], wrong))
    wider = SCHEMA.append(pa.field("extra", pa.string()))
    with pytest.raises(SchemaMismatchError, match="extra.*mergeSchema"):
        commit_batch(BatchCommit(table, "app", 1, _batch(table, 1, 2, wider), wider))
    assert commit_batch(BatchCommit(table, "app", 2, _batch(table, 2, 3, wider), wider, merge_schema=True))
    assert "extra" in DeltaTable(table).schema().to_arrow().names
    assert _offsets(table) == [0, 2]


def test_partitioned_tables_get_hive_directories(tmp_path):
    table = str(tmp_path / "t")
    files = [f.to_dict() for f in write_files(table, [pa.RecordBatch.from_pydict(
        {"topic": ["a", "b", "a"], "partition": [0, 0, 1], "offset": [1, 2, 3]}, schema=SCHEMA)], ["topic"])]
    assert commit_batch(BatchCommit(table, "app", 0, files, SCHEMA, partition_by=["topic"]))
    assert sorted(p.name for p in (tmp_path / "t").glob("topic=*")) == ["topic=a", "topic=b"]
    t = DeltaTable(table).to_pyarrow_table()
    assert sorted(zip(t.column("topic").to_pylist(), t.column("offset").to_pylist())) == [("a", 1), ("a", 3), ("b", 2)]


def test_only_numbered_commits_are_read_and_a_broken_log_is_an_error_not_an_empty_state(tmp_path):
    table = str(tmp_path / "t")
    for i in range(4):
        commit_batch(BatchCommit(table, "app", i, _batch(table, i, i + 1), SCHEMA, end_offsets={("t", 0): i + 1}))
    log_dir = tmp_path / "t" / "_delta_log"
    # files that end in .json but are no commits: a log compaction, a V2 checkpoint's top-level file
    (log_dir / "00000000000000000001.00000000000000000002.compacted.json").write_text("{}\n")
    v2 = log_dir / "00000000000000000000.checkpoint.80a083e8-7026-4e23-81b2-6afd1fbc8aa3.json"
    v2.write_text('{"checkpointMetadata":{"version":0}}\n')
    assert list_app_transactions(table)['pylog.offsets:["app","t",0]'] == 4
    assert app_state(table, "app", 2).offsets == {("t", 0): 2}, "as of a retained version"
    # the commits before version 2 gone with no checkpoint to start from: unknown, not empty
    for f in (v2, log_dir / f"{0:020d}.json", log_dir / f"{1:020d}.json"):
        f.unlink()
    with pytest.raises(TableLogError, match=r"its log cannot be read: the commits after the start \(no readable "
                                            r"checkpoint\) begin at version 2"):
        app_state(table, "app")
    with pytest.raises(TableLogError, match=r"version 3 is not retained in its log"):
        app_state(table, "app", 3)
