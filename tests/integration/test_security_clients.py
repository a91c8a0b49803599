"""Real clients over pylog's security: librdkafka, kafka-python and aiokafka over SASL_SSL, SASL_PLAINTEXT and
mTLS; wrong passwords, untrusted and expired certificates, requests before a login, re-authentication, and a
flood of failed logins beside a healthy client. One broker with every kind of listener (tests/support/secure_broker)."""
from __future__ import annotations

import asyncio
import datetime
import os
import socket
import ssl
import struct
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v3 import ApiVersionsRequest
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12 import MetadataRequest
from kio.schema.sasl_authenticate.v2 import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1 import SaslHandshakeRequest
from kio.static.primitive import i8, i32, i64

from kafka_protocol.api_keys import ApiKey
from kafka_protocol.client_codec import encode_request
from kafka_protocol.security import plain
from kafka_protocol.security.scram import ScramClient
from tests.support.secure_broker import PLAIN_USERS, REAUTH_MS, USERS, SecureBroker, start_secure_broker
from tests.support.wire import WireClient


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBroker]:
    broker = start_secure_broker(tmp_path_factory.mktemp("secure"))
    try:
        yield broker
    finally:
        broker.broker.stop()


def _topic() -> str:
    return f"sec-{uuid.uuid4().hex[:8]}"


def _produce(conf: dict, topic: str, n: int) -> list[str]:
    errors: list[str] = []
    producer = Producer({**conf, "error_cb": lambda e: errors.append(str(e)), "log_level": 0})
    for i in range(n):
        producer.produce(topic, f"{i}".encode())
    assert producer.flush(20) == 0, errors
    return errors


def _consume(conf: dict, topic: str, n: int, group: str) -> list[bytes]:
    consumer = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "log_level": 0})
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


# SCRAM-SHA-256 and SASL_PLAINTEXT logins by librdkafka: the re-authentication and flood cases below, and the
# conformance differential (tests/conformance/test_security.py)
@pytest.mark.parametrize("listener, mechanism", [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN"), ("SSL", None)])
def test_librdkafka_produces_consumes_in_a_group_and_administers_on_each_secure_listener(
        secure: SecureBroker, listener: str, mechanism: str | None) -> None:
    user = "bob" if mechanism == "PLAIN" else "alice"
    conf = secure.client_config(listener, mechanism or "", user)
    admin = AdminClient(conf)
    topic = _topic()
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)
    metadata = admin.list_topics(timeout=10)
    # Metadata answers with the address of the listener the client came in on
    assert {(b.host, b.port) for b in metadata.brokers.values()} == {("127.0.0.1", secure.ports[listener])}
    assert _produce(conf, topic, 50) == []
    got = _consume(conf, topic, 50, f"g-{topic}")
    assert sorted(int(v) for v in got) == list(range(50))
    groups = admin.list_consumer_groups().result(timeout=10).valid
    assert f"g-{topic}" in {g.group_id for g in groups}


def test_a_wrong_password_is_the_clients_authentication_error_within_seconds(secure: SecureBroker) -> None:
    for mechanism, user in (("SCRAM-SHA-512", "alice"), ("PLAIN", "bob"), ("SCRAM-SHA-256", "nobody")):
        errors: list[KafkaError] = []
        conf = secure.client_config("SASL_SSL", mechanism, user, password="wrong")
        producer = Producer({**conf, "error_cb": errors.append, "log_level": 0})
        started = time.monotonic()
        while not errors and time.monotonic() - started < 10:
            producer.poll(0.1)
        assert errors, "no error within 10 s"
        assert errors[0].code() == KafkaError._AUTHENTICATION and time.monotonic() - started < 5
        expected = ("Invalid username or password" if mechanism == "PLAIN"
                    else f"invalid credentials with SASL mechanism {mechanism}")
        assert expected in errors[0].str()


def test_untrusted_expired_or_missing_client_certificates_fail_the_handshake_at_once(secure: SecureBroker,
                                                                                      tmp_path: Path) -> None:
    from tests.support.certs import CertificateAuthority
    stranger = CertificateAuthority("someone else's CA").issue("alice").write_pem(tmp_path / "stranger.pem")
    expired = secure.issue_client("alice", expired=True).write_pem(tmp_path / "expired.pem")
    cases = {"untrusted": {"ssl.certificate.location": str(stranger), "ssl.key.location": str(stranger)},
             "expired": {"ssl.certificate.location": str(expired), "ssl.key.location": str(expired)},
             "none": {"ssl.certificate.location": None, "ssl.key.location": None}}
    for name, extra in cases.items():
        conf = {k: v for k, v in {**secure.client_config("SSL"), **extra}.items() if v is not None}
        errors: list[KafkaError] = []
        producer = Producer({**conf, "error_cb": errors.append, "log_level": 0})
        started = time.monotonic()
        while not errors and time.monotonic() - started < 10:
            producer.poll(0.1)
        assert errors and time.monotonic() - started < 5, name
        assert errors[0].code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), (name, errors[0])
    # and a client that does not trust the broker's certificate refuses it
    conf = {**secure.client_config("SASL_SSL"), "ssl.ca.location": str(stranger)}
    errors = []
    producer = Producer({**conf, "error_cb": errors.append, "log_level": 0})
    started = time.monotonic()
    while not errors and time.monotonic() - started < 10:
        producer.poll(0.1)
    assert errors and (errors[0].code() == KafkaError._SSL or "certificate verify failed" in errors[0].str()), errors


def _tls() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def test_only_api_versions_and_the_login_are_served_before_authentication(secure: SecureBroker) -> None:
    with WireClient("127.0.0.1", secure.ports["SASL_SSL"], ssl_context=_tls()) as wire:
        assert wire.request(ApiVersionsRequest(client_software_name="t", client_software_version="1")).error_code == 0
        assert wire.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False)) is None   # closed
    with WireClient("127.0.0.1", secure.ports["SASL_PLAINTEXT"]) as wire:
        handshake = wire.request(SaslHandshakeRequest(mechanism="GSSAPI"))
        assert handshake.error_code == 33 and set(handshake.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        assert wire.read_frame() is None                                  # then closed
    with WireClient("127.0.0.1", secure.ports["PLAINTEXT"]) as wire:     # no SASL on this listener
        assert wire.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == 34   # ILLEGAL_SASL_STATE


def test_garbage_and_truncated_scram_messages_are_refused_and_the_connection_closed(secure: SecureBroker) -> None:
    for tokens in ([b"\xff\x00garbage"], [b"n,,n=alice"], [ScramClient("SCRAM-SHA-512", "alice", "x").first(), b"c=biws"]):
        with WireClient("127.0.0.1", secure.ports["SASL_PLAINTEXT"]) as wire:
            assert wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512")).error_code == 0
            responses = [wire.request(SaslAuthenticateRequest(auth_bytes=t)) for t in tokens]
            assert responses[-1] is not None and responses[-1].error_code == 58, tokens      # SASL_AUTHENTICATION_FAILED
            assert wire.read_frame() is None


def test_a_scram_login_by_hand_and_the_legacy_v0_handshake_with_bare_tokens(secure: SecureBroker) -> None:
    with WireClient("127.0.0.1", secure.ports["SASL_PLAINTEXT"]) as wire:
        assert wire.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-256")).error_code == 0
        client = ScramClient("SCRAM-SHA-256", "alice", USERS["alice"])
        first = wire.request(SaslAuthenticateRequest(auth_bytes=client.first()))
        final = wire.request(SaslAuthenticateRequest(auth_bytes=client.final(first.auth_bytes)))
        assert final.error_code == 0 and final.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        client.verify(final.auth_bytes)
        assert wire.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False)).brokers
    from kio.schema.sasl_handshake.v0 import SaslHandshakeRequest as HandshakeV0
    with WireClient("127.0.0.1", secure.ports["SASL_PLAINTEXT"]) as wire:
        assert wire.request(HandshakeV0(mechanism="PLAIN")).error_code == 0
        token = plain.client_token("bob", PLAIN_USERS["bob"])
        wire.send_raw(struct.pack(">i", len(token)) + token)
        assert wire.read_frame() == b""                                    # PLAIN's empty answer, framed bare
        assert wire.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False)).brokers


def test_sessions_expire_and_librdkafka_logs_in_again_on_the_same_connection(secure: SecureBroker) -> None:
    conf = secure.client_config("SASL_PLAINTEXT", "SCRAM-SHA-512")
    topic = _topic()
    errors: list[str] = []
    producer = Producer({**conf, "error_cb": lambda e: errors.append(str(e)), "log_level": 0})
    delivered = []
    started = time.monotonic()
    while time.monotonic() - started < 2.2 * REAUTH_MS / 1000:     # more than two session lifetimes
        producer.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err))
        producer.poll(0.05)
    assert producer.flush(20) == 0
    assert delivered and all(e is None for e in delivered) and errors == []
    # a client that does not log in again is disconnected on its first request after the lifetime
    with WireClient("127.0.0.1", secure.ports["SASL_PLAINTEXT"]) as wire:
        wire.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert wire.request(SaslAuthenticateRequest(auth_bytes=plain.client_token("bob", PLAIN_USERS["bob"]))).error_code == 0
        time.sleep(REAUTH_MS / 1000 + 0.3)
        assert wire.request(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False)) is None


def test_kafka_python_and_aiokafka_log_in_with_scram_over_sasl_ssl(secure: SecureBroker) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    topic = _topic()
    ctx = ssl.create_default_context(cafile=str(secure.dir / "ca.pem"))
    common = dict(bootstrap_servers=secure.bootstrap("SASL_SSL"), security_protocol="SASL_SSL",
                  sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="alice", sasl_plain_password=USERS["alice"],
                  ssl_context=ctx)
    producer = KafkaProducer(**common)
    for i in range(10):
        producer.send(topic, f"kp{i}".encode())
    producer.flush(30)
    producer.close()

    async def aio() -> list[bytes]:
        from aiokafka import AIOKafkaConsumer
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **common)
        await consumer.start()
        try:
            got = []
            while len(got) < 10:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 30)
                got += [m.value for msgs in batch.values() for m in msgs]
            return got
        finally:
            await consumer.stop()
    assert sorted(asyncio.run(aio())) == sorted(f"kp{i}".encode() for i in range(10))


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_ten_thousand_failed_logins_leave_the_broker_responsive_for_a_healthy_client(secure: SecureBroker) -> None:
    port = secure.ports["SASL_PLAINTEXT"]
    pid = secure.broker.proc.pid
    rss_before = _rss_kib(pid)
    conf = secure.client_config("SASL_SSL", "SCRAM-SHA-512")
    topic = _topic()
    healthy = Producer({**conf, "log_level": 0})
    healthy.produce(topic, b"warm-up")
    assert healthy.flush(20) == 0

    async def one_failed_login(i: int) -> bool:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            wire = WireClient.__new__(WireClient)
            wire.client_id, wire._correlation = "flood", 0
            writer.write(wire.encode(SaslHandshakeRequest(mechanism="PLAIN")))
            await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
            request = SaslAuthenticateRequest(auth_bytes=plain.client_token("bob", f"guess{i}"))
            writer.write(wire.encode(request))
            frame = await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
            return WireClient.decode_response(request, frame).error_code == 58 and await reader.read(1) == b""
        finally:
            writer.close()

    async def flood() -> int:
        sem = asyncio.Semaphore(200)

        async def bounded(i: int) -> bool:
            async with sem:
                return await one_failed_login(i)
        return sum(await asyncio.gather(*(bounded(i) for i in range(10_000))))

    latencies: list[float] = []

    async def with_healthy_client() -> int:
        task = asyncio.create_task(flood())
        while not task.done():
            started = time.monotonic()
            healthy.produce(topic, b"during")
            await asyncio.to_thread(healthy.flush, 20)
            latencies.append(time.monotonic() - started)
            await asyncio.sleep(0.2)
        return await task
    refused = asyncio.run(with_healthy_client())
    assert refused == 10_000
    assert latencies and max(latencies) < 5.0, latencies
    assert _rss_kib(pid) - rss_before < 200 * 1024


def test_a_new_certificate_is_loaded_by_a_dynamic_config_change_and_a_bad_one_is_refused(secure: SecureBroker,
                                                                                          tmp_path: Path) -> None:
    """Kafka's certificate rotation: AlterConfigs of listener.name.<listener>.ssl.keystore.location, no restart.
    Runs last in this module: it leaves the original certificate in place again."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
    from tests.support.certs import CertificateAuthority
    new_ca = CertificateAuthority("the new CA")
    new_ca.write_pem(tmp_path / "new-ca.pem")
    new_ca.issue("localhost", hosts=("127.0.0.1", "localhost")).write_pem(tmp_path / "new-broker.pem")
    admin = AdminClient({"bootstrap.servers": secure.plaintext})
    key = "listener.name.sasl_ssl.ssl.keystore.location"

    def set_keystore(path: Path) -> None:
        resource = ConfigResource(ConfigResource.Type.BROKER, "0", incremental_configs=[
            ConfigEntry(key, str(path), incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([resource])[resource].result(timeout=20)

    def works(ca: Path) -> bool:
        """Delivered over a TLS connection trusting only `ca` (False at the first TLS error)."""
        errors: list[KafkaError] = []
        delivered: list[object] = []
        producer = Producer({**secure.client_config("SASL_SSL"), "ssl.ca.location": str(ca),
                             "error_cb": errors.append, "log_level": 0})
        producer.produce("rotation", b"x", on_delivery=lambda err, msg: delivered.append(err))
        deadline = time.monotonic() + 10
        while not errors and not delivered and time.monotonic() < deadline:
            producer.poll(0.1)
        return delivered == [None] and not errors

    assert works(secure.dir / "ca.pem") and not works(tmp_path / "new-ca.pem")
    set_keystore(tmp_path / "new-broker.pem")
    assert works(tmp_path / "new-ca.pem") and not works(secure.dir / "ca.pem")
    with pytest.raises(KafkaException, match="cannot read"):
        set_keystore(tmp_path / "missing.pem")
    assert works(tmp_path / "new-ca.pem")                     # the refused change left the new certificate
    set_keystore(secure.dir / "broker.pem")
    assert works(secure.dir / "ca.pem")


def _fetch_frame(sock: socket.socket, topic: str, slow: bool) -> bytes:
    """One Fetch of partition 0 from offset 0 (32 MB at most), the response frame read whole; `slow` reads it
    in 64 KiB sips with a pause between them, so the broker's writes wait for the client."""
    request = FetchRequest(cluster_id=None, replica_id=i32(-1), max_wait=datetime.timedelta(0), min_bytes=i32(0),
                           max_bytes=i32(32 << 20), isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
                           topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                               partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0),
                               last_fetched_epoch=i32(-1), log_start_offset=i64(-1), partition_max_bytes=i32(32 << 20)),)),),
                           forgotten_topics_data=(), rack_id="")
    sock.sendall(encode_request(ApiKey.FETCH, 12, 7, "big-fetch", request))
    head = b""
    while len(head) < 4:
        head += sock.recv(4 - len(head))
    (size,) = struct.unpack(">i", head)
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(min(64 << 10, size - len(body)))
        assert chunk, "the broker closed the connection mid-response"
        body += chunk
        if slow:
            time.sleep(0.002)
    return bytes(body)


def test_a_large_fetch_over_tls_is_the_same_bytes_as_over_plaintext_for_a_slow_reader(secure: SecureBroker) -> None:
    """A fetch response of ~24 MB goes through TLS in pieces, each written as the client takes more: a reader
    that sips it gets exactly the bytes the PLAINTEXT listener sends with sendfile."""
    topic = _topic()
    admin = AdminClient({"bootstrap.servers": secure.plaintext})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": secure.plaintext, "linger.ms": 50, "batch.size": 1 << 20,
                         "log_level": 0})
    for i in range(3000):
        producer.produce(topic, os.urandom(8000), key=str(i).encode(), partition=0)
    assert producer.flush(30) == 0
    with socket.create_connection(("127.0.0.1", secure.ports["PLAINTEXT"])) as plain_sock:
        expected = _fetch_frame(plain_sock, topic, slow=False)
    assert len(expected) > 24_000_000
    context = ssl.create_default_context(cafile=str(secure.dir / "ca.pem"))
    context.load_cert_chain(str(secure.client_cert))
    with context.wrap_socket(socket.create_connection(("127.0.0.1", secure.ports["SSL"])),
                             server_hostname="127.0.0.1") as tls_sock:
        assert _fetch_frame(tls_sock, topic, slow=True) == expected
        assert _fetch_frame(tls_sock, topic, slow=False) == expected     # the connection goes on serving


def test_a_dynamic_keystore_password_is_kept_encrypted_and_refused_without_the_encoder_secret(tmp_path: Path) -> None:
    """Kafka's rules for dynamic passwords: refused without password.encoder.secret and at the cluster-default
    level; with it, stored encrypted (never as given), decoded at the next start (the rotated PKCS12 keystore
    opens), and a broker that lost the secret stops at start naming it."""
    from cryptography.hazmat.primitives import serialization
    from kio.schema.errors import ErrorCode
    from kio.schema.incremental_alter_configs.v1.request import (AlterableConfig, AlterConfigsResource,
                                                                 IncrementalAlterConfigsRequest)
    from tests.support.broker_process import BrokerProcess, free_port
    from tests.support.certs import CertificateAuthority
    ca = CertificateAuthority()
    first = ca.issue("localhost", hosts=("127.0.0.1",)).write_pem(tmp_path / "broker.pem")
    rotated = ca.issue("rotated", hosts=("127.0.0.1",))
    rotated.write_pkcs12(tmp_path / "rotated.p12", "p12-secret")
    plain_port, ssl_port = free_port(), free_port()

    def broker(**settings: object) -> BrokerProcess:
        return BrokerProcess(tmp_path / "data", port=plain_port, settings={
            "listeners": f"PLAINTEXT://127.0.0.1:{plain_port},SSL://127.0.0.1:{ssl_port}",
            "ssl.keystore.location": first, **settings})

    def rotate(resource_name: str) -> str | None:
        """IncrementalAlterConfigs of the SSL listener's keystore; the error message, None when done."""
        request = IncrementalAlterConfigsRequest(resources=(AlterConfigsResource(
            resource_type=i8(4), resource_name=resource_name, configs=tuple(
                AlterableConfig(name=f"listener.name.ssl.{k}", config_operation=i8(0), value=v)
                for k, v in (("ssl.keystore.type", "PKCS12"), ("ssl.keystore.location", str(tmp_path / "rotated.p12")),
                             ("ssl.keystore.password", "p12-secret")))),), validate_only=False)
        with WireClient("127.0.0.1", plain_port) as wire:
            [answer] = wire.request(request).responses
        if answer.error_code == 0:
            return None
        assert answer.error_code == ErrorCode.invalid_request, answer      # Kafka's code for both refusals
        return str(answer.error_message)

    def served() -> bytes:
        return ssl.get_server_certificate(("127.0.0.1", ssl_port)).encode()

    rotated_pem = rotated.cert.public_bytes(serialization.Encoding.PEM)
    b = broker().start()
    try:
        assert "Password encoder secret not configured" in (rotate("0") or "")
    finally:
        b.stop()
    b = broker(**{"password.encoder.secret": "encoder-secret"}).start()
    try:
        assert "Password config can be defined only at broker level" in (rotate("") or "")
        assert served() != rotated_pem
        assert rotate("0") is None
        assert served() == rotated_pem
    finally:
        b.stop()
    stored = (tmp_path / "data" / "dynamic-broker-configs.json").read_text()
    assert "p12-secret" not in stored and "encryptedPassword:" in stored
    b = broker(**{"password.encoder.secret": "encoder-secret"}).start()
    try:
        assert served() == rotated_pem                  # the password was decoded to open the keystore at start
    finally:
        b.stop()
    with pytest.raises(RuntimeError, match="set password.encoder.secret to the secret they were stored with"):
        broker().start(timeout=15)
