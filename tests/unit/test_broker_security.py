"""The broker's listener settings, one connection's login (sans-I/O) and the SCRAM credential store."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.security.authenticator import Authenticator, SaslSettings
from broker.security.credentials import FILE_NAME, CredentialStore, Deletion, Upsertion
from broker.security.inter_broker import peer_security
from broker.security.listeners import configured_listeners, exposure_problem, inter_broker_listener
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.errors import ErrorCode, InvalidConfigError
from kafka_protocol.security import plain
from kafka_protocol.security.scram import ScramClient, ScramCredential, salted_password


def test_port_and_host_make_one_plaintext_listener_and_listeners_make_several() -> None:
    [only] = configured_listeners(BrokerConfig({"port": 9999, "host.name": "127.0.0.1"}))
    assert (only.name, only.protocol, only.host, only.port) == ("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9999)
    cfg = BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093,INTERNAL://:9094",
                        "advertised.listeners": "SASL_SSL://kafka.example.com:19093",
                        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:SSL",
                        "inter.broker.listener.name": "INTERNAL", "port": 9092})
    plain_, sasl_ssl, internal = configured_listeners(cfg)
    assert (sasl_ssl.protocol, sasl_ssl.advertised_host, sasl_ssl.advertised_port) == ("SASL_SSL", "kafka.example.com", 19093)
    assert (internal.protocol, internal.host) == ("SSL", "") and inter_broker_listener(cfg, [plain_, sasl_ssl, internal]) is internal


@pytest.mark.parametrize("settings, message", [
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "port": 7000}, "--port 7000 is none of the listeners' ports"),
    ({"listeners": "CLIENT://127.0.0.1:9092"}, "add CLIENT:SASL_SSL"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092", "advertised.listeners": "SSL://x:1"}, "which listeners does not have"),
    ({"listeners": "PLAINTEXT//127.0.0.1:9092"}, "expected NAME://host:port"),
    ({"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"}, "may appear once"),
    ({"listener.security.protocol.map": "A:TLS"}, "expected NAME:PROTOCOL"),
])
def test_listener_mistakes_name_the_setting_and_the_fix(settings: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message):
        configured_listeners(BrokerConfig(settings))


_INTERNAL = {"listeners": "INTERNAL://127.0.0.1:9094", "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT",
             "inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
             "sasl.enabled.mechanisms": "SCRAM-SHA-512"}


def test_brokers_log_in_to_their_peers_with_the_inter_broker_listeners_own_user() -> None:
    cfg = BrokerConfig({**_INTERNAL, "listener.name.internal.scram-sha-512.sasl.jaas.config":
                        'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
                        'password="s3cret";'})
    peers = peer_security(cfg, inter_broker_listener(cfg, configured_listeners(cfg)))
    assert peers.listener == "INTERNAL" and peers.ssl_context is None and peers.client is not None
    assert (peers.client.mechanism, peers.client.username, peers.client.password) == ("SCRAM-SHA-512", "broker", "s3cret")
    plain_cfg = BrokerConfig({"port": 9092})
    assert peer_security(plain_cfg, configured_listeners(plain_cfg)[0]).client is None


@pytest.mark.parametrize("settings, message", [
    ({}, "give the broker's own user in listener.name.internal.scram-sha-512.sasl.jaas.config"),
    ({"sasl.mechanism.inter.broker.protocol": "PLAIN"}, "PLAIN is not enabled on the inter-broker listener INTERNAL"),
    ({"listener.name.internal.scram-sha-512.sasl.jaas.config": "ScramLoginModule required username=;"},
     "listener.name.internal.scram-sha-512.sasl.jaas.config"),
])
def test_an_inter_broker_login_that_cannot_work_is_refused_at_start(settings: dict[str, object], message: str) -> None:
    cfg = BrokerConfig({**_INTERNAL, **settings})
    with pytest.raises(InvalidConfigError, match=message):
        peer_security(cfg, inter_broker_listener(cfg, configured_listeners(cfg)))


def test_an_unauthenticated_listener_beyond_loopback_is_refused_unless_allowed() -> None:
    for settings in ({"host.name": "0.0.0.0"}, {"listeners": "SSL://10.0.0.5:9093"}):
        cfg = BrokerConfig(settings)
        problem = exposure_problem(cfg, configured_listeners(cfg))
        assert problem is not None and "allow.unauthenticated.remote.listeners=true" in problem
        cfg = BrokerConfig({**settings, "allow.unauthenticated.remote.listeners": "true"})
        assert exposure_problem(cfg, configured_listeners(cfg)) is None
    for settings in ({"listeners": "SASL_SSL://0.0.0.0:9093"}, {"listeners": "PLAINTEXT://localhost:9092"},
                     {"listeners": "SSL://0.0.0.0:9093", "listener.name.ssl.ssl.client.auth": "required"}):
        cfg = BrokerConfig(settings)
        assert exposure_problem(cfg, configured_listeners(cfg)) is None


def test_a_listeners_own_settings_win_and_passwords_are_never_described() -> None:
    from broker.config import CONFIG
    cfg = BrokerConfig({"ssl.client.auth": "requested", "listener.name.ext.ssl.client.auth": "required",
                        "listener.name.ext.scram-sha-512.sasl.jaas.config": "x required;"})
    assert cfg.for_listener("EXT", "ssl.client.auth") == "required" and cfg.for_listener("INT", "ssl.client.auth") == "requested"
    assert cfg.for_listener("EXT", "sasl.jaas.config", "SCRAM-SHA-512") == "x required;"
    assert cfg.for_listener("EXT", "sasl.jaas.config", "PLAIN") is None
    assert CONFIG["ssl.keystore.password"].sensitive and not CONFIG["ssl.keystore.location"].sensitive
    with pytest.raises(InvalidConfigError, match="lower case"):
        BrokerConfig({"listener.name.EXT.ssl.client.auth": "required"})


def _scram_settings(**kw: object) -> SaslSettings:
    cred = ScramCredential.from_password("SCRAM-SHA-512", "alice-secret")
    return SaslSettings(("PLAIN", "SCRAM-SHA-512"), lambda u, m: cred if (u, m) == ("alice", "SCRAM-SHA-512") else None,
                        lambda u, p: plain.passwords_match({"bob": "pw"}.get(u), p), **kw)  # type: ignore[arg-type]


def _login(auth: Authenticator, user: str, password: str) -> list:
    client = ScramClient("SCRAM-SHA-512", user, password)
    results = [auth.authenticate(client.first(), 1)]
    if not results[0].failed:
        results.append(auth.authenticate(client.final(results[0].token), 1))
    return results


def test_nothing_but_api_versions_is_served_before_a_login_and_everything_after() -> None:
    now = [0.0]
    auth = Authenticator(_scram_settings(), lambda: now[0])
    assert auth.may_serve(ApiKey.API_VERSIONS) and not auth.may_serve(ApiKey.METADATA)
    assert auth.handshake("GSSAPI", 1) == (ErrorCode.unsupported_sasl_mechanism, ["PLAIN", "SCRAM-SHA-512"])
    assert auth.state == "failed"
    auth = Authenticator(_scram_settings(), lambda: now[0])
    assert auth.handshake("SCRAM-SHA-512", 1)[0] == ErrorCode.none and not auth.may_serve(ApiKey.PRODUCE)
    *_, last = _login(auth, "alice", "alice-secret")
    assert not last.failed and auth.may_serve(ApiKey.PRODUCE) and str(auth.principal) == "User:alice"
    assert last.session_lifetime_ms == 0 and auth.handshake("PLAIN", 1)[0] == ErrorCode.illegal_sasl_state


def test_a_failed_login_says_why_in_kafkas_words_and_ends_the_session() -> None:
    auth = Authenticator(_scram_settings(), lambda: 0.0)
    auth.handshake("SCRAM-SHA-512", 1)
    *_, last = _login(auth, "alice", "wrong")
    assert last.error == ErrorCode.sasl_authentication_failed and auth.state == "failed"
    assert last.message == ("Authentication failed during authentication due to invalid credentials with SASL "
                            "mechanism SCRAM-SHA-512")
    auth = Authenticator(_scram_settings(), lambda: 0.0)
    auth.handshake("PLAIN", 1)
    assert auth.authenticate(plain.client_token("bob", "no"), 1).message == "Authentication failed: Invalid username or password"
    assert Authenticator(_scram_settings(), lambda: 0.0).authenticate(b"x", 1).error == ErrorCode.illegal_sasl_state


def test_a_session_lifetime_expires_and_reauthentication_keeps_the_principal() -> None:
    now = [1000.0]
    auth = Authenticator(_scram_settings(reauth_ms=5000), lambda: now[0])
    auth.handshake("SCRAM-SHA-512", 1)
    assert _login(auth, "alice", "alice-secret")[-1].session_lifetime_ms == 5000
    now[0] += 4000
    assert auth.handshake("SCRAM-SHA-512", 1)[0] == ErrorCode.none       # re-authentication (KIP-368)
    assert not _login(auth, "alice", "alice-secret")[-1].failed
    now[0] += 4000
    assert auth.may_serve(ApiKey.FETCH)                                   # the new session runs from the re-login
    now[0] += 1001
    assert not auth.may_serve(ApiKey.FETCH)
    auth.handshake("PLAIN", 1)
    result = auth.authenticate(plain.client_token("bob", "pw"), 1)
    assert result.failed and "Cannot change principals" in (result.message or "")


def test_scram_users_are_stored_as_kafkas_credential_strings_readable_by_the_owner_only(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path)
    salt = b"0123456789abcdef"
    ok = Upsertion("alice", "SCRAM-SHA-256", 4096, salt, salted_password("SCRAM-SHA-256", "pw", salt, 4096))
    outcome = store.alter([], [ok, Upsertion("weak", "SCRAM-SHA-256", 100, salt, b"x" * 32),
                               Upsertion("odd", "", 4096, salt, b"x" * 32)])
    assert outcome == {"alice": (ErrorCode.none, None),
                       "weak": (ErrorCode.unacceptable_credential, "Too few iterations"),
                       "odd": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")}
    path = tmp_path / FILE_NAME
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600 and b"pw" not in path.read_bytes()
    stored = json.loads(path.read_text())["users"]["alice"]["SCRAM-SHA-256"]
    assert stored.startswith("salt=") and stored.endswith(",iterations=4096")
    again = CredentialStore(tmp_path)
    assert again.lookup("alice", "SCRAM-SHA-256") == ScramCredential.from_password("SCRAM-SHA-256", "pw", 4096, salt)
    assert [d[:2] for d in again.describe(None)] == [("alice", ErrorCode.none)]
    assert again.describe(["bob"])[0][1] == ErrorCode.resource_not_found
    assert again.alter([Deletion("alice", "SCRAM-SHA-256"), Deletion("bob", "SCRAM-SHA-256")],
                       [])["bob"][0] == ErrorCode.resource_not_found
    assert again.lookup("alice", "SCRAM-SHA-256") is None
    carol = Upsertion("carol", "SCRAM-SHA-256", 4096, salt, b"x" * 32)
    assert again.alter([Deletion("carol", "SCRAM-SHA-256")], [carol])["carol"][0] == ErrorCode.duplicate_resource
    both = again.alter([], [carol, Upsertion("carol", "SCRAM-SHA-512", 8192, salt, b"y" * 64)])   # one per mechanism: fine
    assert both == {"carol": (ErrorCode.none, None)}
    assert [i for _, _, _, i in again.describe(["carol"])] == [[("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 8192)]]
