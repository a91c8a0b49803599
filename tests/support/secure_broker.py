"""A pylog broker with every kind of listener, for the security tests, and the client settings for each.

Listeners (all on loopback): PLAINTEXT (the operator's own, used to create SCRAM users), SASL_SSL
(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), SSL with client certificates required (mTLS; the principal is
the certificate's CN by `ssl.principal.mapping.rules`), and SASL_PLAINTEXT with a short session
lifetime (`connections.max.reauth.ms`) for re-authentication. `SecureBroker.users` are created through
AlterUserScramCredentials; PLAIN's users are the JAAS `user_` options. `client_config(kind, ...)` gives
librdkafka's settings for a listener; `java_properties(kind, ...)` the Java client's (--command-config).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.broker_process import BrokerProcess, free_port
from tests.support.certs import CertificateAuthority, Issued

USERS = {"alice": "alice-secret", "admin": "admin-secret"}
PLAIN_USERS = {"bob": "bob-secret", "admin": "admin-secret"}
REAUTH_MS = 2000


@dataclass
class SecureBroker:
    broker: BrokerProcess
    dir: Path
    ca: CertificateAuthority
    ports: dict[str, int] = field(default_factory=dict)
    client_cert: Path | None = None

    @property
    def plaintext(self) -> str:
        return f"127.0.0.1:{self.ports['PLAINTEXT']}"

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def client_config(self, listener: str, mechanism: str = "SCRAM-SHA-512", user: str = "alice",
                      password: str | None = None, **extra: Any) -> dict[str, Any]:
        """librdkafka's settings for `listener` (SASL_SSL, SSL, SASL_PLAINTEXT or PLAINTEXT)."""
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": listener}
        if listener in ("SASL_SSL", "SASL_PLAINTEXT"):
            known = PLAIN_USERS if mechanism == "PLAIN" else USERS
            conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                         "sasl.password": password if password is not None else known.get(user, "")})
        if listener in ("SASL_SSL", "SSL"):
            conf["ssl.ca.location"] = str(self.dir / "ca.pem")
        if listener == "SSL" and self.client_cert is not None:
            conf.update({"ssl.certificate.location": str(self.client_cert), "ssl.key.location": str(self.client_cert)})
        conf.update(extra)
        return conf

    def java_properties(self, listener: str, mechanism: str = "SCRAM-SHA-512", user: str = "alice",
                        password: str | None = None) -> dict[str, str]:
        """The Java client's settings (a --command-config file) for `listener`."""
        props = {"security.protocol": listener}
        if listener in ("SASL_SSL", "SASL_PLAINTEXT"):
            from kafka_protocol.security.jaas import client_entry
            known = PLAIN_USERS if mechanism == "PLAIN" else USERS
            props.update({"sasl.mechanism": mechanism, "sasl.jaas.config": client_entry(
                mechanism, user, password if password is not None else known.get(user, ""))})
        if listener in ("SASL_SSL", "SSL"):
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.dir / "ca.pem")})
        if listener == "SSL" and self.client_cert is not None:
            props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.client_cert)})
        return props

    def issue_client(self, name: str, **kw: Any) -> Issued:
        return self.ca.issue(name, org="pylog tests", **kw)


def start_secure_broker(workdir: Path, extra: dict[str, object] | None = None) -> SecureBroker:
    workdir.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority()
    ca.write_pem(workdir / "ca.pem")
    ca.issue("localhost", hosts=("127.0.0.1", "localhost")).write_pem(workdir / "broker.pem")
    ports = {name: free_port() for name in ("PLAINTEXT", "SASL_SSL", "SSL", "SASL_PLAINTEXT")}
    plain_jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                  + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items()) + ";")
    settings: dict[str, object] = {
        "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
        "ssl.keystore.location": workdir / "broker.pem",
        "ssl.truststore.location": workdir / "ca.pem",
        "listener.name.ssl.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/,DEFAULT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain_jaas,
        "listener.name.sasl_plaintext.connections.max.reauth.ms": REAUTH_MS,
        "group.initial.rebalance.delay.ms": 0,       # a test's group starts at once
        **(extra or {}),
    }
    broker = BrokerProcess(workdir / "data", port=ports["PLAINTEXT"], settings=settings).start()
    secure = SecureBroker(broker, workdir, ca, ports)
    client = secure.issue_client("alice")
    secure.client_cert = client.write_pem(workdir / "alice.pem")
    create_scram_users(secure.plaintext, USERS)
    return secure


def create_scram_users(bootstrap: str, users: dict[str, str], config: dict[str, Any] | None = None) -> None:
    from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
    admin = AdminClient({"bootstrap.servers": bootstrap, **(config or {})})
    upserts = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, 4096), password.encode())
               for user, password in users.items() for mech in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]
    for user, future in admin.alter_user_scram_credentials(upserts).items():
        future.result(timeout=30)
