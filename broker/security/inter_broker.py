"""How this broker logs in to its peers: the inter-broker listener's security, seen from the client side.

In cluster mode a broker is also a client of the others: its replica fetchers, the controller's channel and
the transaction coordinator's marker writer connect to each peer's inter-broker listener (the address
each broker registers). As in Kafka, they use that listener's own settings: its truststore to verify the
peer, its keystore as the client certificate when the listener asks for one, and for SASL the mechanism
`sasl.mechanism.inter.broker.protocol` with the `username`/`password` of the listener's JAAS line for it
(`listener.name.internal.plain.sasl.jaas.config=... username="broker" password="..." user_broker="...";`).
`peer_security` checks all of it at start, so a missing password is one line then, not a replica that
never catches up. Pure apart from reading key files.
"""
from __future__ import annotations

import ssl
import time
from dataclasses import dataclass

from broker.cluster.zk_layout import BrokerRegistration
from broker.config import BrokerConfig
from broker.security.listeners import Listener, sasl_mechanisms
from kafka_protocol.errors import InvalidConfigError
from kafka_protocol.security import jaas, tls
from kafka_protocol.security.client_settings import CLIENT_SSL_KEYS, ClientSecurity, SecuritySettingsError


@dataclass(frozen=True)
class PeerSecurity:
    """What a connection to a peer needs: the listener to reach (every broker registers it under the same
    name, `inter.broker.listener.name`), the client settings (None: PLAINTEXT) and the TLS context built once."""
    listener: str
    client: ClientSecurity | None = None
    ssl_context: ssl.SSLContext | None = None

    def address(self, registration: BrokerRegistration) -> tuple[str, int]:
        """Where a peer takes this broker's connections: its endpoint on the inter-broker listener."""
        return registration.address(self.listener)

    @staticmethod
    def renew_at(lifetime_ms: int) -> float | None:
        """When (time.monotonic) to replace a connection whose session the peer limits to `lifetime_ms` (KIP-368):
        at 85 % of it, as Kafka's clients re-authenticate at 85-95 %; None when unlimited."""
        return time.monotonic() + 0.85 * lifetime_ms / 1000.0 if lifetime_ms > 0 else None


def peer_address(security: PeerSecurity | None, registration: BrokerRegistration) -> tuple[str, int]:
    """Where this broker connects to a peer: its inter-broker endpoint, or its registered host and port when the
    peers talk PLAINTEXT without a named listener (`security` None)."""
    return security.address(registration) if security is not None else (registration.host, registration.port)


def peer_security(cfg: BrokerConfig, listener: Listener) -> PeerSecurity:
    """The security of connections to the peers' `listener` (the inter-broker one)."""
    if listener.protocol == "PLAINTEXT":
        return PeerSecurity(listener.name)
    where = f"listener.name.{listener.name.lower()}"
    settings: dict[str, object] = {"security.protocol": listener.protocol}
    for key in CLIENT_SSL_KEYS if listener.tls else ():
        value = cfg.for_listener(listener.name, key)
        if value is not None:
            settings[key] = value
    if listener.sasl:
        mechanism = str(cfg["sasl.mechanism.inter.broker.protocol"]).upper()
        if mechanism not in sasl_mechanisms(cfg, listener):
            raise InvalidConfigError(f"sasl.mechanism.inter.broker.protocol={mechanism} is not enabled on the "
                                     f"inter-broker listener {listener.name}: add it to "
                                     f"{where}.sasl.enabled.mechanisms")
        line = cfg.for_listener(listener.name, "sasl.jaas.config", mechanism)
        try:
            entry = jaas.parse(str(line)) if line else None
        except jaas.JaasError as e:
            raise InvalidConfigError(f"{where}.{mechanism.lower()}.sasl.jaas.config: {e}") from None
        if entry is None or not entry.username or entry.password is None:
            raise InvalidConfigError(
                f"brokers log in to each other over {listener.name} with {mechanism}: give the broker's own user in "
                f"{where}.{mechanism.lower()}.sasl.jaas.config (username=\"broker\" password=\"...\", beside the "
                f"user_ entries)")
        settings.update({"sasl.mechanism": mechanism, "sasl.username": entry.username,
                         "sasl.password": entry.password})
    try:
        client = ClientSecurity.from_settings(settings)
        context = client.ssl_context()
    except (SecuritySettingsError, tls.TlsConfigError) as e:
        raise InvalidConfigError(f"inter-broker listener {listener.name}: {e}") from None
    return PeerSecurity(listener.name, client, context)
