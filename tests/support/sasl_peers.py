"""Test support: pylog and Apache Kafka 3.9 (ZooKeeper mode) side by side with SASL, compared scenario by scenario.

The differential harness of tests/conformance/test_security.py and tests/conformance/test_acls.py. Both
brokers run the same two listeners (`listener_settings`): PLAINTEXT, the operator's, and SASL_PLAINTEXT with
the enabled mechanisms (PLAIN users as JAAS `user_` entries, a ScramLoginModule entry per SCRAM mechanism, as
Kafka needs one per enabled mechanism). `start_peers` starts pylog and one KafkaZkBroker beside the run's
ZooKeeper (in a chroot of its own), sets each up with the test module's `setup`, and gives a `Peer` for each.

A test is a scenario run on ONE broker over raw connections (`Conn`, tests/support/wire.py), recording with
`seen(label, value)` (`Observed`) what a client observes; `compare` runs it on Kafka first, checks the test's
expectations on Kafka's observations, then runs it on pylog and asserts both are equal (a failure names
every differing label, tests/support/differential.py). A scenario is `scenario(peer, seen)`, or, where
`compare` is given the PLAIN users' passwords, `scenario(peer, logins, seen)` with a `Logins`: one logged-in
connection per principal.
"""
from __future__ import annotations

import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from peers.kafka import FUNCTIONAL_JVM, KafkaZkBroker
from pylog.launch.local_zookeeper import LocalZooKeeper
from pylog.launch.process import BrokerProcess, free_port
from tests.support.differential import differences
from tests.support.wire import WireClient

READ_TIMEOUT = 10.0       # a broker that neither answers nor closes within this is observed as "no answer"
CLOSED = "closed"
NO_ANSWER = "no answer"

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


# --- the brokers ------------------------------------------------------------------------------------

def listener_settings(plaintext: int, sasl: int, mechanisms: list[str],
                      plain_users: dict[str, str]) -> dict[str, object]:
    """PLAINTEXT and SASL_PLAINTEXT listeners (the inter-broker one PLAINTEXT), with `mechanisms` enabled:
    PLAIN's JAAS entry holds `plain_users` (user -> password), each SCRAM mechanism has a ScramLoginModule."""
    settings: dict[str, object] = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plaintext},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{plaintext},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "security.inter.broker.protocol": "PLAINTEXT",
        "sasl.enabled.mechanisms": ",".join(mechanisms),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            + " ".join(f'user_{u}="{p}"' for u, p in plain_users.items()) + ";",
    }
    for mechanism in mechanisms:
        if mechanism.startswith("SCRAM-"):
            settings[f"listener.name.sasl_plaintext.{mechanism.lower()}.sasl.jaas.config"] = SCRAM_JAAS
    return settings


def start_kafka(workdir: Path, zookeeper: LocalZooKeeper, name: str,
                listeners: Callable[[int, int], dict[str, object]],
                settings: dict[str, object] | None = None) -> KafkaZkBroker:
    """One KafkaZkBroker (broker.id 1 unless `settings` says otherwise) in a fresh chroot `/<name>-…` of the
    run's ZooKeeper, with `listeners(plaintext port, sasl port)`; new ports (twice at most) when one was
    taken before Kafka bound it."""
    from kazoo.client import KazooClient
    chroot = f"/{name}-{uuid.uuid4().hex[:8]}"
    zk = KazooClient(hosts=zookeeper.connect)
    zk.start()
    try:
        zk.ensure_path(chroot)
    finally:
        zk.stop()
        zk.close()
    for attempt in range(3):
        kafka = KafkaZkBroker(workdir / f"kafka-{attempt}", settings={
            "zookeeper.connect": zookeeper.connect + chroot, "broker.id": 1, **(settings or {})}, jvm=FUNCTIONAL_JVM)
        kafka.settings.update(listeners(kafka.port, free_port()))
        try:
            return kafka.start()   # type: ignore[return-value]
        except RuntimeError as e:
            if "Address already in use" not in str(e) or attempt == 2:
                raise
    raise AssertionError("unreachable")


def sasl_port(settings: dict[str, object]) -> int:
    """The SASL_PLAINTEXT listener's port (the last in `listeners`)."""
    return int(str(settings["listeners"]).rsplit(":", 1)[1])


@dataclass
class Peer:
    """One of the two brokers: its name ("kafka" or "pylog") and its two listeners' ports."""
    name: str
    plaintext: int
    sasl: int

    def connect(self, listener: str = "SASL_PLAINTEXT", login: tuple[str, str] | None = None,
                reopen: bool = False) -> "Conn":
        """A new connection to `listener` (see `Conn` for `login` and `reopen`)."""
        return Conn(self.sasl if listener == "SASL_PLAINTEXT" else self.plaintext, login, reopen)


P = TypeVar("P", bound=Peer)


def start_peers(tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper, name: str,
                listeners: Callable[[int, int], dict[str, object]], setup: Callable[[P], None],
                peer: Callable[[str, int, int], P], pylog_settings: dict[str, object] | None = None,
                kafka_settings: dict[str, object] | None = None) -> Iterator[dict[str, P]]:
    """A module fixture's body: pylog (`listeners` and `pylog_settings`) and Kafka (`start_kafka`), each made a
    `peer(name, plaintext port, sasl port)` and given to `setup`; both closed at the end."""
    workdir = tmp_path_factory.mktemp(f"{name}-conformance")
    plaintext, sasl = free_port(), free_port()
    pylog = BrokerProcess(workdir / "pylog", port=plaintext,
                          settings={**listeners(plaintext, sasl), **(pylog_settings or {})})
    kafka: KafkaZkBroker | None = None
    try:
        pylog.start()
        kafka = start_kafka(workdir, zookeeper, name, listeners, kafka_settings)
        found = {"kafka": peer("kafka", kafka.port, sasl_port(kafka.settings)),
                 "pylog": peer("pylog", plaintext, sasl)}
        for one in found.values():
            setup(one)
        yield found
    finally:
        if kafka is not None:
            kafka.close()
        pylog.close()


# --- connections ------------------------------------------------------------------------------------

class Conn:
    """One raw connection; `send` gives the decoded response, CLOSED when the broker closed the connection
    instead of answering, NO_ANSWER when it did neither within READ_TIMEOUT. With `login` (user, password) it
    logs in with SASL PLAIN when opened (asserting that it succeeds). Once closed, `send` answers CLOSED, or,
    with `reopen`, opens (and logs in) a new connection."""

    def __init__(self, port: int, login: tuple[str, str] | None = None, reopen: bool = False) -> None:
        self.port, self.login, self.reopen = port, login, reopen
        self.client: WireClient | None = None
        self._open()

    def _open(self) -> None:
        self.client = WireClient("127.0.0.1", self.port, client_id="conformance", timeout=READ_TIMEOUT)
        if self.login is None:
            return
        user, password = self.login
        handshake = self._send(SaslHandshakeRequest(mechanism="PLAIN"))
        assert not isinstance(handshake, str) and handshake.error_code == ErrorCode.none, (user, handshake)
        auth = self._send(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))
        assert not isinstance(auth, str) and auth.error_code == ErrorCode.none, (user, auth)

    def send(self, request: Any) -> Any:
        if self.client is None:
            if not self.reopen:
                return CLOSED
            self._open()
        return self._send(request)

    def _send(self, request: Any) -> Any:
        assert self.client is not None
        try:
            response = self.client.request(request)
        except socket.timeout:
            self.close()
            return NO_ANSWER
        except OSError:
            response = None
        if response is None:
            self.close()
            return CLOSED
        return response

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None

    def __enter__(self) -> "Conn":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Logins:
    """A scenario's connections: one per principal, logged in with PLAIN with its password in `passwords`
    ("anonymous" is the PLAINTEXT listener's), opened on first use, reopened (and logged in) after a close."""

    def __init__(self, peer: Peer, passwords: dict[str, str]) -> None:
        self.peer, self.passwords = peer, passwords
        self.conns: dict[str, Conn] = {}

    def __getitem__(self, user: str) -> Conn:
        conn = self.conns.get(user)
        if conn is None:
            conn = (self.peer.connect("PLAINTEXT", reopen=True) if user == "anonymous"
                    else self.peer.connect(login=(user, self.passwords[user]), reopen=True))
            self.conns[user] = conn
        return conn

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()


# --- the comparison ---------------------------------------------------------------------------------

class Observed:
    """A scenario's `seen(label, value)`: what it observed, by label (each label once)."""

    def __init__(self) -> None:
        self.items: dict[str, Any] = {}

    def __call__(self, label: str, value: Any) -> Any:
        assert label not in self.items, f"label {label!r} observed twice"
        self.items[label] = value
        return value


# scenario(peer, seen), or scenario(peer, logins, seen) where compare is given `logins`
Scenario = Callable[..., None]


def _run(peer: Peer, scenario: Scenario, passwords: dict[str, str] | None) -> dict[str, Any]:
    seen = Observed()
    logins = None if passwords is None else Logins(peer, passwords)
    try:
        if logins is None:
            scenario(peer, seen)
        else:
            scenario(peer, logins, seen)
    except Exception as e:
        if peer.name == "kafka":
            raise
        raise AssertionError(f"on pylog the scenario broke after observing {list(seen.items)[-1:]!r}: {e!r}\n"
                             f"observed so far: {seen.items!r}") from e
    finally:
        if logins is not None:
            logins.close()
    return seen.items


def compare(peers: dict[str, Any], scenario: Scenario, expect: Callable[[dict[str, Any]], None] | None = None,
            logins: dict[str, str] | None = None) -> dict[str, Any]:
    """Run `scenario` on Kafka (checking `expect` on its observations), then on pylog; assert they agree. With
    `logins` (user -> PLAIN password) the scenario is also given a `Logins` of those users, closed after it."""
    kafka = _run(peers["kafka"], scenario, logins)
    if expect is not None:
        expect(kafka)
    pylog = _run(peers["pylog"], scenario, logins)
    diff = differences(pylog, kafka)
    test = scenario.__qualname__.split(".")[0]
    assert not diff, f"{test}: pylog and Kafka differ:\n  " + "\n  ".join(diff)
    return kafka
