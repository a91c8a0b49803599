"""broker/tiered/object_store.py: what a failed store call says, with and without the object it was about."""
from __future__ import annotations

from broker.tiered.object_store import store_answer

PYARROW = ("When initiating multiple part upload for key 'tiered/clicks-0-67273c7a/00000000000000000000-29ee25f0.log' "
           "in bucket 'missing': AWS Error NO_SUCH_BUCKET during CreateMultipartUpload operation: The specified "
           "bucket does not exist (Request ID: 18EBE32DA537B22E)")


def test_the_stores_answer_keeps_the_error_and_drops_the_key_and_request_id() -> None:
    assert store_answer(OSError(PYARROW)) == ("AWS Error NO_SUCH_BUCKET during CreateMultipartUpload operation: "
                                              "The specified bucket does not exist")
    assert store_answer(OSError(PYARROW.replace("18EBE32DA537B22E", "0A1B"))) == store_answer(OSError(PYARROW))


def test_an_error_that_is_not_the_stores_keeps_its_first_line() -> None:
    assert store_answer(ConnectionRefusedError("Connection refused\nmore")) == "Connection refused"
    assert store_answer(OSError()) == "OSError"
