"""Launch `python -m pylog ...` with the produce-side record walk switched off (benchmark only).

`bench/produce_validation.py` compares the shipped broker with this one: the header checks the broker
made before issue 15 (length, magic, CRC32C, size) stay; `pylog_native.validate_batches` is not
called. Never use it for anything but that comparison: it accepts batches that break consumers.
Usage (as a wrapper): python bench/_validation_off.py <python> -m pylog broker ...
"""
from __future__ import annotations

import runpy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import broker.log.partition_log as partition_log  # noqa: E402
from kafka_protocol import record_batch  # noqa: E402


def _headers_only(buf, max_batch_bytes, **_ignored):  # type: ignore[no-untyped-def]
    return record_batch.check_headers(buf, max_batch_bytes)


partition_log.validate_batches = _headers_only
# argv as given to the wrapper: <python> -m pylog <args...>
args = sys.argv[1:]
if len(args) >= 3 and args[1] == "-m":
    sys.argv = [args[2]] + args[3:]
    runpy.run_module(args[2], run_name="__main__", alter_sys=True)
else:
    raise SystemExit("usage: _validation_off.py <python> -m pylog ...")
