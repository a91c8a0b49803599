"""Where kio's generated schemas cannot carry what Kafka sends, the corrected entity classes.

- DescribeTransactions v0 response: `transaction_start_time` is -1 for a transactional id with no open
  transaction, which kio's timestamp type refuses to encode or decode; here it is a plain int64 (ms).
`codec.response_schema` hands these out instead of kio's, so the broker, the tools and the tests all
use the same classes.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.describe_transactions.v0.response import DescribeTransactionsResponse, TransactionState
from kio.static.primitive import i64

from kafka_protocol.api_keys import ApiKey


def _int64_start_time(cls: type, nested: type | None = None) -> type:
    """`cls` with transaction_start_time an int64, and its transaction_states of type `nested`."""
    fields: list[Any] = []
    for f in dataclasses.fields(cls):
        kind: Any = f.type
        metadata: Any = f.metadata
        if f.name == "transaction_start_time":
            kind, metadata = i64, {"kafka_type": "int64"}
        elif f.name == "transaction_states":
            kind = tuple[nested, ...]  # type: ignore[valid-type]
        kw: dict[str, Any] = {"metadata": metadata}
        if f.default is not dataclasses.MISSING:
            kw["default"] = f.default
        fields.append((f.name, kind, dataclasses.field(**kw)))
    namespace = {k: getattr(cls, k) for k in ("__type__", "__version__", "__flexible__", "__api_key__",
                                              "__header_schema__")}
    return dataclasses.make_dataclass(cls.__name__, fields, namespace=namespace, frozen=True, slots=True,
                                      kw_only=True)


RESPONSES: dict[tuple[int, int], type] = {
    (ApiKey.DESCRIBE_TRANSACTIONS, 0): _int64_start_time(DescribeTransactionsResponse,
                                                         _int64_start_time(TransactionState)),
}
