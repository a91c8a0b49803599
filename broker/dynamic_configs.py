"""Dynamic broker configs (KIP-226): settings changed at run time through the admin APIs, kept across restarts.

Two scopes, as in Kafka: this broker's own (`resource_name` = its broker id) and the cluster-wide
default (`resource_name` = ""); a broker's own setting wins over the default, which wins over
server.properties (`BrokerConfig` resolves the order and reports each level as a synonym). Only
`DYNAMIC_BROKER_KEYS` may change; the topic defaults among them apply at once to every topic
without its own override. The settings live in `dynamic-broker-configs.json` in the data
directory, written atomically, and are loaded before anything reads the config at start.

Passwords among them (a listener's `ssl.keystore.password`, ...) are stored encrypted with
`password.encoder.secret` (`security/password_encoder.py`, Kafka's format), and, as in Kafka, refused
without that secret and at the cluster-default level; a file written before that kept them as given, and
they are encrypted at its next write.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping

from broker.config import DYNAMIC_SCOPES, BrokerConfig, is_password
from broker.log.fileutil import atomic_write
from broker.security.password_encoder import PasswordEncoder, PasswordEncoderError, is_encoded
from kafka_protocol.errors import InvalidConfigError, InvalidRequestError

if TYPE_CHECKING:
    from broker.replica_manager import ReplicaManager

log = logging.getLogger(__name__)

FILE_NAME = "dynamic-broker-configs.json"


def scope_of(resource_name: str, node_id: int) -> str:
    """The scope a BROKER resource names: "" is the cluster default, the broker's id its own."""
    if resource_name == "":
        return "default"
    if resource_name == str(node_id):
        return "broker"
    raise InvalidRequestError(f"Unexpected broker id, expected {node_id} or empty string, but received {resource_name}")


def load(config: BrokerConfig, data_dir: Path) -> None:
    """Apply the dynamic settings kept in `data_dir` (none on a fresh one)."""
    path = data_dir / FILE_NAME
    if not path.exists():
        return
    kept = json.loads(path.read_text())
    for scope in DYNAMIC_SCOPES:
        settings = kept.get(scope, {})
        stored = {k: v for k, v in settings.items() if v is not None and is_password(k) and is_encoded(v)}
        if stored:
            coder = encoder(config)
            if coder is None:
                raise InvalidConfigError(f"{path} keeps encrypted passwords ({', '.join(sorted(stored))}): set "
                                         "password.encoder.secret to the secret they were stored with")
            try:
                settings = {**settings, **{k: coder.decode(v) for k, v in stored.items()}}
            except PasswordEncoderError as e:
                raise InvalidConfigError(f"{path}: {e}") from None
        config.set_dynamic(scope, settings)
    log.info("dynamic broker configs: %s", {s: config.dynamic(s) for s in DYNAMIC_SCOPES if config.dynamic(s)})


def apply(config: BrokerConfig, replicas: "ReplicaManager", data_dir: Path, scope: str,
          settings: Mapping[str, str], validate_only: bool = False,
          reload_tls: Callable[[], None] | None = None) -> None:
    """Replace `scope`'s dynamic settings, keep them on disk, and give topics the new defaults. A change of a
    TLS setting (ssl.*, or a listener's own) reloads the listeners' keys and trust with `reload_tls`; when that
    fails the old settings stay and InvalidRequestError says why."""
    passwords = sorted(k for k, v in settings.items() if v is not None and is_password(k))
    if passwords and scope == "default":
        raise InvalidRequestError(f"Password config can be defined only at broker level: {', '.join(passwords)}")
    if passwords and encoder(config) is None:
        raise InvalidRequestError(f"Password encoder secret not configured: set password.encoder.secret in the "
                                  f"broker's properties to keep {', '.join(passwords)} encrypted")
    before = config.dynamic(scope)
    config.set_dynamic(scope, settings, check_only=validate_only)
    if validate_only:
        return
    changed = {k for k in set(before) | set(settings) if before.get(k) != settings.get(k)}
    if reload_tls is not None and any(k.startswith(("ssl.", "listener.name.")) for k in changed):
        try:
            reload_tls()
        except ValueError as e:       # TlsConfigError: the new key or certificate cannot be used
            config.set_dynamic(scope, {k: v for k, v in before.items() if v is not None})
            reload_tls()
            raise InvalidRequestError(f"Invalid dynamic TLS configuration: {e}") from None
    data_dir.mkdir(parents=True, exist_ok=True)
    coder = encoder(config)
    stored = {s: {k: coder.encode(v) if coder is not None and v is not None and is_password(k) else v
                  for k, v in config.dynamic(s).items()} for s in DYNAMIC_SCOPES}
    atomic_write(data_dir / FILE_NAME, json.dumps(stored, sort_keys=True).encode())
    replicas.set_topic_defaults(config.topic_defaults())


def encoder(config: BrokerConfig) -> PasswordEncoder | None:
    """The broker's password encoder; None without password.encoder.secret."""
    secret = config["password.encoder.secret"]
    if not secret:
        return None
    try:
        return PasswordEncoder(str(secret), config["password.encoder.keyfactory.algorithm"],
                               config["password.encoder.cipher.algorithm"], config["password.encoder.key.length"],
                               config["password.encoder.iterations"], config["password.encoder.old.secret"])
    except PasswordEncoderError as e:
        raise InvalidConfigError(str(e)) from None
