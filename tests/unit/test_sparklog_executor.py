"""The executor's batch joining: small Arrow batches of a task go to Spark as fewer, larger ones."""
from __future__ import annotations

import pyarrow as pa

from sparklog.executor import coalesce_batches


def test_small_arrow_batches_are_joined_in_order_and_large_ones_pass_as_they_are():
    def batch(first: int, n: int) -> pa.RecordBatch:
        return pa.record_batch([pa.array(range(first, first + n), pa.int64())], names=["offset"])

    small = [batch(i * 10, 10) for i in range(8)]
    out = list(coalesce_batches(iter(small), max_rows=35))
    assert [b.num_rows for b in out] == [30, 30, 20]
    assert [o for b in out for o in b.column(0).to_pylist()] == list(range(80))
    big = [batch(0, 40), batch(40, 40)]
    assert [b is a for b, a in zip(coalesce_batches(iter(big), max_rows=35), big)] == [True, True]
    assert [b.num_rows for b in coalesce_batches(iter(small), max_rows=1000, max_bytes=2 * small[0].nbytes)] == [20] * 4
    assert list(coalesce_batches(iter([]))) == []
