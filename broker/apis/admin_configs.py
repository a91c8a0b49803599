"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics (and read-only broker configs).

AlterConfigs (the older API) replaces a topic's whole set of overrides with the given one, as Kafka
does; IncrementalAlterConfigs applies SET/DELETE/APPEND/SUBTRACT to them.
"""
from __future__ import annotations

from typing import Any

from broker.apis.common import error_result, field
from broker.config import BROKER_SETTINGS, TOPIC_TO_BROKER_KEY, TopicConfig
from broker.context import BrokerContext
from broker.errors import ErrorCode, InvalidConfigError, InvalidRequestError
from broker.protocol.builder import build
from broker.protocol.codec import Request, response_schema

TOPIC, BROKER = 2, 4
SOURCE_DYNAMIC_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5
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


def _render(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def _topic_configs(ctx: BrokerContext, name: str, keys: Any, synonyms: bool, docs: bool) -> list[dict[str, Any]]:
    info = ctx.replicas.registry.require(name)
    config = ctx.replicas.registry.config_of(name)
    out = []
    for key in sorted(TOPIC_TO_BROKER_KEY):
        if keys is not None and key not in keys:
            continue
        value = config.value_of(key)
        overridden = key in info.overrides
        broker_key = TOPIC_TO_BROKER_KEY[key]
        entry: dict[str, Any] = {
            "name": key, "value": _render(value), "read_only": False, "is_sensitive": False,
            "config_source": SOURCE_DYNAMIC_TOPIC if overridden else (SOURCE_STATIC_BROKER if ctx.config.is_explicit(broker_key) else SOURCE_DEFAULT),
            "is_default": not overridden, "config_type": _config_type(value, key),
            "documentation": BROKER_SETTINGS[broker_key][2] if docs else None, "synonyms": [],
        }
        if synonyms:
            if overridden:
                entry["synonyms"].append({"name": key, "value": info.overrides[key], "source": SOURCE_DYNAMIC_TOPIC})
            entry["synonyms"].append({"name": broker_key, "value": _render(ctx.config[broker_key]),
                                      "source": SOURCE_STATIC_BROKER if ctx.config.is_explicit(broker_key) else SOURCE_DEFAULT})
        out.append(entry)
    return out


def _broker_configs(ctx: BrokerContext, name: str, keys: Any, docs: bool) -> list[dict[str, Any]]:
    if name not in ("", str(ctx.node_id)):
        raise InvalidRequestError(f"Broker '{name}' is not this broker ({ctx.node_id})")
    out: list[dict[str, Any]] = []
    for key, (_, _, doc) in sorted(BROKER_SETTINGS.items()):
        if keys is not None and key not in keys:
            continue
        value = ctx.config[key]
        explicit = ctx.config.is_explicit(key)
        out.append({"name": key, "value": _render(value), "read_only": True, "is_sensitive": False,
                    "config_source": SOURCE_STATIC_BROKER if explicit else SOURCE_DEFAULT, "is_default": not explicit,
                    "config_type": _config_type(value, key), "documentation": doc if docs else None, "synonyms": []})
    return out


def handle_describe_configs(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    results = []
    for r in body.resources:
        entry: dict[str, Any] = {"resource_type": r.resource_type, "resource_name": r.resource_name, "error_code": ErrorCode.none, "configs": []}
        keys = set(r.configuration_keys) if r.configuration_keys is not None else None
        try:
            if r.resource_type == TOPIC:
                entry["configs"] = _topic_configs(ctx, r.resource_name, keys, field(body, "include_synonyms", False), field(body, "include_documentation", False))
            elif r.resource_type == BROKER:
                entry["configs"] = _broker_configs(ctx, r.resource_name, keys, field(body, "include_documentation", False))
            else:
                raise InvalidRequestError(f"Unsupported resource type {r.resource_type}; pylog describes topics (2) and brokers (4)")
        except Exception as e:  # noqa: BLE001
            entry["error_code"], entry["error_message"] = error_result(e)
        results.append(entry)
    return build(response_schema(32, req.api_version), {"throttle_time": 0, "results": results})


def apply_operations(current: dict[str, str], defaults: TopicConfig, ops: Any) -> dict[str, str]:
    """The topic's overrides after IncrementalAlterConfigs operations (SET, DELETE, APPEND, SUBTRACT)."""
    new = dict(current)
    for op in ops:
        name, value, kind = op.name, op.value, op.config_operation
        if name not in TOPIC_TO_BROKER_KEY:
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
            if r.resource_type != TOPIC:
                raise InvalidRequestError("pylog alters topic configs only; broker settings are static (conf/broker.properties)")
            ctx.replicas.registry.require(r.resource_name)
            overrides = {}
            for c in r.configs:
                if c.name not in TOPIC_TO_BROKER_KEY:
                    raise InvalidConfigError(f"Unknown topic config '{c.name}'")
                if c.value is None:    # Kafka: INVALID_REQUEST, "Null value not supported for"
                    raise InvalidRequestError(f"Null value not supported for topic config '{c.name}'")
                overrides[c.name] = c.value
            ctx.replicas.set_topic_overrides(r.resource_name, overrides, body.validate_only)
        except Exception as e:  # noqa: BLE001
            entry["error_code"], entry["error_message"] = error_result(e)
        results.append(entry)
    return build(response_schema(33, req.api_version), {"throttle_time": 0, "responses": results})


def handle_incremental_alter_configs(ctx: BrokerContext, req: Request) -> Any:
    body = req.body
    results = []
    for r in body.resources:
        entry: dict[str, Any] = {"resource_type": r.resource_type, "resource_name": r.resource_name, "error_code": ErrorCode.none}
        try:
            if r.resource_type != TOPIC:
                raise InvalidRequestError("pylog alters topic configs only; broker settings are static (conf/broker.properties)")
            info = ctx.replicas.registry.require(r.resource_name)
            overrides = apply_operations(info.overrides, ctx.replicas.registry.defaults, r.configs)
            ctx.replicas.set_topic_overrides(r.resource_name, overrides, body.validate_only)
        except Exception as e:  # noqa: BLE001
            entry["error_code"], entry["error_message"] = error_result(e)
        results.append(entry)
    return build(response_schema(44, req.api_version), {"throttle_time": 0, "responses": results})
