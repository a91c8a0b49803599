"""Write the seed corpora kept in the repository (run from the repository root; rewrites them whole).

  fuzz/corpus/requests/   one valid request payload per advertised API at its lowest and highest version
  fuzz/corpus/framing/    config byte + 3 schedule bytes + a byte stream of framed requests (whole,
                          back to back, truncated, with invalid size prefixes)
  fuzz/corpus/validator/  option byte + valid batches of every codec and shape, and the catalogued bad ones
  native/fuzz/corpus/validate/  the same layout, for the native target (validate.rs)

Usage: `.venv/bin/python -m fuzz.make_corpus`
"""
from __future__ import annotations

import hashlib
import re
import shutil
import struct
from pathlib import Path

from broker.apis.registry import API_TABLE
from fuzz.request_model import build_payload, seed_payloads
from tests.support.bad_batches import CORRUPT, INVALID
from tests.support.batches import encode_batch

ROOT = Path(__file__).resolve().parents[1]


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _write(directory: Path, items: dict[str, bytes]) -> None:
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    for name, data in items.items():
        (directory / f"{_slug(name)}-{hashlib.sha1(data).hexdigest()[:8]}").write_bytes(data)


def good_batches() -> dict[str, bytes]:
    out = {"uncompressed": encode_batch([b"fuzz-value", b"v2"], keys=[b"k", None])}
    for codec in ("gzip", "snappy", "snappy-xerial", "lz4", "zstd"):
        out[codec] = encode_batch([b"v%d" % i for i in range(5)], keys=[b"k%d" % i for i in range(5)], codec=codec)
    out["headers"] = encode_batch([b"h"], record_headers=[(b"hk", b"hv"), (b"n", None)])
    out["null and empty values"] = encode_batch([None, b""], keys=[b"a", b"b"])
    out["zstd large value"] = encode_batch([b"x" * 3000], codec="zstd")
    out["idempotent producer"] = encode_batch([b"p0", b"p1"], producer_id=1, producer_epoch=0, base_sequence=0)
    out["two batches"] = encode_batch([b"a"]) + encode_batch([b"b"], codec="gzip")
    out["log append time"] = encode_batch([b"lat"], log_append_time=True)
    return out


def bad_batches() -> dict[str, bytes]:
    return {f"bad {name}": make() for name, make in {**CORRUPT, **INVALID}.items()}


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _cfg(max_bytes: int, buffer: int, pool: int) -> bytes:
    """fuzz_framing's first 4 bytes: indexes into its MAX_BYTES, BUFFER_BYTES, POOL_CAPACITY; a seed."""
    return bytes([max_bytes | buffer << 2 | pool << 4, 0x2A, 0x17, 0x05])


def framing_seeds() -> dict[str, bytes]:
    everything = b"".join(_frame(p) for p in seed_payloads())
    fetch, metadata, produce = build_payload(1, 12), build_payload(3, 12), build_payload(0, 9)
    tiny = _frame(b"\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")       # ApiVersions v0, null client id
    return {
        # max 65536, buffer 256: most requests arrive in their own (pool-reserved) buffer; pool 1000
        "every api back to back": _cfg(3, 2, 3) + everything,
        "every api, buffer 16, pool 100": _cfg(3, 0, 2) + everything,
        "every api, buffer 4096, unlimited pool": _cfg(3, 3, 0) + everything,
        "every api, buffer 64, pool 0": _cfg(3, 1, 1) + everything,
        "produce fetch metadata, buffer 64, pool 4096": _cfg(3, 1, 4) + _frame(produce) + _frame(fetch) + _frame(metadata),
        "truncated frame": _cfg(3, 2, 3) + _frame(produce)[:-7],
        "truncated size prefix": _cfg(3, 2, 3) + _frame(metadata) + b"\x00\x00",
        "negative size": _cfg(3, 2, 3) + _frame(metadata) + struct.pack(">i", -1) + _frame(metadata),
        "size over max 300": _cfg(1, 2, 3) + _frame(metadata) + _frame(produce),
        "size over max 64 after frames": _cfg(0, 1, 3) + tiny * 3 + struct.pack(">i", 65),
        "empty frames": _cfg(3, 2, 3) + _frame(b"") * 4 + _frame(b"\x00"),
        "header only": _cfg(3, 2, 3) + _frame(struct.pack(">hhih", 3, 12, 1, -1)),
        "unsupported version": _cfg(3, 2, 3) + _frame(struct.pack(">hhih", 3, 99, 1, -1) + b"\x00" * 10),
        "api versions v9": _cfg(3, 2, 3) + _frame(struct.pack(">hhih", 18, 9, 1, 0)),
        "huge announced, few sent": _cfg(3, 2, 3) + struct.pack(">i", 60_000) + b"\x00\x01" * 100,
        "exactly max 64, buffer 16": _cfg(0, 0, 2) + _frame(b"\x00\x12\x00\x00" + b"\x00" * 60),
    }


def requests_seeds() -> dict[str, bytes]:
    out = {}
    for payload in seed_payloads():
        api_key, version = struct.unpack_from(">hh", payload)
        out[f"{API_TABLE[api_key].name} v{version}"] = payload
    return out


def validator_seeds() -> dict[str, bytes]:
    out = {f"{name} opts0": b"\x00" + b for name, b in good_batches().items()}
    out["compacted keyless opts3"] = b"\x03" + encode_batch([b"v"], keys=[None])
    out["log append time on create time topic opts2"] = b"\x02" + encode_batch([b"v"], log_append_time=True)
    out["too large opts12"] = b"\x0c" + encode_batch([b"x" * 200])
    out.update({f"{name} opts2": b"\x02" + b for name, b in bad_batches().items()})
    return out


def native_validate_seeds() -> dict[str, bytes]:
    out = {f"{name}": b"\x00" + b for name, b in good_batches().items()}
    out["compacted keyless"] = b"\x03" + encode_batch([b"v"], keys=[None])
    out["limit 256 zstd"] = b"\x08" + encode_batch([b"x" * 300], codec="zstd")
    bad = bad_batches()
    for name in ("bad gzip payload is not gzip", "bad truncated zstd payload", "bad codec 5",
                 "bad records count above the records present", "bad varint longer than 5 bytes",
                 "bad offset delta is not the record's index", "bad null header key",
                 "bad compressed records count mismatch", "bad second batch of two is bad",
                 "bad control batch from a client"):
        out[name] = b"\x02" + bad[name]
    return out


def main() -> None:
    _write(ROOT / "fuzz/corpus/requests", requests_seeds())
    _write(ROOT / "fuzz/corpus/framing", framing_seeds())
    _write(ROOT / "fuzz/corpus/validator", validator_seeds())
    _write(ROOT / "native/fuzz/corpus/validate", native_validate_seeds())
    for d in ("fuzz/corpus/requests", "fuzz/corpus/framing", "fuzz/corpus/validator", "native/fuzz/corpus/validate"):
        files = list((ROOT / d).iterdir())
        print(f"{d}: {len(files)} files, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
