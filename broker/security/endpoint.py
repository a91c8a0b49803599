"""What a connection needs of the listener that accepted it: TLS context, SASL settings, principals.

`build_endpoints` turns the configured listeners into endpoints and checks, before the broker binds a
port, everything that would otherwise fail at the first client: the TLS key and trust of each TLS
listener, the mechanisms of each SASL listener and PLAIN's JAAS users, the principal mapping rules.
`Endpoint.reload_tls` loads a changed keystore into the live context (a dynamic config change), so new
connections get the new certificate and open ones keep theirs.
"""
from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from typing import Callable

from broker.config import BrokerConfig
from broker.security.authenticator import Authenticator, SaslSettings
from broker.security.credentials import CredentialStore
from broker.security.listeners import Listener, sasl_mechanisms
from kafka_protocol.errors import InvalidConfigError
from kafka_protocol.security import jaas, plain, tls
from kafka_protocol.security.principal import (ANONYMOUS_USER, KafkaPrincipal, MappingRuleError,
                                               map_certificate_name, parse_rules)

log = logging.getLogger(__name__)


@dataclass
class Endpoint:
    listener: Listener
    ssl_context: ssl.SSLContext | None
    sasl: SaslSettings | None
    principal_rules: list  # type: ignore[type-arg]  # principal._Rule

    def authenticator(self, now_ms: Callable[[], float]) -> Authenticator | None:
        return Authenticator(self.sasl, now_ms) if self.sasl is not None else None

    def certificate_principal(self, der: bytes | None) -> KafkaPrincipal | None:
        """An SSL client's principal: from its certificate, ANONYMOUS without one, None when no rule maps it."""
        if der is None:
            return ANONYMOUS_USER
        name = map_certificate_name(tls.peer_distinguished_name(der), self.principal_rules)
        return KafkaPrincipal.user(name) if name is not None else None

    def reload_tls(self, cfg: BrokerConfig) -> None:
        """Load the listener's (changed) keystore and truststore into its live context. OpenSSL adds trusted CAs
        but cannot drop one: a CA removed from the truststore stays trusted until the broker restarts."""
        if self.ssl_context is None:
            return
        settings = cfg.listener_settings(self.listener.name)
        fresh = tls.server_context(settings)          # checks everything before touching the live context
        del fresh
        tls.load_keystore(self.ssl_context, settings)
        tls.load_truststore(self.ssl_context, settings)
        log.info("listener %s: TLS keystore reloaded from %s", self.listener.name,
                 settings.get("ssl.keystore.location") or "ssl.keystore.key")


def _plain_users(cfg: BrokerConfig, listener: Listener) -> dict[str, str]:
    text = cfg.for_listener(listener.name, "sasl.jaas.config", "PLAIN")
    if not text:
        raise InvalidConfigError(f"listener {listener.name} enables PLAIN but has no users: set "
                                 f"listener.name.{listener.name.lower()}.plain.sasl.jaas.config="
                                 f"'{jaas.PLAIN_MODULE} required user_alice=\"<password>\";'")
    try:
        entry = jaas.parse(text)
    except jaas.JaasError as e:
        raise InvalidConfigError(f"listener.name.{listener.name.lower()}.plain.sasl.jaas.config: {e}") from None
    return entry.plain_users()


def _plain_checker(users: dict[str, str]) -> Callable[[str, str], bool]:
    return lambda user, password: plain.passwords_match(users.get(user), password)


def build_endpoints(cfg: BrokerConfig, listeners: list[Listener], credentials: CredentialStore) -> list[Endpoint]:
    out = []
    for listener in listeners:
        settings = cfg.listener_settings(listener.name)
        try:
            context = tls.server_context(settings) if listener.tls else None
            rules = parse_rules(str(settings.get("ssl.principal.mapping.rules") or "DEFAULT"))
        except (tls.TlsConfigError, MappingRuleError) as e:
            raise InvalidConfigError(f"listener {listener.name}: {e}") from None
        sasl = None
        if listener.sasl:
            mechanisms = sasl_mechanisms(cfg, listener)
            users = _plain_users(cfg, listener) if "PLAIN" in mechanisms else {}
            sasl = SaslSettings(
                tuple(mechanisms), credentials.lookup, _plain_checker(users),
                reauth_ms=int(cfg.for_listener(listener.name, "connections.max.reauth.ms") or 0),
                failed_delay_ms=cfg["connection.failed.authentication.delay.ms"])
        out.append(Endpoint(listener, context, sasl, rules))
    return out
