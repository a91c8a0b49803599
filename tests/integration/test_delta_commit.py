"""The Delta commit rule on real Delta tables: one commit per batch, replays and races never duplicate.

Every case runs twice: on a local table and on an `s3://` table in a real S3 server (MinIO), where a commit
is a conditional write of the next version's file (connectors.table_location)."""
from __future__ import annotations

import re
import threading
import uuid
from urllib.parse import unquote

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
from connectors.errors import MissingFilesError, NotContiguousError, TableLogError
from connectors.offset_manager import OffsetManager
from connectors.parquet_files import write_files
from connectors.table_location import TableFiles, TableLocation

SCHEMA = pa.schema([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64())])


def _batch(table: str, start: int, end: int, schema: pa.Schema = SCHEMA) -> list[dict]:
    data = {"topic": ["t"] * (end - start), "partition": [0] * (end - start), "offset": list(range(start, end))}
    for f in schema:
        if f.name not in data:
            data[f.name] = [None] * (end - start)
    rb = pa.RecordBatch.from_pydict(data, schema=schema)
    return [f.to_dict() for f in write_files(table, [rb], [])]


def _delta(table: str) -> DeltaTable:
    return TableLocation.of(table).delta()


def _offsets(dt_path: str) -> list[int]:
    return sorted(_delta(dt_path).to_pyarrow_table(columns=["offset"]).column("offset").to_pylist())


def _exists(table: str, path: str) -> bool:
    """Whether the file at `path` (relative, URL-escaped as in add actions) is in the table's store."""
    return TableFiles(table).exists(unquote(path))


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.object_store)])
def table(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "t")
    request.getfixturevalue("s3_env")   # the AWS variables a user sets; the table named by its URI alone
    return f"s3://tables/{uuid.uuid4().hex}/t"


def test_a_replayed_batch_is_skipped_and_its_files_removed(table):
    assert commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 10), SCHEMA, end_offsets={("t", 0): 10},
                                    start_offsets={("t", 0): 0}))
    replay_files = _batch(table, 0, 10)
    assert not commit_batch(BatchCommit(table, "app", 0, replay_files, SCHEMA, end_offsets={("t", 0): 10},
                                        start_offsets={("t", 0): 0}))
    assert _offsets(table) == list(range(10))
    assert not any(_exists(table, f["path"]) for f in replay_files), "orphans removed"
    assert committed_offsets(table, "app") == {("t", 0): 10}


def test_a_batch_below_the_stored_offsets_is_written_not_taken_for_a_replay(table):
    # a re-created topic starts again at offset 0: only the batch identity may call a batch a replay; the
    # batch's nominal start is the previous batch's end (the source reads the new log from its start)
    assert commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 10), SCHEMA, end_offsets={("t", 0): 10},
                                    start_offsets={("t", 0): 0}, topic_ids={"t": "old-id"}))
    assert commit_batch(BatchCommit(table, "app", 1, _batch(table, 0, 4), SCHEMA, end_offsets={("t", 0): 4},
                                    start_offsets={("t", 0): 10}, topic_ids={"t": "new-id"}))
    assert _offsets(table) == sorted(list(range(10)) + list(range(4)))
    state = app_state(table, "app")
    assert state.offsets == {("t", 0): 4} and state.topic_ids == {"t": "new-id"} and state.last_batch == 1


def test_a_claimed_generation_fences_the_older_writer_and_keeps_its_commits(table):
    commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 10), SCHEMA, end_offsets={("t", 0): 10},
                             start_offsets={("t", 0): 0}))
    claim = claim_generation(table, "app", SCHEMA)
    assert claim.generation == 1 and claim.offsets == {("t", 0): 10}
    late = _batch(table, 10, 20)
    with pytest.raises(FencedError, match=r"generation 0 was superseded by generation 1.*batch 1 was not committed"):
        commit_batch(BatchCommit(table, "app", 1, late, SCHEMA, end_offsets={("t", 0): 20},
                                 start_offsets={("t", 0): 10}))
    assert not any(_exists(table, f["path"]) for f in late), "the fenced batch's files are removed"
    assert _offsets(table) == list(range(10))
    assert commit_batch(BatchCommit(table, "app", 0, _batch(table, 10, 20), SCHEMA, generation=1,
                                    end_offsets={("t", 0): 20}, start_offsets={("t", 0): 10}))
    assert _offsets(table) == list(range(20))


def test_an_overwrite_never_removes_a_commit_it_did_not_read(table):
    commit_batch(BatchCommit(table, "stream", 0, _batch(table, 0, 10), SCHEMA, end_offsets={("t", 0): 10},
                             start_offsets={("t", 0): 0}))
    read = claim_generation(table, "rebuild", SCHEMA).table_version
    commit_batch(BatchCommit(table, "stream", 1, _batch(table, 10, 15), SCHEMA, end_offsets={("t", 0): 15},
                             start_offsets={("t", 0): 10}))
    with pytest.raises(CommitConflictError, match=rf"read version {read}.*by stream.*Nothing was replaced"):
        commit_batch(BatchCommit(table, "rebuild", 0, _batch(table, 0, 3), SCHEMA, mode="overwrite",
                                 read_version=read))
    assert _offsets(table) == list(range(15))


def test_appends_of_different_apps_racing_all_land(table):
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


def test_two_writers_with_the_same_app_id_race_and_one_wins(table):
    commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 5), SCHEMA, end_offsets={("t", 0): 5},
                             start_offsets={("t", 0): 0}))
    results: list[object] = []
    start = threading.Barrier(2)

    def writer() -> None:
        files = _batch(table, 5, 10)
        start.wait()
        try:
            results.append(commit_batch(BatchCommit(table, "app", 1, files, SCHEMA, end_offsets={("t", 0): 10},
                                                    start_offsets={("t", 0): 5})))
        except Exception as e:  # noqa: BLE001
            results.append(e)

    threads = [threading.Thread(target=writer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(map(str, results)) == ["False", "True"], results
    assert _offsets(table) == list(range(10))


def test_offsets_survive_checkpoints_and_log_cleanup(table):
    for i in range(12):
        commit_batch(BatchCommit(table, "app", i, _batch(table, i * 2, i * 2 + 2), SCHEMA, end_offsets={("t", 0): i * 2 + 2},
                                 start_offsets={("t", 0): i * 2}))
    dt = _delta(table)
    dt.create_checkpoint()
    dt.cleanup_metadata()  # with default retention nothing may go; remove the early JSON commits by hand too
    store = TableFiles(table)
    for name in store.names("_delta_log"):
        if re.fullmatch(r"0000000000000000000[0-5]\.json", name):
            assert store.delete(f"_delta_log/{name}")
    txns = list_app_transactions(table)
    assert txns["app"] == 11 and txns['pylog.offsets:["app","t",0]'] == 24, "the txn encoding tables resume from"
    assert OffsetManager(table, "app").committed() == {("t", 0): 24}
    assert OffsetManager(table, "app").starting_offsets_json() == '{"t":{"0":24}}'


def test_incompatible_schemas_fail_naming_columns_and_merge_adds_nullable_ones(table):
    commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 1), SCHEMA))
    wrong = pa.schema([("topic", pa.string()), ("partition", pa.string()), ("offset", pa.int64())])
    with pytest.raises(SchemaMismatchError, match="partition"):
        commit_batch(BatchCommit(table, "app", 1, [], wrong))
    wider = SCHEMA.append(pa.field("extra", pa.string()))
    with pytest.raises(SchemaMismatchError, match="extra.*mergeSchema"):
        commit_batch(BatchCommit(table, "app", 1, _batch(table, 1, 2, wider), wider))
    assert commit_batch(BatchCommit(table, "app", 2, _batch(table, 2, 3, wider), wider, merge_schema=True))
    assert "extra" in _delta(table).schema().to_arrow().names
    assert _offsets(table) == [0, 2]


def test_partitioned_tables_get_hive_directories(table):
    files = [f.to_dict() for f in write_files(table, [pa.RecordBatch.from_pydict(
        {"topic": ["a", "b", "a"], "partition": [0, 0, 1], "offset": [1, 2, 3]}, schema=SCHEMA)], ["topic"])]
    assert commit_batch(BatchCommit(table, "app", 0, files, SCHEMA, partition_by=["topic"]))
    assert sorted(n for n in TableFiles(table).names("") if n.startswith("topic=")) == ["topic=a", "topic=b"]
    t = _delta(table).to_pyarrow_table()
    assert sorted(zip(t.column("topic").to_pylist(), t.column("offset").to_pylist())) == [("a", 1), ("a", 3), ("b", 2)]


def test_only_numbered_commits_are_read_and_a_broken_log_is_an_error_not_an_empty_state(table):
    for i in range(4):
        commit_batch(BatchCommit(table, "app", i, _batch(table, i, i + 1), SCHEMA, end_offsets={("t", 0): i + 1},
                                 start_offsets={("t", 0): i}))
    store = TableFiles(table)
    # files that end in .json but are no commits: a log compaction, a V2 checkpoint's top-level file
    with store.open_output("_delta_log/00000000000000000001.00000000000000000002.compacted.json") as f:
        f.write(b"{}\n")
    v2 = "_delta_log/00000000000000000000.checkpoint.80a083e8-7026-4e23-81b2-6afd1fbc8aa3.json"
    with store.open_output(v2) as f:
        f.write(b'{"checkpointMetadata":{"version":0}}\n')
    assert list_app_transactions(table)['pylog.offsets:["app","t",0]'] == 4
    assert app_state(table, "app", 2).offsets == {("t", 0): 2}, "as of a retained version"
    # the commits before version 2 gone with no checkpoint to start from: unknown, not empty
    for name in (v2, f"_delta_log/{0:020d}.json", f"_delta_log/{1:020d}.json"):
        assert store.delete(name)
    with pytest.raises(TableLogError, match=r"its log cannot be read: the commits after the start \(no readable "
                                            r"checkpoint\) begin at version 2"):
        app_state(table, "app")
    with pytest.raises(TableLogError, match=r"version 3 is not retained in its log"):
        app_state(table, "app", 3)


# --- contiguity: a batch starts where the table's offsets for its app end -----------------------------------


def test_a_batch_that_does_not_start_at_the_tables_offsets_is_refused_and_commits_nothing(table):
    commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 10), SCHEMA, end_offsets={("t", 0): 10},
                             start_offsets={("t", 0): 0}))
    version = _delta(table).version()
    gap = _batch(table, 12, 20)
    with pytest.raises(NotContiguousError, match=r"t-0 starts at 12 but the table's offset is 10.*skip records"):
        commit_batch(BatchCommit(table, "app", 1, gap, SCHEMA, end_offsets={("t", 0): 20}, start_offsets={("t", 0): 12}))
    again = _batch(table, 5, 20)
    with pytest.raises(NotContiguousError, match=r"t-0 starts at 5 .* already holds"):
        commit_batch(BatchCommit(table, "app", 1, again, SCHEMA, end_offsets={("t", 0): 20}, start_offsets={("t", 0): 5}))
    assert _delta(table).version() == version and _offsets(table) == list(range(10))
    assert not any(_exists(table, f["path"]) for f in gap + again), "refused batches leave no files"
    # another app's offsets, and a partition the app never stored, start anywhere
    assert commit_batch(BatchCommit(table, "other", 0, _batch(table, 50, 51), SCHEMA, end_offsets={("t", 0): 51},
                                    start_offsets={("t", 0): 50}))
    assert commit_batch(BatchCommit(table, "app", 1, _batch(table, 10, 11), SCHEMA,
                                    end_offsets={("t", 0): 11, ("u", 0): 3}, start_offsets={("t", 0): 10, ("u", 0): 2}))


def test_a_batch_with_end_offsets_but_no_start_is_refused(table):
    files = _batch(table, 0, 3)
    with pytest.raises(NotContiguousError, match="no start offsets"):
        commit_batch(BatchCommit(table, "app", 0, files, SCHEMA, end_offsets={("t", 0): 3}))
    assert not TableFiles(table).names("_delta_log")


def test_a_claimed_generation_declares_its_start_and_its_first_batch_is_held_to_it(table):
    claim = claim_generation(table, "app", SCHEMA, starts=lambda state: {("t", 0): 7}, topic_ids={"t": "id1"})
    assert claim.generation == 0 and claim.offsets == {("t", 0): 7} and claim.topic_ids == {"t": "id1"}
    with pytest.raises(NotContiguousError, match="starts at 0"):   # a restart that resolved `earliest` afresh
        commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 9), SCHEMA, generation=0,
                                 end_offsets={("t", 0): 9}, start_offsets={("t", 0): 0}))
    assert commit_batch(BatchCommit(table, "app", 0, _batch(table, 7, 9), SCHEMA, generation=0,
                                    end_offsets={("t", 0): 9}, start_offsets={("t", 0): 7}))
    # the next claim's declared start is computed from the state on the snapshot it commits against
    seen = []
    claim = claim_generation(table, "app", SCHEMA, starts=lambda state: seen.append(state.offsets) or state.offsets)
    assert seen[-1] == {("t", 0): 9} and claim.generation == 1 and claim.offsets == {("t", 0): 9}


def test_batch_writes_have_their_own_marker_and_take_turns_with_a_stream(table):
    claim_generation(table, "app", SCHEMA, starts=lambda state: {("t", 0): 0})
    assert commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 5), SCHEMA, generation=0,
                                    end_offsets={("t", 0): 5}, start_offsets={("t", 0): 0}))
    # a batch write numbered 0 is no replay of the stream's batch 0, and no generation fences it
    assert commit_batch(BatchCommit(table, "app", 0, _batch(table, 5, 8), SCHEMA, generation=None,
                                    end_offsets={("t", 0): 8}, start_offsets={("t", 0): 5}))
    state = app_state(table, "app")
    assert state.last_batch == 0 and state.marker(0) == 0 and state.generation == 0 and state.offsets == {("t", 0): 8}
    # the stream's next batch (planned from its checkpoint at 5) no longer lines up: refused, nothing lost
    with pytest.raises(NotContiguousError, match="starts at 5 but the table's offset is 8"):
        commit_batch(BatchCommit(table, "app", 1, _batch(table, 5, 9), SCHEMA, generation=0,
                                 end_offsets={("t", 0): 9}, start_offsets={("t", 0): 5}))
    assert _offsets(table) == list(range(8))


def test_files_deleted_before_the_commit_are_refused_not_committed(table):
    commit_batch(BatchCommit(table, "app", 0, _batch(table, 0, 2), SCHEMA, end_offsets={("t", 0): 2},
                             start_offsets={("t", 0): 0}))
    files = _batch(table, 2, 4)
    assert TableFiles(table).delete(unquote(files[0]["path"]))   # what VACUUM RETAIN 0 HOURS does to an uncommitted file
    with pytest.raises(MissingFilesError, match="deleted before its commit.*VACUUM"):
        commit_batch(BatchCommit(table, "app", 1, files, SCHEMA, end_offsets={("t", 0): 4},
                                 start_offsets={("t", 0): 2}))
    assert _offsets(table) == [0, 1] and committed_offsets(table, "app") == {("t", 0): 2}


def test_a_write_that_did_not_commit_has_its_files_removed_and_one_that_did_keeps_them(table):
    from connectors.orphans import remove_uncommitted

    rb = lambda lo, hi: pa.RecordBatch.from_pydict(   # noqa: E731
        {"topic": ["t"] * (hi - lo), "partition": [0] * (hi - lo), "offset": list(range(lo, hi))}, schema=SCHEMA)
    kept = [f.to_dict() for f in write_files(table, [rb(0, 10)], [], write_id="w1")]
    assert commit_batch(BatchCommit(table, "app", 0, kept, SCHEMA, end_offsets={("t", 0): 10},
                                    start_offsets={("t", 0): 0}))
    assert remove_uncommitted(table, "w1", -1) == [], "a committed write's files are the table's"
    assert len(_delta(table).file_uris()) == 1 and _offsets(table) == list(range(10))
    # a write whose tasks were cancelled: files on disk (one in a partition directory), no commit
    left = write_files(table, [rb(10, 20)], [], write_id="w2") + write_files(table, [rb(20, 30)], ["partition"],
                                                                             write_id="w2")
    assert remove_uncommitted(table, "w2", _delta(table).version()) == sorted(f.path for f in left)
    assert not any(_exists(table, f.path) for f in left)
    assert _offsets(table) == list(range(10))
