"""Coverage-guided, structure-aware fuzz target (atheris): every request decoder, then its API handler.

Input: a request payload (a frame without its size prefix: header, then body). A header naming an
API version pylog does not advertise is rewritten to an advertised one (chosen by its first 4 bytes),
so every input reaches a decoder. The payload is decoded as the connection does (`decode_request`:
the length guard, then kio, or the hand-written Produce codec over a memoryview); an input that
decodes is handed to its handler (`broker/apis/registry.py`) on an in-process broker
(`fuzz/inprocess_broker.py`: the real storage, groups and producer ids over a temporary directory,
no sockets), and the response is encoded as the connection would send it.

The custom mutator (`fuzz/request_model.py`) is structure-aware: it decodes the payload with kio and
changes fields by their types, moves the body to another version of the same API, or falls back to
libFuzzer's byte mutations. Seeds (`fuzz/corpus/requests`) are valid requests of every advertised API
at its lowest and highest version.

Allowed: `MalformedRequestError` from decoding; a `KafkaError` from a handler (counted: the live
broker answers it by closing the connection). A finding: any other exception from decoding, a
handler or the response encoder; a log record with a traceback (`log.exception`: "Traceback" in a
live broker's log). `PYLOG_FUZZ_HANDLERS=0` fuzzes the decoders only. Findings already reported are
listed in `KNOWN_FINDINGS` (counted, so a long run goes on); `--replay FILE...` runs payloads in order
on one fresh broker and prints each finding's traceback (how fuzz/findings/ reproduces).

Run: `python -m fuzz.fuzz_requests /tmp/fuzzwork/requests fuzz/corpus/requests -max_total_time=600`
"""
from __future__ import annotations

import atexit
import collections
import dataclasses
import os
import random
import re
import struct
import sys
import traceback

import atheris

with atheris.instrument_imports(include=["broker"]):
    from broker.apis.registry import API_TABLE, supported
    from kafka_protocol.errors import KafkaError
    from kafka_protocol.api_keys import ApiKey
    from kafka_protocol.codec import MalformedRequestError, decode_request, peek_header, request_schema
    from fuzz.inprocess_broker import InProcessBroker
    from fuzz.request_model import ADVERTISED, mutate

HANDLERS = os.environ.get("PYLOG_FUZZ_HANDLERS", "1") != "0"
RESET_EVERY = 3000          # calls before the in-process broker starts over in a fresh directory
KAFKA_ERRORS: collections.Counter[str] = collections.Counter()
KNOWN_SEEN: collections.Counter[str] = collections.Counter()
_executions = 0
_broker: InProcessBroker | None = None


class Finding(Exception):
    """Something other than an allowed error: a bug in the product."""


@dataclasses.dataclass(frozen=True)
class Known:
    """A finding already reported (its reproducer is in fuzz/findings/): recognised, so a long run
    goes on looking for new ones. Remove the entry once the product is fixed."""

    name: str
    api_key: int | None          # None: any API
    versions: range
    where: str
    pattern: str                 # a regular expression searched in "ExceptionType: message"

    def matches(self, api_key: int, version: int, where: str, text: str) -> bool:
        return (self.api_key in (None, api_key) and version in self.versions and where.startswith(self.where)
                and re.search(self.pattern, text) is not None)


KNOWN_FINDINGS: list[Known] = [
    # none open: metadata-v10-11-null-name-unknown-topic-id and deleted-consumer-offsets-topic are fixed
    # (tests/integration/test_malformed_requests.py, test_groups_offsets.py keep their reproducers)
]


def broker() -> InProcessBroker:
    global _broker
    if _broker is None:
        _broker = InProcessBroker()
        atexit.register(_broker.close)
    elif _broker.calls >= RESET_EVERY:
        _broker.reset()
        _broker.calls = 0
    return _broker


def advertised(data: bytes) -> bytes:
    """`data` with its (api_key, version) replaced by an advertised pair if it names another one."""
    if len(data) < 4:
        return data
    api_key, version = struct.unpack_from(">hh", data, 0)
    if supported(api_key, version) is not None:
        return data
    api_key, version = ADVERTISED[int.from_bytes(data[:4], "big") % len(ADVERTISED)]
    return struct.pack(">hh", api_key, version) + data[4:]


def TestOneInput(data: bytes) -> None:
    global _executions
    _executions += 1
    if _executions % 100_000 == 0:
        summary()
    payload = advertised(data)
    try:
        api_key, version, _ = peek_header(payload)
    except MalformedRequestError:
        return
    api = supported(api_key, version)
    assert api is not None
    frame: memoryview | bytes = memoryview(bytearray(payload)) if api_key == ApiKey.PRODUCE else payload
    try:
        request = decode_request(frame, request_schema(api_key, version))
    except MalformedRequestError:
        return
    if not HANDLERS:
        return
    b = broker()
    try:
        result = b.call(api, request)
    except MalformedRequestError:       # a handler refusing what Kafka cannot parse (ACL UNKNOWN elements)
        result = None
    except KafkaError as e:
        count(KAFKA_ERRORS, f"{api.name} v{version}: {type(e).__name__}", "KafkaError raised by a handler", str(e))
        result = None
    except Exception as e:
        report(api_key, version, "handler", e)
        result = None
    try:
        b.encode(request, result)
    except Exception as e:
        report(api_key, version, "response encoding", e)
    if b.logged_tracebacks:
        record = b.logged_tracebacks.pop(0)
        b.logged_tracebacks.clear()
        error = record.exc_info[1] if record.exc_info and record.exc_info[1] else RuntimeError(record.getMessage())
        report(api_key, version, f"logged traceback ({record.getMessage()})", error)


def report(api_key: int, version: int, where: str, error: BaseException) -> None:
    """Raise a Finding, unless it is a known one (fuzz/findings/README.md): counted, and the run goes on."""
    text = f"{type(error).__name__}: {error}"
    for known in KNOWN_FINDINGS:
        if known.matches(api_key, version, where, text):
            count(KNOWN_SEEN, known.name, "known finding")
            return
    raise Finding(f"{API_TABLE[api_key].name} v{version}, {where}: {text}") from error


def CustomMutator(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)

    def libfuzzer(d: bytes) -> bytes:
        d = d[:max_size]
        return atheris.Mutate(d, max(len(d), min(max_size, len(d) + 64)))

    return mutate(data, rng, max_size, byte_mutator=libfuzzer)


def count(counter: collections.Counter[str], what: str, kind: str, detail: str = "") -> None:
    """Count a tolerated event; print it the first time (libFuzzer's exit skips atexit handlers)."""
    if what not in counter:
        print(f"{kind} (first time): {what}{': ' + detail if detail else ''}", file=sys.stderr, flush=True)
    counter[what] += 1


@atexit.register
def summary() -> None:
    if KAFKA_ERRORS:
        print("KafkaError raised by handlers (the live broker closes the connection):", file=sys.stderr)
        for what, n in KAFKA_ERRORS.most_common():
            print(f"  {n:8d}  {what}", file=sys.stderr)
    for name, n in KNOWN_SEEN.most_common():
        print(f"known finding {name} (fuzz/findings/): hit {n} times", file=sys.stderr)


def replay(paths: list[str]) -> None:
    """Run the payloads in `paths`, in order, on one fresh in-process broker; print what each does."""
    KNOWN_FINDINGS.clear()
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        try:
            TestOneInput(data)
            print(f"{path}: ok")
        except Finding:
            print(f"{path}: FINDING")
            traceback.print_exc()


def main() -> None:
    if sys.argv[1:2] == ["--replay"]:
        replay(sys.argv[2:])
        return
    atheris.Setup(sys.argv, TestOneInput, custom_mutator=CustomMutator)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
