"""Shared plumbing for the client-side CLI tools (topics, produce, consume, perf).

Owns: the common `--bootstrap-server` / `--property` / `-X` / `--command-config` flags, turning them
into confluent-kafka configs (a command config is read as Kafka's tools read theirs: Java client names,
security translated by kafka_protocol.security.client_settings), `key=value` parsing with precise errors, a fast reachability check (so an absent broker is
reported within seconds instead of librdkafka retrying forever), topic metadata look-ups, and the
translation of `KafkaError`/`KafkaException` into one-line messages.

Must never: print results (tools do that), or hide a client error; every failure becomes a `CliError`.
"""
from __future__ import annotations

import argparse
import logging
import socket
import time
from typing import Any, Iterable, Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ClusterMetadata, TopicMetadata

from kafka_protocol.properties import parse_assignments, read_properties
from kafka_protocol.security.client_settings import SECURITY_KEYS, ClientSecurity, SecuritySettingsError
from kafka_protocol.errors import InvalidConfigError
from pylog.tools.errors import CliError

DEFAULT_BOOTSTRAP = "localhost:9092"
CONNECT_TIMEOUT_S = 3.0
METADATA_TIMEOUT_S = 5.0

log = logging.getLogger(__name__)
_librdkafka_log = logging.getLogger("pylog.librdkafka")

# librdkafka error codes that mean "could not reach / talk to the broker".
_UNREACHABLE = {
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TIMED_OUT,
    KafkaError._RESOLVE,
}
_UNSUPPORTED = {KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION}


def add_connection_args(parser: argparse.ArgumentParser) -> None:
    """Add `--bootstrap-server` and repeatable `--property/-X key=value` client settings."""
    parser.add_argument(
        "--bootstrap-server", default=DEFAULT_BOOTSTRAP, metavar="HOST:PORT",
        help=f"broker(s) to connect to, comma separated (default {DEFAULT_BOOTSTRAP})",
    )
    parser.add_argument(
        "--property", "-X", dest="properties", action="append", default=[], metavar="KEY=VALUE",
        help="client setting (librdkafka name), repeatable; tools also read their own "
             "properties from here (e.g. parse.key, print.key)",
    )
    add_command_config_arg(parser)


def add_command_config_arg(parser: argparse.ArgumentParser, default: Any = None) -> None:
    parser.add_argument(
        "--command-config", default=default, metavar="FILE",
        help="client settings file, as Kafka's tools take it: security.protocol, sasl.mechanism, sasl.jaas.config, "
             "ssl.truststore.location, ssl.keystore.location, ... (Java client names)",
    )


def client_security(args: argparse.Namespace) -> ClientSecurity:
    """The security of `--command-config` (PLAINTEXT without one)."""
    path = getattr(args, "command_config", None)
    if not path:
        return ClientSecurity()
    try:
        settings = read_properties(path)
    except OSError as e:
        raise CliError(f"cannot read --command-config {path}: {e.strerror}") from None
    except InvalidConfigError as e:
        raise CliError(f"--command-config {path}: {e}") from None
    try:
        return ClientSecurity.from_settings(settings)
    except SecuritySettingsError as e:
        raise CliError(f"--command-config {path}: {e}") from None


def command_config(args: argparse.Namespace) -> dict[str, str]:
    """`--command-config` in librdkafka's names: its security settings translated, the others as given."""
    path = getattr(args, "command_config", None)
    if not path:
        return {}
    security = client_security(args)
    others = {k: v for k, v in read_properties(path).items() if k not in SECURITY_KEYS}
    try:
        return {**others, **security.librdkafka()}
    except SecuritySettingsError as e:
        raise CliError(f"--command-config {path}: {e}") from None


def parse_kv(items: Iterable[str], flag: str) -> dict[str, str]:
    """Parse `key=value` strings (values kept as typed); a malformed one raises CliError naming the flag."""
    try:
        return parse_assignments(items, flag, strip_values=False)
    except InvalidConfigError as e:
        raise CliError(str(e)) from None


def split_properties(
    props: Mapping[str, str], tool_keys: Iterable[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Split properties into (tool settings, client settings) by the tool's own key names."""
    keys = set(tool_keys)
    tool = {k: v for k, v in props.items() if k in keys}
    client = {k: v for k, v in props.items() if k not in keys}
    return tool, client


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\"}


def unescape(text: str) -> str:
    """Interpret \\n, \\t, \\r, \\0 and \\\\ as typed on a command line; leave anything else alone."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] in _ESCAPES:
            out.append(_ESCAPES[text[i + 1]])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def bool_property(value: str | None, name: str, default: bool = False) -> bool:
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise CliError(f"bad property {name}={value!r}: expected true or false")


def base_config(bootstrap: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A confluent-kafka config: bootstrap servers, librdkafka logs routed to Python logging."""
    configure_librdkafka_logging(logging.getLogger().getEffectiveLevel())
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "logger": _librdkafka_log,
        "error_cb": _error_cb,
    }
    if overrides:
        config.update(overrides)
    return config


# The last login or TLS failure librdkafka reported: a request that then times out failed because of it.
_security_failure: list[KafkaError] = []
_SECURITY = {KafkaError._AUTHENTICATION, KafkaError._SSL}


def _error_cb(err: KafkaError) -> None:
    # Transient connection errors are retried by librdkafka; the reachability check and the
    # per-operation timeouts decide when to give up, so these stay at debug level.
    _librdkafka_log.debug("client error: %s", err)
    if err.code() in _SECURITY:
        _security_failure[:] = [err]


def configure_librdkafka_logging(root_level: int) -> None:
    """Keep librdkafka's retry chatter out of the terminal unless debugging."""
    _librdkafka_log.setLevel(logging.DEBUG if root_level <= logging.DEBUG else logging.CRITICAL)


def bootstrap_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """Parse `host:port[,host:port...]` (an optional `proto://` prefix is ignored)."""
    out: list[tuple[str, int]] = []
    for part in bootstrap.split(","):
        part = part.strip()
        if "://" in part:
            part = part.split("://", 1)[1]
        host, sep, port = part.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise CliError(f"bad --bootstrap-server '{bootstrap}': expected HOST:PORT[,HOST:PORT...]")
        out.append((host.strip("[]"), int(port)))
    return out


def check_reachable(bootstrap: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Fail fast with "broker unreachable at ..." when no bootstrap address accepts TCP."""
    addresses = bootstrap_addresses(bootstrap)
    errors: list[str] = []
    deadline = time.monotonic() + timeout
    for host, port in addresses:
        remaining = max(0.2, deadline - time.monotonic())
        try:
            with socket.create_connection((host, port), timeout=remaining):
                return
        except OSError as e:
            errors.append(f"{host}:{port} ({e.strerror or e})")
    raise CliError(f"broker unreachable at {', '.join(errors)}")


def fetch_metadata(
    client: Any, bootstrap: str, topic: str | None = None, timeout: float = METADATA_TIMEOUT_S
) -> ClusterMetadata:
    """list_topics() with errors translated; `client` is an AdminClient, Producer or Consumer."""
    try:
        if topic is None:
            return client.list_topics(timeout=timeout)
        return client.list_topics(topic=topic, timeout=timeout)
    except KafkaException as e:
        if hasattr(client, "poll"):
            client.poll(0)          # serve the error callbacks: a failed login or TLS handshake says why
        raise CliError(describe_exception(e, bootstrap=bootstrap)) from None


def topic_metadata(
    client: Any, bootstrap: str, topic: str, timeout: float = METADATA_TIMEOUT_S,
    allow_auto_create: bool = False,
) -> TopicMetadata:
    """Metadata for one topic; CliError("unknown topic 'T'") when the broker does not know it.

    A Metadata request naming the topic lets a broker with auto.create.topics.enable create it
    (librdkafka allows that for producer-type handles, which includes AdminClient), so unless
    `allow_auto_create` is set the look-up lists all topics and picks this one.
    """
    deadline = time.monotonic() + timeout
    while True:
        md = fetch_metadata(client, bootstrap, topic if allow_auto_create else None, timeout)
        tm = md.topics.get(topic)
        if tm is None or (tm.error is not None and tm.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise CliError(f"unknown topic '{topic}'")
        pending = not tm.partitions or (
            tm.error is not None and tm.error.code() == KafkaError.LEADER_NOT_AVAILABLE)
        if not pending:
            break
        if time.monotonic() >= deadline:  # e.g. just auto-created and still without a leader
            raise CliError(f"topic '{topic}' has no partition leaders yet")
        time.sleep(0.2)
    if tm.error is not None:
        raise CliError(describe_error(tm.error, topic=topic, bootstrap=bootstrap))
    return tm


def admin_client(args: argparse.Namespace, client_props: Mapping[str, str] | None = None) -> AdminClient:
    """Reachability check, then an AdminClient for `args.bootstrap_server`."""
    check_reachable(args.bootstrap_server)
    props = client_props if client_props is not None else parse_kv(args.properties, "--property")
    return AdminClient(base_config(args.bootstrap_server, {**command_config(args), **props}))


def describe_error(err: KafkaError, *, topic: str | None = None, bootstrap: str | None = None,
                   operation: str | None = None) -> str:
    """One line naming the problem for a KafkaError."""
    code = err.code()
    if code in _UNREACHABLE and _security_failure:
        err, code = _security_failure[0], _security_failure[0].code()
    if code == KafkaError._AUTHENTICATION:
        return f"authentication failed: {err.str().split(': ', 1)[-1]}; check sasl.jaas.config in --command-config"
    if code == KafkaError._SSL:
        return (f"TLS failed: {err.str().split(': ', 1)[-1]}; check ssl.truststore.location (and ssl.keystore.* for "
                f"client certificates) in --command-config")
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART and topic:
        return f"unknown topic '{topic}'"
    if code == KafkaError.TOPIC_ALREADY_EXISTS and topic:
        return f"topic '{topic}' already exists"
    if code in _UNREACHABLE and bootstrap:
        return f"broker unreachable at {bootstrap} ({err.str()})"
    if code in _UNSUPPORTED:
        what = f" {operation}" if operation else ""
        return f"the broker does not support{what}: {err.str()}"
    prefix = f"{operation} failed" if operation else "request failed"
    subject = f" for topic '{topic}'" if topic else ""
    return f"{prefix}{subject}: {err.name()}: {err.str()}"


def describe_exception(exc: BaseException, **context: Any) -> str:
    """Like describe_error for anything a confluent-kafka future or call may raise."""
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return describe_error(exc.args[0], **context)
    if isinstance(exc, KafkaError):
        return describe_error(exc, **context)
    operation = context.get("operation") or "request"
    return f"{operation} failed: {exc}"


def result_or_error(future: Any, **context: Any) -> Any:
    """future.result() with any client error turned into a CliError."""
    try:
        return future.result()
    except (KafkaException, ValueError, TypeError) as e:
        raise CliError(describe_exception(e, **context)) from None
