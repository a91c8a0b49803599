"""The SASL mechanisms, JAAS strings, principal rules and TLS settings of kafka_protocol.security, fed bytes."""
from __future__ import annotations

import base64
import ssl
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from kafka_protocol.security import jaas, plain, tls
from kafka_protocol.security.principal import KafkaPrincipal, MappingRuleError, map_certificate_name, parse_rules
from kafka_protocol.security.scram import ScramClient, ScramCredential, ScramError, ScramServer, salted_password

# RFC 7677 section 3: user "user", password "pencil"
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
             b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc_credential() -> ScramCredential:
    return ScramCredential.from_password("SCRAM-SHA-256", "pencil", 4096, RFC_SALT)


def test_scram_server_answers_rfc_7677s_exchange_byte_for_byte() -> None:
    server = ScramServer("SCRAM-SHA-256", lambda u, m: _rfc_credential() if u == "user" else None, RFC_SERVER_NONCE)
    first = server.respond(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    assert server.respond(RFC_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.user == "user"


def test_scram_client_sends_rfc_7677s_proof_and_checks_the_server() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", RFC_CLIENT_NONCE)
    assert client.first() == f"n,,n=user,r={RFC_CLIENT_NONCE}".encode()
    assert client.final(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,"
                        b"i=4096") == RFC_FINAL
    client.verify(RFC_SERVER_FINAL)
    with pytest.raises(ScramError):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_wrong_password_or_unknown_user_fails_and_a_stored_credential_has_no_password(mechanism: str) -> None:
    cred = ScramCredential.from_password(mechanism, "right")
    assert "right" not in cred.to_kafka_string() and ScramCredential.from_kafka_string(cred.to_kafka_string()) == cred
    for user, password in (("alice", "wrong"), ("mallory", "right")):
        server = ScramServer(mechanism, lambda u, m: cred if u == "alice" else None)
        client = ScramClient(mechanism, user, password)
        with pytest.raises(ScramError):
            server.respond(client.final(server.respond(client.first())))
        assert not server.complete


def test_user_names_with_commas_and_equals_travel_as_saslnames() -> None:
    cred = ScramCredential.from_password("SCRAM-SHA-512", "pw")
    server = ScramServer("SCRAM-SHA-512", lambda u, m: cred if u == "a,b=c" else None)
    client = ScramClient("SCRAM-SHA-512", "a,b=c", "pw")
    assert b"n=a=2Cb=3Dc," in client.first()
    client.verify(server.respond(client.final(server.respond(client.first()))))
    assert server.user == "a,b=c"


def test_delegation_tokens_and_a_replayed_nonce_are_refused() -> None:
    cred = ScramCredential.from_password("SCRAM-SHA-256", "pw")
    server = ScramServer("SCRAM-SHA-256", lambda u, m: cred)
    with pytest.raises(ScramError):
        server.respond(b"n,,n=alice,r=abc,tokenauth=true")
    server = ScramServer("SCRAM-SHA-256", lambda u, m: cred)
    server.respond(b"n,,n=alice,r=abc")
    with pytest.raises(ScramError, match="nonce"):
        server.respond(b"c=biws,r=abc,p=" + base64.b64encode(b"x" * 32))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), min_size=1, max_size=3))
def test_garbage_scram_messages_only_ever_fail_as_scram_errors(tokens: list[bytes]) -> None:
    cred = ScramCredential(b"salt", b"k" * 32, b"s" * 32, 4096)
    server = ScramServer("SCRAM-SHA-256", lambda u, m: cred)
    for token in tokens:
        try:
            server.respond(token)
        except ScramError:
            return


def test_salted_password_is_pbkdf2_of_the_mechanisms_hash() -> None:
    import hashlib
    assert salted_password("SCRAM-SHA-512", "pw", b"salt", 4096) == hashlib.pbkdf2_hmac("sha512", b"pw", b"salt", 4096)


def test_plain_checks_the_password_and_refuses_a_foreign_authorization_id() -> None:
    users = {"bob": "secret"}
    check = lambda u, p: plain.passwords_match(users.get(u), p)  # noqa: E731
    assert plain.authenticate(plain.client_token("bob", "secret"), check) == "bob"
    for token in (plain.client_token("bob", "nope"), plain.client_token("eve", "secret"), b"bob\0secret",
                  b"admin\0bob\0secret", b"\0bob\0", b"\xff\0bob\0secret"):
        with pytest.raises(plain.PlainError):
            plain.authenticate(token, check)


def test_jaas_strings_are_read_as_kafka_reads_them() -> None:
    entry = jaas.parse('org.apache.kafka.common.security.plain.PlainLoginModule required\n  username="admin" '
                       'password="a\\"b;c" user_admin="x" user_bob=y;')
    assert entry.module == jaas.PLAIN_MODULE and entry.flag == "required"
    assert entry.password == 'a"b;c' and entry.plain_users() == {"admin": "x", "bob": "y"}
    assert jaas.parse(jaas.client_entry("SCRAM-SHA-512", "u", 'p"w')).password == 'p"w'
    for bad in ("Module required username=\"a\"", "Module maybe;", 'Module required username=;',
                'Module required username "a";', 'M required a="b"; N required c="d";', 'M required a="b;'):
        with pytest.raises(jaas.JaasError):
            jaas.parse(bad)


def test_principal_mapping_rules_follow_kafkas_ssl_principal_mapper() -> None:
    rules = parse_rules(r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),O=(.*?)$/$1@$2/L,DEFAULT")
    assert map_certificate_name("CN=svc,OU=ServiceUsers,O=ACME", rules) == "svc"
    assert map_certificate_name("CN=Bob,O=ACME", rules) == "bob@acme"
    assert map_certificate_name("CN=x,C=DE", rules) == "CN=x,C=DE"
    assert map_certificate_name("CN=a", parse_rules(r"RULE:^CN=b$/x/")) is None
    assert map_certificate_name("CN=Ab", parse_rules(r"RULE:^CN=(.*)$/$1/U")) == "AB"
    assert str(KafkaPrincipal.parse("User:CN=a,O=b")) == "User:CN=a,O=b"
    with pytest.raises(MappingRuleError):
        parse_rules("RULE:^CN=(.*$/$1/")


def test_tls_settings_fail_with_the_setting_and_the_fix(tmp_path: Path) -> None:
    from tests.support.certs import CertificateAuthority
    ca = CertificateAuthority()
    broker = ca.issue("localhost", hosts=("127.0.0.1",))
    with pytest.raises(tls.TlsConfigError, match="keytool -importkeystore"):
        tls.server_context({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/x/broker.jks"})
    with pytest.raises(tls.TlsConfigError, match="ssl.keystore.location"):
        tls.server_context({})
    with pytest.raises(tls.TlsConfigError, match="cannot read"):
        tls.server_context({"ssl.keystore.location": str(tmp_path / "missing.pem")})
    with pytest.raises(tls.TlsConfigError, match="password is wrong"):
        tls.server_context({"ssl.keystore.location": str(broker.write_pkcs12(tmp_path / "b.p12", "pw")),
                            "ssl.keystore.password": "nope"})
    with pytest.raises(tls.TlsConfigError, match="needs ssl.truststore"):
        tls.server_context({"ssl.keystore.location": str(broker.write_pem(tmp_path / "b.pem")),
                            "ssl.client.auth": "required"})
    with pytest.raises(tls.TlsConfigError, match="TLSv1.2 and TLSv1.3"):
        tls.server_context({"ssl.keystore.location": str(tmp_path / "b.pem"), "ssl.enabled.protocols": "SSLv3"})
    # the three forms of a keystore all load; an encrypted PEM key with ssl.key.password
    ctx = tls.server_context({"ssl.keystore.location": str(broker.write_pkcs12(tmp_path / "b.p12", "pw")),
                              "ssl.keystore.password": "pw", "ssl.enabled.protocols": "TLSv1.3"})
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    tls.server_context({"ssl.keystore.key": broker.key_pem(), "ssl.keystore.certificate.chain": broker.chain_pem()})
    tls.server_context({"ssl.keystore.location": str(broker.write_pem(tmp_path / "enc.pem", "kp")),
                        "ssl.key.password": "kp"})
    client = tls.client_context({"ssl.truststore.certificates": ca.pem()})
    assert client.check_hostname and client.verify_mode == ssl.CERT_REQUIRED
    assert not tls.client_context({"ssl.truststore.location": str(ca.write_pem(tmp_path / "ca.pem")),
                                   "ssl.endpoint.identification.algorithm": ""}).check_hostname
    assert tls.peer_distinguished_name(broker.cert.public_bytes(__import__(
        "cryptography.hazmat.primitives.serialization", fromlist=["Encoding"]).Encoding.DER)) == "CN=localhost"
