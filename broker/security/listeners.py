"""Kafka's listener settings read into the broker's listeners, with the checks Kafka makes at start.

`listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093`: a name, a host (empty or 0.0.0.0:
every interface) and a port per listener; `listener.security.protocol.map` gives each name its
protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); `advertised.listeners` what Metadata tells the
clients of each listener (default: the listener itself); `inter.broker.listener.name` the one brokers
use between themselves. With `listeners` unset, `host.name` and `port` make one PLAINTEXT listener
(`--host`/`--port`); beside `listeners`, an explicit `port` must name one of their ports.

Safe default (pylog's): a listener that lets anyone in (PLAINTEXT, or SSL without client
certificates) bound beyond loopback refuses to start unless allow.unauthenticated.remote.listeners
says so. Pure: no sockets.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from broker.config import SASL_MECHANISMS, BrokerConfig
from kafka_protocol.errors import InvalidConfigError
from kafka_protocol.security.client_settings import PROTOCOLS, SecurityProtocol

_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[0-9A-Fa-f:.]+\]|[^:/\s]*):(\d+)$")


@dataclass(frozen=True)
class Listener(SecurityProtocol):
    name: str                 # upper case, as Kafka prints it
    protocol: str
    host: str                 # "" binds every interface
    port: int
    advertised_host: str = ""
    advertised_port: int = 0


    def with_port(self, port: int) -> "Listener":
        """The listener once bound (port 0 asks the OS for one); an unset advertised port follows."""
        return Listener(self.name, self.protocol, self.host, port, self.advertised_host,
                        self.advertised_port or port)


def _entries(setting: str, text: str) -> list[tuple[str, str, int]]:
    out = []
    for item in (p.strip() for p in text.split(",") if p.strip()):
        m = _LISTENER.match(item)
        if m is None:
            raise InvalidConfigError(f"{setting}: cannot read {item!r}; expected NAME://host:port "
                                     f"(PLAINTEXT://127.0.0.1:9092)")
        out.append((m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))))
    names = [n for n, _, _ in out]
    if len(set(names)) != len(names):
        raise InvalidConfigError(f"{setting}: each listener name may appear once ({text})")
    return out


def protocol_map(cfg: BrokerConfig) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (p.strip() for p in str(cfg["listener.security.protocol.map"]).split(",") if p.strip()):
        name, sep, protocol = item.partition(":")
        if not sep or protocol.strip().upper() not in PROTOCOLS:
            raise InvalidConfigError(f"listener.security.protocol.map: cannot read {item!r}; expected NAME:PROTOCOL "
                                     f"with PROTOCOL one of {', '.join(PROTOCOLS)}")
        out[name.strip().upper()] = protocol.strip().upper()
    return out


def configured_listeners(cfg: BrokerConfig) -> list[Listener]:
    """The broker's listeners, in the order given, or InvalidConfigError naming the setting to fix."""
    protocols = protocol_map(cfg)
    if not cfg["listeners"]:
        host, port = cfg["host.name"], cfg["port"]
        adv_host = cfg["advertised.host.name"] or host
        return [Listener("PLAINTEXT", "PLAINTEXT", host, port, adv_host, cfg["advertised.port"] or 0)]
    entries = _entries("listeners", cfg["listeners"])
    advertised = {n: (h, p) for n, h, p in _entries("advertised.listeners", cfg["advertised.listeners"] or "")}
    listeners = []
    for name, host, port in entries:
        if name not in protocols:
            raise InvalidConfigError(f"listeners: listener {name} has no security protocol; add {name}:SASL_SSL (or "
                                     f"another protocol) to listener.security.protocol.map")
        adv_host, adv_port = advertised.pop(name, (host, port))
        if adv_host in ("", "0.0.0.0", "::"):
            adv_host = cfg["advertised.host.name"] or ("127.0.0.1" if host in ("", "0.0.0.0", "::") else host)
        listeners.append(Listener(name, protocols[name], host, port, adv_host, adv_port))
    if advertised:
        raise InvalidConfigError(f"advertised.listeners names {', '.join(advertised)}, which listeners does not have")
    if cfg.is_explicit("port") and cfg["port"] not in (lst.port for lst in listeners):
        raise InvalidConfigError(f"--port {cfg['port']} is none of the listeners' ports "
                                 f"({', '.join(str(lst.port) for lst in listeners)}); drop it or name one of them")
    if len({lst.port for lst in listeners if lst.port}) != len([lst for lst in listeners if lst.port]):
        raise InvalidConfigError("listeners: two listeners share a port")
    return listeners


def inter_broker_listener(cfg: BrokerConfig, listeners: list[Listener]) -> Listener:
    name = cfg["inter.broker.listener.name"]
    if name:
        found = [lst for lst in listeners if lst.name == name.upper()]
        if not found:
            raise InvalidConfigError(f"inter.broker.listener.name={name} is not one of the listeners "
                                     f"({', '.join(lst.name for lst in listeners)})")
        return found[0]
    protocol = str(cfg["security.inter.broker.protocol"]).upper()
    found = [lst for lst in listeners if lst.protocol == protocol]
    if not found:
        raise InvalidConfigError(f"no listener speaks security.inter.broker.protocol={protocol}; set "
                                 f"inter.broker.listener.name to one of {', '.join(lst.name for lst in listeners)}")
    return found[0]


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def lets_anyone_in(cfg: BrokerConfig, listener: Listener) -> bool:
    """No login on this listener: PLAINTEXT, or SSL that does not require a client certificate."""
    if listener.sasl:
        return False
    return not (listener.tls and cfg.for_listener(listener.name, "ssl.client.auth") == "required")


def exposure_problem(cfg: BrokerConfig, listeners: list[Listener]) -> str | None:
    """Why the broker must not start as configured (pylog's safe default), or None."""
    if cfg["allow.unauthenticated.remote.listeners"]:
        return None
    open_ = [lst for lst in listeners if lets_anyone_in(cfg, lst) and not _loopback(lst.host)]
    if not open_:
        return None
    lst = open_[0]
    return (f"listener {lst.name}://{lst.host or '0.0.0.0'}:{lst.port} lets anyone who reaches it read, write and "
            f"delete every topic ({lst.protocol} without authentication) and is bound beyond loopback; use SASL_SSL "
            f"(docs/SECURITY.md), bind it to 127.0.0.1, or set allow.unauthenticated.remote.listeners=true")


def sasl_mechanisms(cfg: BrokerConfig, listener: Listener) -> list[str]:
    """The mechanisms a SASL listener accepts, checked: each known, PLAIN only with its JAAS users."""
    mechanisms = [m.strip().upper() for m in str(cfg.for_listener(listener.name, "sasl.enabled.mechanisms")).split(",")
                  if m.strip()]
    unknown = [m for m in mechanisms if m not in SASL_MECHANISMS]
    if unknown or not mechanisms:
        raise InvalidConfigError(f"sasl.enabled.mechanisms: pylog supports {', '.join(SASL_MECHANISMS)} "
                                 f"(not {', '.join(unknown) or 'an empty list'})")
    return mechanisms
