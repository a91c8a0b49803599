"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and brokers.

AlterConfigs (the older API) replaces a resource's whole set of overrides with the given one, as
Kafka does; IncrementalAlterConfigs applies SET/DELETE/APPEND/SUBTRACT to them. A BROKER resource
named "" is the cluster-wide dynamic default, one named by this broker's id its own dynamic
settings (broker/dynamic_configs.py); describing it reports every setting with its source and, if
asked, its synonyms, as Kafka does.
"""
from __future__ import annotations

from typing import Any

from kafka_protocol.api_keys import ApiKey
from broker import dynamic_configs
from broker.apis.common import error_result, field
from broker.config import (
    CONFIG,
    BROKER_SETTINGS,
    DYNAMIC_BROKER_KEYS,
    SOURCE_DEFAULT,
    TOPIC_KEYS,
    TOPIC_TO_BROKER_KEY,
    TopicConfig,
    render_setting,
)
from broker.context import BrokerContext
from kafka_protocol.errors import (ClusterAuthorizationError, ErrorCode, InvalidConfigError, InvalidRequestError,
                                   TopicAuthorizationError)
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema

TOPIC, BROKER = 2, 4
SOURCE_DYNAMIC_TOPIC = 1     # Kafka ConfigSource TOPIC_CONFIG (the broker levels: broker.config)
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 5, 6, 7
_LIST_KEYS = {"cleanup.policy"}


def _config_type(value: Any, key: str) -> int:
    if key in _LIST_KEYS:
        return TYPE_LIST
    if isinstance(value, bool):
        return TYPE_BOOLEAN
    if isinstance(value, int):
        return TYPE_LONG
    if isinstance(value, float):
        return TYPE_DOUBLE
    return TYPE_STRING


def _topic_configs(ctx: BrokerContext, name: str, keys: Any, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
    info = ctx.replicas.registry.require(name)
    config = ctx.replicas.registry.config_of(name)
    out = []
    for key in sorted(TOPIC_KEYS):
        if keys is not None and key not in keys:
            continue
        value = config.value_of(key)
        overridden = key in info.overrides
        broker_key = TOPIC_TO_BROKER_KEY.get(key)    # None: a topic-only config (no broker synonyms)
        levels = ctx.config.sources(broker_key) if broker_key else []   # dynamic, static, default
        entry: dict[str, Any] = {
            "name": key, "value": render_setting(value), "read_only": False, "is_sensitive": False,
            "config_source": SOURCE_DYNAMIC_TOPIC if overridden else (levels[0][2] if levels else SOURCE_DEFAULT),
            "is_default": not overridden, "config_type": _config_type(value, key),
            "documentation": BROKER_SETTINGS[broker_key][2] if docs and broker_key else None, "synonyms": [],
        }
        if synonyms:
            if overridden:
                entry["synonyms"].append({"name": key, "value": info.overrides[key], "source": SOURCE_DYNAMIC_TOPIC})
            entry["synonyms"] += [{"name": n, "value": render_setting(v), "source": s} for n, v, s in levels]
        out.append(entry)
    return out


def _broker_configs(ctx: BrokerContext, name: str, keys: Any, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
    """Every setting of this broker (name = its id) with its source, or the dynamic defaults (name "")."""
    scope = dynamic_configs.scope_of(name, ctx.node_id)
    cfg = ctx.config
    wanted = sorted(cfg.dynamic("default")) if scope == "default" else sorted(BROKER_SETTINGS)
    out: list[dict[str, Any]] = []
    for key in wanted:
        if keys is not None and key not in keys:
            continue
        levels = cfg.sources(key)
        if scope == "default":
            levels = [lv for lv in levels if lv[2] == 3]     # DYNAMIC_DEFAULT_BROKER_CONFIG only
        value, source = (render_setting(levels[0][1]), levels[0][2]) if levels else (None, SOURCE_DEFAULT)
        sensitive = CONFIG[key].sensitive
        if sensitive:          # a password is never sent back, as Kafka reports it: null, is_sensitive
            value, levels = None, [(n, None, s) for n, _, s in levels]
        out.append({"name": key, "value": value, "read_only": key not in DYNAMIC_BROKER_KEYS, "is_sensitive": sensitive,
                    "config_source": source, "is_default": source == SOURCE_DEFAULT,
                    "config_type": _config_type(BROKER_SETTINGS[key][0], key),
                    "documentation": BROKER_SETTINGS[key][2] if docs else None,
                    "synonyms": [{"name": n, "value": render_setting(v), "source": s} for n, v, s in levels]
                    if synonyms else []})
    return out


def _alter_broker(ctx: BrokerContext, name: str, settings: dict[str, str], validate_only: bool) -> None:
    scope = dynamic_configs.scope_of(name, ctx.node_id)
    dynamic_configs.apply(ctx.config, ctx.replicas, ctx.config.data_dir, scope, settings, validate_only,
                          reload_tls=ctx.reload_tls)


def _broker_operations(current: dict[str, str | None], ops: Any) -> dict[str, str]:
    """A scope's dynamic settings after IncrementalAlterConfigs operations (SET and DELETE)."""
    new = {k: v for k, v in current.items() if v is not None}
    for op in ops:
        if op.config_operation == SET:
            if op.value is None:
                raise InvalidRequestError(f"Null value not supported for broker config '{op.name}'")
            new[op.name] = op.value
        elif op.config_operation == DELETE:
            new.pop(op.name, None)
        else:
            raise InvalidRequestError(f"Config operation {op.config_operation} is not supported for broker config "
                                      f"'{op.name}'")
    return new


def _refusal(e: BaseException) -> tuple[ErrorCode, str | None]:
    """An entry's error: an authorization failure with Kafka's null message, anything else as error_result."""
    if isinstance(e, (ClusterAuthorizationError, TopicAuthorizationError)):
        return e.code, None
    return error_result(e)


def _check_access(ctx: BrokerContext, operation: AclOperation, resource_type: int, name: str) -> None:
    """With ACLs: the operation on the topic, or on the cluster for a broker's configs (Kafka's checks)."""
    if resource_type == BROKER and not ctx.authorized(operation, ResourceType.CLUSTER, CLUSTER_NAME):
        raise ClusterAuthorizationError("Cluster authorization failed.")
    if resource_type == TOPIC and not ctx.authorized(operation, ResourceType.TOPIC, name):
        raise TopicAuthorizationError("Topic authorization failed.")


def handle_describe_configs(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    results = []
    for r in body.resources:
        entry: dict[str, Any] = {"resource_type": r.resource_type, "resource_name": r.resource_name, "error_code": ErrorCode.none, "configs": []}
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        try:
            _check_access(ctx, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
            if r.resource_type == TOPIC:
                entry["configs"] = _topic_configs(ctx, r.resource_name, keys, field(body, "include_synonyms", False), field(body, "include_documentation", False))
            elif r.resource_type == BROKER:
                entry["configs"] = _broker_configs(ctx, r.resource_name, keys, field(body, "include_synonyms", False),
                                                   field(body, "include_documentation", False))
            else:
                raise InvalidRequestError(f"Unsupported resource type {r.resource_type}; pylog describes topics (2) and brokers (4)")
        except Exception as e:  # noqa: BLE001
            entry["error_code"], entry["error_message"] = error_result(e)
        results.append(entry)
    return build(response_schema(ApiKey.DESCRIBE_CONFIGS, req.api_version), {"throttle_time": 0, "results": results})


def apply_operations(current: dict[str, str], defaults: TopicConfig, ops: Any) -> dict[str, str]:
    """The topic's overrides after IncrementalAlterConfigs operations (SET, DELETE, APPEND, SUBTRACT)."""
    new = dict(current)
    for op in ops:
        name, value, kind = op.name, op.value, op.config_operation
        if name not in TOPIC_KEYS:
            raise InvalidConfigError(f"Unknown topic config '{name}'")
        if kind == SET:
            if value is None:
                raise InvalidConfigError(f"Null value for configuration {name}")
            new[name] = value
        elif kind == DELETE:
            new.pop(name, None)
        elif kind in (APPEND, SUBTRACT):
            if name not in _LIST_KEYS:
                raise InvalidConfigError(f"Config '{name}' is not a list; APPEND and SUBTRACT apply to list configs only")
            items = [x for x in new.get(name, str(defaults.value_of(name))).split(",") if x]
            delta = [x.strip() for x in (value or "").split(",") if x.strip()]
            items = items + [x for x in delta if x not in items] if kind == APPEND else [x for x in items if x not in delta]
            new[name] = ",".join(items)
        else:
            raise InvalidRequestError(f"Unknown config operation {kind} for '{name}'")
    return new


def handle_alter_configs(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    results = []
    for r in body.resources:
        entry: dict[str, Any] = {"resource_type": r.resource_type, "resource_name": r.resource_name,
                                 "error_code": ErrorCode.none}
        try:
            _check_access(ctx, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name)
            if r.resource_type == BROKER:
                for c in r.configs:
                    if c.value is None:
                        raise InvalidRequestError(f"Null value not supported for broker config '{c.name}'")
                _alter_broker(ctx, r.resource_name, {c.name: c.value for c in r.configs}, body.validate_only)
                results.append(entry)
                continue
            if r.resource_type != TOPIC:
                raise InvalidRequestError(f"Unsupported resource type {r.resource_type}; pylog alters topics (2) "
                                          "and brokers (4)")
            ctx.replicas.registry.require(r.resource_name)
            overrides = {}
            for c in r.configs:
                if c.name not in TOPIC_KEYS:
                    raise InvalidConfigError(f"Unknown topic config '{c.name}'")
                if c.value is None:    # Kafka: INVALID_REQUEST, "Null value not supported for"
                    raise InvalidRequestError(f"Null value not supported for topic config '{c.name}'")
                overrides[c.name] = c.value
            ctx.replicas.set_topic_overrides(r.resource_name, overrides, body.validate_only)
        except Exception as e:  # noqa: BLE001
            entry["error_code"], entry["error_message"] = _refusal(e)
        results.append(entry)
    return build(response_schema(ApiKey.ALTER_CONFIGS, req.api_version), {"throttle_time": 0, "responses": results})


def handle_incremental_alter_configs(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    results = []
    for r in body.resources:
        entry: dict[str, Any] = {"resource_type": r.resource_type, "resource_name": r.resource_name, "error_code": ErrorCode.none}
        try:
            _check_access(ctx, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name)
            if r.resource_type == BROKER:
                scope = dynamic_configs.scope_of(r.resource_name, ctx.node_id)
                _alter_broker(ctx, r.resource_name, _broker_operations(ctx.config.dynamic(scope), r.configs),
                              body.validate_only)
                results.append(entry)
                continue
            if r.resource_type != TOPIC:
                raise InvalidRequestError(f"Unsupported resource type {r.resource_type}; pylog alters topics (2) "
                                          "and brokers (4)")
            info = ctx.replicas.registry.require(r.resource_name)
            overrides = apply_operations(info.overrides, ctx.replicas.registry.defaults, r.configs)
            ctx.replicas.set_topic_overrides(r.resource_name, overrides, body.validate_only)
        except Exception as e:  # noqa: BLE001
            entry["error_code"], entry["error_message"] = _refusal(e)
        results.append(entry)
    return build(response_schema(ApiKey.INCREMENTAL_ALTER_CONFIGS, req.api_version), {"throttle_time": 0, "responses": results})
