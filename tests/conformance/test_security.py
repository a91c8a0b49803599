"""SASL logins and SCRAM credential administration on pylog and on Apache Kafka 3.9 (ZooKeeper mode).

Both brokers run the same two listeners: PLAINTEXT (the operator's: AlterUserScramCredentials and
DescribeUserScramCredentials, and SaslHandshake where no SASL is spoken) and SASL_PLAINTEXT with PLAIN
(JAAS `user_bob="bob-secret"`), SCRAM-SHA-256 and SCRAM-SHA-512 (a ScramLoginModule JAAS entry each, as
Kafka needs one per enabled mechanism). Kafka runs in ZooKeeper mode, the reference for pylog's security
(one KafkaZkBroker beside the run's ZooKeeper, in a chroot of its own): SCRAM credentials live in ZooKeeper
and reach Kafka's credential cache through a change notification, so a login right after an
AlterUserScramCredentials is retried (on both brokers alike) until it succeeds, or, after a deletion,
until it fails.

Each test is a scenario `scenario(peer, seen)` run on ONE broker over raw connections
(tests/support/sasl_peers.py), recording with `seen(label, value)` what a client observes: error code names,
error messages (Kafka's are fixed strings here, so they are compared too), SaslHandshake's mechanism
list, the shape of a SCRAM server-first message (the nonce is random: only "extends the client's nonce"
is observed; salt and iterations are the ones the test stored), whether the server-final signature
verifies, the session lifetime, and whether the broker still answers on the connection afterwards
("answered") or has closed it ("closed"). A test runs its scenario on Kafka first, checks the key
expectations on Kafka's answers (so each test states what Kafka 3.9 does), then runs it on pylog and
asserts both lists are equal; a failure names every differing label. Result lists whose order carries no
meaning (AlterUserScramCredentials' and DescribeUserScramCredentials' per-user results, a user's
credential infos) are sorted before comparing.

Request versions are those Kafka 3.9's clients send: SaslHandshake v1, SaslAuthenticate v2, ApiVersions v3,
Metadata v12, DescribeUserScramCredentials v0, AlterUserScramCredentials v0 (plus SaslHandshake v0 once).
"""
from __future__ import annotations

import base64
import time
from typing import Any, Callable, Iterator

import pytest
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.describe_user_scram_credentials.v0.request import DescribeUserScramCredentialsRequest, UserName
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeRequestV0
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.static.primitive import i8, i32

from kafka_protocol.security.scram import MECHANISM_CODES, ScramClient, ScramError, salted_password
from pylog.launch.local_zookeeper import LocalZooKeeper
from tests.support.sasl_peers import (
    CLOSED,
    NO_ANSWER,
    Conn,
    Observed,
    Peer,
    compare,
    listener_settings,
    start_peers,
)

MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
SHA256, SHA512 = 1, 2
PLAIN_USERS = {"bob": "bob-secret"}
ALICE, ALICE_PASSWORD = "alice", "alice-secret"
ALICE_ITERATIONS = {SHA256: 4096, SHA512: 8192}
NONCE = "conformanceclientnonce0123456789"
PROPAGATION = 20.0        # how long a credential change may take to reach Kafka's credential cache (ZooKeeper)


# --- the brokers ------------------------------------------------------------------------------------

def _security_settings(plaintext: int, sasl: int) -> dict[str, object]:
    return listener_settings(plaintext, sasl, MECHANISMS, PLAIN_USERS)


def _name(code: Any) -> str:
    return code.name if hasattr(code, "name") else str(code)


def _upsertion(user: str, mechanism: int, password: str, iterations: int) -> ScramCredentialUpsertion:
    """An upsertion with a fixed salt (the same on both brokers); an unknown mechanism salts with SHA-256."""
    salt = f"salt-{user}-{mechanism}-{iterations}".encode()
    salted = salted_password(MECHANISM_CODES.get(mechanism, "SCRAM-SHA-256"), password, salt, iterations)
    return ScramCredentialUpsertion(name=user, mechanism=i8(mechanism), iterations=i32(iterations), salt=salt,
                                    salted_password=salted)


def _alter(conn: Conn, upsertions: tuple[ScramCredentialUpsertion, ...] = (),
           deletions: tuple[ScramCredentialDeletion, ...] = ()) -> Any:
    """AlterUserScramCredentials' results as sorted (user, error code, message) triples (their order means nothing)."""
    resp = conn.send(AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions))
    if isinstance(resp, str):
        return resp
    return sorted((r.user, _name(r.error_code), r.error_message) for r in resp.results)


def _describe(conn: Conn, users: tuple[str, ...] | None) -> Any:
    """DescribeUserScramCredentials' answer: top-level error and message, per-user results sorted by user."""
    resp = conn.send(DescribeUserScramCredentialsRequest(
        users=None if users is None else tuple(UserName(name=u) for u in users)))
    if isinstance(resp, str):
        return resp
    results = sorted(((r.user, _name(r.error_code), r.error_message,
                       sorted((int(c.mechanism), int(c.iterations)) for c in r.credential_infos))
                      for r in resp.results), key=repr)
    return {"error": _name(resp.error_code), "message": resp.error_message, "results": results}


def _delete(user: str, mechanism: int) -> ScramCredentialDeletion:
    return ScramCredentialDeletion(name=user, mechanism=i8(mechanism))


def _handshake(conn: Conn, mechanism: str, version: int = 1, order: bool = False) -> Any:
    """SaslHandshake's error and mechanisms (as a set; with `order`, also their order: Kafka's is the iteration
    order of a Java HashMap of the names, PLAIN, SCRAM-SHA-512, SCRAM-SHA-256 here, not the configured one)."""
    request = (SaslHandshakeRequest if version == 1 else SaslHandshakeRequestV0)(mechanism=mechanism)
    resp = conn.send(request)
    if isinstance(resp, str):
        return resp
    out: dict[str, Any] = {"error": _name(resp.error_code), "mechanisms": sorted(resp.mechanisms)}
    if order:
        out["mechanisms in order"] = list(resp.mechanisms)
    return out


def _authenticate(conn: Conn, token: bytes) -> tuple[Any, Any]:
    """(what is observed of a SaslAuthenticate answer, the raw response)."""
    resp = conn.send(SaslAuthenticateRequest(auth_bytes=token))
    if isinstance(resp, str):
        return resp, resp
    return ({"error": _name(resp.error_code), "message": resp.error_message,
             "session_lifetime_ms": int(resp.session_lifetime.total_seconds() * 1000)}, resp)


def _api_versions(conn: Conn) -> str:
    resp = conn.send(ApiVersionsRequest(client_software_name="conformance", client_software_version="1"))
    return resp if isinstance(resp, str) else f"ApiVersions answered {_name(resp.error_code)}"


def _metadata(conn: Conn) -> str:
    """A Metadata for no topic: an ordinary request, served after a login (Kafka's error answer lists no broker)."""
    resp = conn.send(MetadataRequest(topics=(), allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False))
    return resp if isinstance(resp, str) else f"Metadata answered, {len(resp.brokers)} broker(s)"


def _then(conn: Conn, probe: Callable[[Conn], str]) -> list[str]:
    """What the broker does next on the connection: `probe`'s outcome and, unless it closed the connection,
    an ApiVersions' (allowed before a login, so still answered if the connection is in a sound state)."""
    out = [probe(conn)]
    if out[0] not in (CLOSED, NO_ANSWER):
        out.append(_api_versions(conn))
    return out


def _plain_token(authzid: str, user: str, password: str) -> bytes:
    return f"{authzid}\0{user}\0{password}".encode()


def _plain_login(peer: Peer, seen: Observed, label: str, token: bytes) -> None:
    with peer.connect() as conn:
        seen(f"{label}: handshake", _handshake(conn, "PLAIN"))
        observed, resp = _authenticate(conn, token)
        seen(f"{label}: authenticate", observed)
        if not isinstance(resp, str):
            seen(f"{label}: server token", bytes(resp.auth_bytes))
        ok = isinstance(observed, dict) and observed["error"] == "none"
        seen(f"{label}: afterwards", _then(conn, _metadata if ok else _api_versions))


def _server_first_shape(token: bytes) -> dict[str, Any]:
    """What a SCRAM server-first message shows beside its random nonce."""
    text = token.decode("utf-8", "replace")
    attrs = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
    nonce = attrs.get("r", "")
    return {"keys": [part.split("=", 1)[0] for part in text.split(",")],
            "nonce extends the client's": nonce.startswith(NONCE) and len(nonce) > len(NONCE),
            "salt": base64.b64decode(attrs["s"]) if "s" in attrs else None,
            "iterations": attrs.get("i")}


def _scram_login(peer: Peer, seen: Observed, label: str, mechanism: str, user: str, password: str,
                 final: Callable[[bytes, ScramClient], bytes] | None = None, first: bytes | None = None) -> None:
    """A whole SCRAM login on a new connection, each step observed; `first` replaces the client-first
    token, `final(server_first, client)` builds the client-final one."""
    client = ScramClient(mechanism, user, password, nonce=NONCE)
    with peer.connect() as conn:
        seen(f"{label}: handshake", _handshake(conn, mechanism))
        observed, resp = _authenticate(conn, client.first() if first is None else first)
        seen(f"{label}: client-first", observed)
        if isinstance(resp, str) or resp.error_code != ErrorCode.none:
            seen(f"{label}: afterwards", _then(conn, _api_versions))
            return
        server_first = bytes(resp.auth_bytes)
        seen(f"{label}: server-first", _server_first_shape(server_first))
        token = client.final(server_first) if final is None else final(server_first, client)
        observed, resp = _authenticate(conn, token)
        seen(f"{label}: client-final", observed)
        if isinstance(resp, str) or resp.error_code != ErrorCode.none:
            seen(f"{label}: afterwards", _then(conn, _api_versions))
            return
        try:
            client.verify(bytes(resp.auth_bytes))
            seen(f"{label}: server-final", "verified")
        except ScramError as e:
            seen(f"{label}: server-final", f"refused: {e}")
        seen(f"{label}: afterwards", _then(conn, _metadata))


def _scram_logs_in(peer: Peer, mechanism: str, user: str, password: str) -> bool:
    client = ScramClient(mechanism, user, password)
    with peer.connect() as conn:
        handshake = _handshake(conn, mechanism)
        if isinstance(handshake, str) or handshake["error"] != "none":
            return False
        _, resp = _authenticate(conn, client.first())
        if isinstance(resp, str) or resp.error_code != ErrorCode.none:
            return False
        _, resp = _authenticate(conn, client.final(bytes(resp.auth_bytes)))
        return not isinstance(resp, str) and resp.error_code == ErrorCode.none


def _await_login(peer: Peer, mechanism: str, user: str, password: str, works: bool) -> bool:
    """Log in repeatedly until the outcome is `works` (a credential change reaching the broker's cache) or
    PROPAGATION passes; the last outcome."""
    deadline = time.monotonic() + PROPAGATION
    while True:
        ok = _scram_logs_in(peer, mechanism, user, password)
        if ok == works or time.monotonic() > deadline:
            return ok
        time.sleep(0.1)


def _setup_users(peer: Peer) -> None:
    """alice (both SCRAM mechanisms) on `peer`, through its PLAINTEXT listener, and wait until she can log in.
    Kafka answers NOT_CONTROLLER until its controller is elected: retried."""
    deadline = time.monotonic() + 60
    while True:
        with peer.connect("PLAINTEXT") as conn:
            results = _alter(conn, upsertions=tuple(_upsertion(ALICE, m, ALICE_PASSWORD, i)
                                                    for m, i in ALICE_ITERATIONS.items()))
        if not any(code == "not_controller" for _user, code, _message in results):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{peer.name}: no controller after 60 s")
        time.sleep(0.2)
    assert [r[:2] for r in results] == [(ALICE, "none")], f"{peer.name}: creating alice gave {results}"
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        assert _await_login(peer, mechanism, ALICE, ALICE_PASSWORD, works=True), \
            f"{peer.name}: alice cannot log in with {mechanism}"


@pytest.fixture(scope="module")
def peers(tmp_path_factory: pytest.TempPathFactory, zookeeper: LocalZooKeeper) -> Iterator[dict[str, Peer]]:
    yield from start_peers(tmp_path_factory, zookeeper, "security", _security_settings, _setup_users, Peer)


FAILED_SCRAM_256 = ("Authentication failed during authentication due to invalid credentials with SASL "
                    "mechanism SCRAM-SHA-256")


# --- SaslHandshake ----------------------------------------------------------------------------------

def test_handshake(peers: dict[str, Peer]) -> None:
    def scenario(peer: Peer, seen: Observed) -> None:
        for mechanism in MECHANISMS:
            with peer.connect() as conn:
                seen(f"v1 {mechanism}", _handshake(conn, mechanism, order=True))
                seen(f"v1 {mechanism}: then", _then(conn, _api_versions))
        with peer.connect() as conn:
            seen("v0 PLAIN", _handshake(conn, "PLAIN", version=0, order=True))
        for mechanism in ("GSSAPI", "OAUTHBEARER", "plain", ""):
            with peer.connect() as conn:
                seen(f"v1 {mechanism!r}", _handshake(conn, mechanism, order=True))
                seen(f"v1 {mechanism!r}: then", _then(conn, _api_versions))
        with peer.connect() as conn:
            seen("v1 PLAIN twice: first", _handshake(conn, "PLAIN"))
            seen("v1 PLAIN twice: second", _handshake(conn, "PLAIN"))
            seen("v1 PLAIN twice: then", _then(conn, _api_versions))
        with peer.connect("PLAINTEXT") as conn:
            seen("PLAINTEXT listener: SaslHandshake PLAIN", _handshake(conn, "PLAIN"))
            seen("PLAINTEXT listener: then", _then(conn, _metadata))
            seen("PLAINTEXT listener: SaslAuthenticate", _authenticate(conn, _plain_token("", "bob", "bob-secret"))[0])
            seen("PLAINTEXT listener: then 2", _then(conn, _metadata))

    def expect(k: dict[str, Any]) -> None:
        assert k["v1 PLAIN"] == {"error": "none", "mechanisms": sorted(MECHANISMS),
                                 "mechanisms in order": ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"]}
        # after a handshake only SaslAuthenticate is accepted: another request gets its error answer, then the close
        assert k["v1 PLAIN: then"] == ["ApiVersions answered illegal_sasl_state", CLOSED]
        assert k["v1 'GSSAPI'"]["error"] == "unsupported_sasl_mechanism"
        assert k["v1 'GSSAPI'"]["mechanisms"] == sorted(MECHANISMS)
        assert k["v1 'GSSAPI': then"] == [CLOSED]
        assert k["v1 PLAIN twice: second"] == {"error": "illegal_sasl_state", "mechanisms": []}
        assert k["PLAINTEXT listener: SaslHandshake PLAIN"] == {"error": "illegal_sasl_state", "mechanisms": []}
        assert k["PLAINTEXT listener: SaslAuthenticate"] == {
            "error": "illegal_sasl_state", "message": "SaslAuthenticate request received after successful authentication",
            "session_lifetime_ms": 0}
        assert k["PLAINTEXT listener: then 2"] == ["Metadata answered, 1 broker(s)", "ApiVersions answered none"]

    compare(peers, scenario, expect)


# --- SaslAuthenticate: PLAIN ------------------------------------------------------------------------

def test_plain_logins(peers: dict[str, Peer]) -> None:
    def scenario(peer: Peer, seen: Observed) -> None:
        _plain_login(peer, seen, "right password", _plain_token("", "bob", "bob-secret"))
        _plain_login(peer, seen, "authzid = user", _plain_token("bob", "bob", "bob-secret"))
        _plain_login(peer, seen, "wrong password", _plain_token("", "bob", "not-bobs"))
        _plain_login(peer, seen, "unknown user", _plain_token("", "mallory", "bob-secret"))
        _plain_login(peer, seen, "SCRAM user", _plain_token("", ALICE, ALICE_PASSWORD))
        _plain_login(peer, seen, "authzid other than user", _plain_token("admin", "bob", "bob-secret"))
        _plain_login(peer, seen, "authzid other than user, wrong password", _plain_token("admin", "bob", "wrong"))
        _plain_login(peer, seen, "empty user", _plain_token("", "", "bob-secret"))
        _plain_login(peer, seen, "empty password", _plain_token("", "bob", ""))
        _plain_login(peer, seen, "two fields", b"bob\0bob-secret")
        _plain_login(peer, seen, "garbage", b"garbage")

    def expect(k: dict[str, Any]) -> None:
        # Kafka's generated messages default a string field to "", sent as such (not null) on success
        assert k["right password: authenticate"] == {"error": "none", "message": "", "session_lifetime_ms": 0}
        assert k["right password: afterwards"] == ["Metadata answered, 1 broker(s)", "ApiVersions answered none"]
        assert k["wrong password: authenticate"] == {
            "error": "sasl_authentication_failed", "message": "Authentication failed: Invalid username or password",
            "session_lifetime_ms": 0}
        assert k["wrong password: afterwards"] == [CLOSED]
        assert k["authzid other than user: authenticate"]["message"] == (
            "Authentication failed: Client requested an authorization id that is different from username")
        # the password is checked before the authorization id
        assert k["authzid other than user, wrong password: authenticate"]["message"] == (
            "Authentication failed: Invalid username or password")
        assert k["two fields: authenticate"]["message"] == "Invalid SASL/PLAIN response: expected 3 tokens, got 2"

    compare(peers, scenario, expect)


# --- SaslAuthenticate: SCRAM ------------------------------------------------------------------------

def _wrong_nonce(server_first: bytes, client: ScramClient) -> bytes:
    text = client.final(server_first).decode()
    nonce = dict(p.split("=", 1) for p in text.split(","))["r"]
    return text.replace(f"r={nonce}", "r=" + "x" * len(nonce)).encode()


def _no_proof(server_first: bytes, client: ScramClient) -> bytes:
    return client.final(server_first).decode().rsplit(",p=", 1)[0].encode()


def test_scram_logins(peers: dict[str, Peer]) -> None:
    def scenario(peer: Peer, seen: Observed) -> None:
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            _scram_login(peer, seen, f"{mechanism} right password", mechanism, ALICE, ALICE_PASSWORD)
        _scram_login(peer, seen, "wrong password", "SCRAM-SHA-256", ALICE, "not-alices")
        _scram_login(peer, seen, "unknown user", "SCRAM-SHA-256", "mallory", ALICE_PASSWORD)
        _scram_login(peer, seen, "PLAIN user", "SCRAM-SHA-512", "bob", "bob-secret")
        _scram_login(peer, seen, "garbage client-first", "SCRAM-SHA-256", ALICE, ALICE_PASSWORD, first=b"garbage")
        _scram_login(peer, seen, "garbage client-final", "SCRAM-SHA-256", ALICE, ALICE_PASSWORD,
                     final=lambda _sf, _c: b"garbage")
        _scram_login(peer, seen, "client-final with a wrong nonce", "SCRAM-SHA-256", ALICE, ALICE_PASSWORD,
                     final=_wrong_nonce)
        _scram_login(peer, seen, "client-final without proof", "SCRAM-SHA-256", ALICE, ALICE_PASSWORD,
                     final=_no_proof)

    def expect(k: dict[str, Any]) -> None:
        assert k["SCRAM-SHA-256 right password: server-first"] == {
            "keys": ["r", "s", "i"], "nonce extends the client's": True, "salt": b"salt-alice-1-4096",
            "iterations": "4096"}
        assert k["SCRAM-SHA-256 right password: server-final"] == "verified"
        assert k["SCRAM-SHA-256 right password: afterwards"] == ["Metadata answered, 1 broker(s)",
                                                                 "ApiVersions answered none"]
        # every SCRAM failure, whatever its cause, gets the same message
        for label in ("wrong password: client-final", "unknown user: client-first", "garbage client-first: client-first",
                      "garbage client-final: client-final", "client-final with a wrong nonce: client-final"):
            assert k[label] == {"error": "sasl_authentication_failed", "message": FAILED_SCRAM_256,
                                "session_lifetime_ms": 0}, label
        assert k["wrong password: afterwards"] == [CLOSED]

    compare(peers, scenario, expect)


def test_requests_out_of_order(peers: dict[str, Peer]) -> None:
    def scenario(peer: Peer, seen: Observed) -> None:
        with peer.connect() as conn:
            seen("SaslAuthenticate before SaslHandshake", _authenticate(conn, _plain_token("", "bob", "bob-secret"))[0])
            seen("SaslAuthenticate before SaslHandshake: then", _then(conn, _api_versions))
        with peer.connect() as conn:
            seen("Metadata before login", _then(conn, _metadata))
        with peer.connect() as conn:
            seen("ApiVersions, then Metadata before login", [_api_versions(conn)] + _then(conn, _metadata))
        with peer.connect() as conn:
            seen("Metadata between SaslHandshake and SaslAuthenticate: handshake", _handshake(conn, "PLAIN"))
            seen("Metadata between SaslHandshake and SaslAuthenticate", _then(conn, _metadata))
        with peer.connect() as conn:
            seen("after login: handshake", _handshake(conn, "PLAIN"))
            seen("after login: authenticate", _authenticate(conn, _plain_token("", "bob", "bob-secret"))[0])
            seen("after login: SaslHandshake again", _handshake(conn, "PLAIN"))
            seen("after login: SaslAuthenticate again",
                 _authenticate(conn, _plain_token("", "bob", "bob-secret"))[0])
            seen("after login: then", _then(conn, _metadata))

    def expect(k: dict[str, Any]) -> None:
        assert k["SaslAuthenticate before SaslHandshake"] == CLOSED        # no answer at all
        assert k["Metadata before login"] == [CLOSED]
        assert k["ApiVersions, then Metadata before login"] == ["ApiVersions answered none", CLOSED]
        assert k["Metadata between SaslHandshake and SaslAuthenticate"] == ["Metadata answered, 0 broker(s)", CLOSED]
        assert k["after login: SaslHandshake again"] == {"error": "illegal_sasl_state", "mechanisms": []}

    compare(peers, scenario, expect)


# --- DescribeUserScramCredentials -------------------------------------------------------------------

def test_describe(peers: dict[str, Peer]) -> None:
    def scenario(peer: Peer, seen: Observed) -> None:
        with peer.connect("PLAINTEXT") as conn:
            seen("all users (null)", _describe(conn, None))
            seen("all users (empty list)", _describe(conn, ()))
            seen("alice", _describe(conn, (ALICE,)))
            seen("unknown user", _describe(conn, ("nobody",)))
            seen("PLAIN-only user", _describe(conn, ("bob",)))
            seen("alice and an unknown user", _describe(conn, (ALICE, "nobody")))
            seen("alice twice", _describe(conn, (ALICE, ALICE)))
            seen("unknown user twice", _describe(conn, ("nobody", "nobody")))
            seen("alice twice and another user", _describe(conn, (ALICE, "nobody", ALICE)))
            seen("empty user name", _describe(conn, ("",)))

    def expect(k: dict[str, Any]) -> None:
        alice = (ALICE, "none", "", sorted(ALICE_ITERATIONS.items()))
        assert k["all users (null)"] == k["all users (empty list)"] == {"error": "none", "message": "", "results": [alice]}
        assert k["unknown user"]["results"] == [
            ("nobody", "resource_not_found", "Attempt to describe a user credential that does not exist: nobody", [])]
        # a name given twice gets one result: the duplicate error alone
        assert k["alice twice"]["results"] == [
            (ALICE, "duplicate_resource",
             "Cannot describe SCRAM credentials for the same user twice in a single request: alice", [])]
        assert k["empty user name"]["results"] == [("", "resource_not_found", "Username must not be empty", [])]

    compare(peers, scenario, expect)


# --- AlterUserScramCredentials ----------------------------------------------------------------------

def test_alter_upsert_and_delete(peers: dict[str, Peer]) -> None:
    def scenario(peer: Peer, seen: Observed) -> None:
        with peer.connect("PLAINTEXT") as conn:
            seen("upsert carol SHA-256", _alter(conn, (_upsertion("carol", SHA256, "carol-1", 4096),)))
            seen("describe carol", _describe(conn, ("carol",)))
        seen("carol logs in (SHA-256)", _await_login(peer, "SCRAM-SHA-256", "carol", "carol-1", works=True))
        seen("carol logs in (SHA-512, none stored)", _scram_logs_in(peer, "SCRAM-SHA-512", "carol", "carol-1"))
        with peer.connect("PLAINTEXT") as conn:
            seen("change carol's password, max iterations",
                 _alter(conn, (_upsertion("carol", SHA256, "carol-2", 16384),)))
            seen("describe carol again", _describe(conn, ("carol",)))
        seen("carol logs in with the new password", _await_login(peer, "SCRAM-SHA-256", "carol", "carol-2",
                                                                  works=True))
        seen("carol logs in with the old password", _scram_logs_in(peer, "SCRAM-SHA-256", "carol", "carol-1"))
        with peer.connect("PLAINTEXT") as conn:
            seen("delete carol SHA-512 (none stored)", _alter(conn, deletions=(_delete("carol", SHA512),)))
            seen("delete carol SHA-256", _alter(conn, deletions=(_delete("carol", SHA256),)))
            seen("describe carol, deleted", _describe(conn, ("carol",)))
            seen("delete carol SHA-256 again", _alter(conn, deletions=(_delete("carol", SHA256),)))
        seen("carol logs in after the deletion", _await_login(peer, "SCRAM-SHA-256", "carol", "carol-2",
                                                              works=False))

    def expect(k: dict[str, Any]) -> None:
        assert k["upsert carol SHA-256"] == [("carol", "none", "")]
        assert k["delete carol SHA-512 (none stored)"] == [
            ("carol", "resource_not_found", "Attempt to delete a user credential that does not exist")]
        assert k["carol logs in (SHA-256)"] is True
        assert k["carol logs in after the deletion"] is False

    compare(peers, scenario, expect)


def test_alter_invalid(peers: dict[str, Peer]) -> None:
    def scenario(peer: Peer, seen: Observed) -> None:
        with peer.connect("PLAINTEXT") as conn:
            alter = lambda *a, **kw: _alter(conn, *a, **kw)  # noqa: E731
            seen("too few iterations (4095)", alter((_upsertion("dave", SHA256, "pw", 4095),)))
            seen("too few iterations (1)", alter((_upsertion("dave", SHA512, "pw", 1),)))
            seen("too many iterations (16385)", alter((_upsertion("dave", SHA256, "pw", 16385),)))
            seen("unknown mechanism 0", alter((_upsertion("dave", 0, "pw", 4096),)))
            seen("unknown mechanism 3", alter((_upsertion("dave", 3, "pw", 4096),)))
            seen("unknown mechanism 3, too few iterations", alter((_upsertion("dave", 3, "pw", 1),)))
            seen("empty user name", alter((_upsertion("", SHA256, "pw", 4096),)))
            seen("empty user name, unknown mechanism", alter((_upsertion("", 3, "pw", 4096),)))
            seen("delete: empty user name", alter(deletions=(_delete("", SHA256),)))
            seen("delete: unknown mechanism", alter(deletions=(_delete("dave", 3),)))
            seen("delete: credential that does not exist (no such user)", alter(deletions=(_delete("nobody", SHA256),)))
            seen("same user and mechanism twice",
                 alter((_upsertion("frank", SHA256, "pw", 4096), _upsertion("frank", SHA256, "pw", 5000))))
            seen("same user and mechanism: upsert and delete",
                 alter((_upsertion("frank", SHA256, "pw", 4096),), (_delete("frank", SHA256),)))
            seen("same user and mechanism twice, beside a valid user",
                 alter((_upsertion("frank", SHA256, "pw", 4096), _upsertion("frank", SHA256, "pw", 4096),
                        _upsertion("grace", SHA256, "pw", 4096))))
            seen("one invalid, one valid change of one user",
                 alter((_upsertion("heidi", SHA256, "pw", 4096), _upsertion("heidi", SHA512, "pw", 1))))
            seen("describe after the invalid requests", _describe(conn, None))
            # clean up whatever a broker did create, so that later tests see the same users on both
            seen("clean up", alter(deletions=(_delete("grace", SHA256), _delete("frank", SHA256),
                                              _delete("heidi", SHA256))))

    def expect(k: dict[str, Any]) -> None:
        assert k["too few iterations (4095)"] == [("dave", "unacceptable_credential", "Too few iterations")]
        assert k["too many iterations (16385)"] == [("dave", "unacceptable_credential", "Too many iterations")]
        assert k["unknown mechanism 0"][0][1] == "unsupported_sasl_mechanism"
        assert k["empty user name"] == [("", "unacceptable_credential", "Username must not be empty")]
        assert k["same user and mechanism twice"] == [
            ("frank", "duplicate_resource", "A user credential cannot be altered twice in the same request")]
        assert k["one invalid, one valid change of one user"] == [("heidi", "unacceptable_credential", "Too few iterations")]

    compare(peers, scenario, expect)


def test_alter_both_mechanisms_of_one_user(peers: dict[str, Peer]) -> None:
    def scenario(peer: Peer, seen: Observed) -> None:
        with peer.connect("PLAINTEXT") as conn:
            seen("upsert ivan SHA-256 and SHA-512",
                 _alter(conn, (_upsertion("ivan", SHA256, "ivan-pw", 4096), _upsertion("ivan", SHA512, "ivan-pw", 5000))))
            seen("describe ivan", _describe(conn, ("ivan",)))
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            seen(f"ivan logs in ({mechanism})", _await_login(peer, mechanism, "ivan", "ivan-pw", works=True))
        with peer.connect("PLAINTEXT") as conn:
            seen("delete SHA-256, upsert SHA-512 of ivan",
                 _alter(conn, (_upsertion("ivan", SHA512, "ivan-pw2", 4096),), (_delete("ivan", SHA256),)))
            seen("describe ivan after", _describe(conn, ("ivan",)))
            seen("delete both of ivan (SHA-256 already gone)",
                 _alter(conn, deletions=(_delete("ivan", SHA256), _delete("ivan", SHA512))))
            seen("describe ivan at the end", _describe(conn, ("ivan",)))
            seen("delete SHA-512 of ivan", _alter(conn, deletions=(_delete("ivan", SHA512),)))
            seen("describe ivan, all deleted", _describe(conn, ("ivan",)))

    def expect(k: dict[str, Any]) -> None:
        # one result per user, not per credential
        assert k["upsert ivan SHA-256 and SHA-512"] == [("ivan", "none", "")]
        assert k["describe ivan"]["results"] == [("ivan", "none", "", [(SHA256, 4096), (SHA512, 5000)])]

    compare(peers, scenario, expect)
