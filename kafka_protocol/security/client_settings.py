"""A client's security settings, read from Kafka's Java client names or librdkafka's, in one place.

The project's clients (the Spark source's native Fetch client and sink, `pylog` tools) are configured
the way Kafka users already configure theirs: Spark's `kafka.security.protocol`, `kafka.sasl.mechanism`,
`kafka.sasl.jaas.config`, `kafka.ssl.truststore.location` (PEM or PKCS12), `kafka.ssl.keystore.*`,
or a tool's `--command-config` file with the same names. librdkafka's own names
(`sasl.username`/`sasl.password`, `ssl.ca.location`, `ssl.certificate.location`, `ssl.key.location`)
are accepted too. `ClientSecurity` is the typed result: it builds the TLS context for the project's own
clients and translates to librdkafka's settings for the clients built on confluent-kafka, so a Java-style
setting never reaches librdkafka (which would refuse it). Pure apart from reading key files.
"""
from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Any, Mapping

from kafka_protocol.security import jaas, tls

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")


class SecurityProtocol:
    """`tls` and `sasl` of anything with a Kafka security `protocol` (a client's settings, a broker's listener)."""

    protocol: str

    @property
    def tls(self) -> bool:
        return self.protocol in TLS_PROTOCOLS

    @property
    def sasl(self) -> bool:
        return self.protocol in SASL_PROTOCOLS
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
# Java client names that become TLS settings of the project's clients (the broker's tls module reads them)
CLIENT_SSL_KEYS = ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
             "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location",
             "ssl.truststore.password", "ssl.truststore.certificates", "ssl.enabled.protocols", "ssl.cipher.suites",
             "ssl.endpoint.identification.algorithm")
# every setting this module consumes: not passed on to librdkafka as given
SECURITY_KEYS = frozenset(CLIENT_SSL_KEYS) | {"security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.jaas.config",
                                        "sasl.username", "sasl.password", "ssl.ca.location",
                                        "ssl.certificate.location", "ssl.key.location", "ssl.key.pem",
                                        "ssl.certificate.pem", "ssl.ca.pem",
                                        "enable.ssl.certificate.verification"}


class SecuritySettingsError(ValueError):
    """A client security setting that cannot be used: names the setting and what to set instead."""


@dataclass(frozen=True)
class ClientSecurity(SecurityProtocol):
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ssl_settings: tuple[tuple[str, str], ...] = ()      # Kafka's ssl.* names (hashable: keys client pools)

    def __repr__(self) -> str:                             # never print a password
        return f"ClientSecurity({self.protocol}, {self.mechanism}, user={self.username!r})"

    def ssl_context(self) -> ssl.SSLContext | None:
        return tls.client_context(dict(self.ssl_settings)) if self.tls else None

    def librdkafka(self) -> dict[str, str]:
        """The same settings in librdkafka's names."""
        out = {"security.protocol": self.protocol.lower()}
        if self.sasl:
            out.update({"sasl.mechanism": self.mechanism or "PLAIN", "sasl.username": self.username or "",
                        "sasl.password": self.password or ""})
        if not self.tls:
            return out
        s = dict(self.ssl_settings)
        if s.get("ssl.truststore.certificates"):
            out["ssl.ca.pem"] = s["ssl.truststore.certificates"]
        elif s.get("ssl.truststore.location"):
            if _kind(s, "ssl.truststore") != "PEM":
                raise SecuritySettingsError("ssl.truststore.location: librdkafka reads a PEM truststore only; export "
                                            "the CA certificates with `openssl pkcs12 -in store.p12 -nokeys -out "
                                            "ca.pem` and set ssl.truststore.type=PEM")
            out["ssl.ca.location"] = s["ssl.truststore.location"]
        if s.get("ssl.keystore.key"):
            out.update({"ssl.key.pem": s["ssl.keystore.key"], "ssl.certificate.pem":
                        s.get("ssl.keystore.certificate.chain", "")})
        elif s.get("ssl.keystore.location"):
            if _kind(s, "ssl.keystore") == "PKCS12":
                out.update({"ssl.keystore.location": s["ssl.keystore.location"],
                            "ssl.keystore.password": s.get("ssl.keystore.password", "")})
            else:
                out.update({"ssl.certificate.location": s["ssl.keystore.location"],
                            "ssl.key.location": s["ssl.keystore.location"]})
                if s.get("ssl.key.password"):
                    out["ssl.key.password"] = s["ssl.key.password"]
        if s.get("ssl.endpoint.identification.algorithm") is not None:
            out["ssl.endpoint.identification.algorithm"] = "https" if s["ssl.endpoint.identification.algorithm"] else "none"
        if s.get("ssl.cipher.suites"):
            out["ssl.cipher.suites"] = s["ssl.cipher.suites"].replace(",", ":")
        return out

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], prefix: str = "") -> "ClientSecurity":
        """Read the security settings among `settings` (Java or librdkafka names, after `prefix`, e.g. "kafka.")."""
        s = {k[len(prefix):]: str(v) for k, v in settings.items() if k.startswith(prefix) and v is not None}
        protocol = s.get("security.protocol", "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise SecuritySettingsError(f"{prefix}security.protocol={s['security.protocol']}: expected one of "
                                        f"{', '.join(PROTOCOLS)}")
        mechanism = username = password = None
        if protocol.startswith("SASL"):
            mechanism = (s.get("sasl.mechanism") or s.get("sasl.mechanisms") or "").strip().upper() or None
            if s.get("sasl.jaas.config"):
                try:
                    entry = jaas.parse(s["sasl.jaas.config"])
                except jaas.JaasError as e:
                    raise SecuritySettingsError(f"{prefix}{e}") from None
                if entry.module not in (jaas.PLAIN_MODULE, jaas.SCRAM_MODULE):
                    raise SecuritySettingsError(f"{prefix}sasl.jaas.config: {entry.module} is not supported; use "
                                                f"PlainLoginModule or ScramLoginModule (GSSAPI and OAUTHBEARER are not)")
                if entry.module == jaas.SCRAM_MODULE and mechanism not in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                    raise SecuritySettingsError(f"{prefix}sasl.jaas.config uses ScramLoginModule: set "
                                                f"{prefix}sasl.mechanism to SCRAM-SHA-256 or SCRAM-SHA-512")
                username, password = entry.username, entry.password
            else:
                username, password = s.get("sasl.username"), s.get("sasl.password")
            mechanism = mechanism or "PLAIN"     # Kafka's client default is GSSAPI; PLAIN when a JAAS line says so
            if mechanism not in MECHANISMS:
                raise SecuritySettingsError(f"{prefix}sasl.mechanism={mechanism}: supported are {', '.join(MECHANISMS)}")
            if not username or password is None:
                raise SecuritySettingsError(f"{protocol} needs a user and password: set {prefix}sasl.jaas.config="
                                            f"'{jaas.SCRAM_MODULE if mechanism.startswith('SCRAM') else jaas.PLAIN_MODULE}"
                                            f" required username=\"...\" password=\"...\";'")
        ssl_settings = {k: v for k, v in s.items() if k in CLIENT_SSL_KEYS}
        for librdkafka_name, kafka_name in (("ssl.ca.location", "ssl.truststore.location"),
                                            ("ssl.certificate.location", "ssl.keystore.location"),
                                            ("ssl.ca.pem", "ssl.truststore.certificates"),
                                            ("ssl.key.pem", "ssl.keystore.key"),
                                            ("ssl.certificate.pem", "ssl.keystore.certificate.chain")):
            if s.get(librdkafka_name) and kafka_name not in ssl_settings:
                ssl_settings[kafka_name] = s[librdkafka_name]
        if s.get("ssl.key.location") and s.get("ssl.key.location") != s.get("ssl.certificate.location"):
            raise SecuritySettingsError(f"{prefix}ssl.key.location: give the key and certificate in one PEM file "
                                        f"(ssl.keystore.location, Kafka's ssl.keystore.type=PEM)")
        if s.get("enable.ssl.certificate.verification", "true").lower() == "false":
            raise SecuritySettingsError(f"{prefix}enable.ssl.certificate.verification=false is not supported: give the "
                                        f"broker's CA in {prefix}ssl.truststore.location")
        if ssl_settings and protocol not in ("SSL", "SASL_SSL"):
            raise SecuritySettingsError(f"{prefix}ssl.* settings are given but {prefix}security.protocol is {protocol}: "
                                        f"set it to SSL or SASL_SSL")
        return cls(protocol, mechanism, username, password, tuple(sorted(ssl_settings.items())))


def _kind(s: Mapping[str, str], prefix: str) -> str:
    kind = s.get(f"{prefix}.type", "").upper()
    if kind:
        return kind
    return "PKCS12" if s.get(f"{prefix}.location", "").lower().endswith((".p12", ".pfx", ".pkcs12")) else "PEM"
