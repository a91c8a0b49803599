"""CreateAcls, DescribeAcls and DeleteAcls (Kafka's AclApis): ALTER (create, delete) or DESCRIBE (describe) on
the cluster; SECURITY_DISABLED without an authorizer; per-binding checks as Kafka's broker makes them."""
from __future__ import annotations

from typing import Any

from broker.context import SESSION, BrokerContext
from kafka_protocol.codec import MalformedRequestError
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.errors import ErrorCode
from kafka_protocol.security.acls import (CLUSTER_NAME, AccessControlEntry, AclBinding, AclBindingFilter,
                                          AclOperation, ResourcePattern, ResourceType)
from kafka_protocol.security.principal import KafkaPrincipal

NO_AUTHORIZER = "No Authorizer is configured on the broker"
UNKNOWN_ELEMENTS = "ACL requests must not contain UNKNOWN elements"
NO_AUTHORIZER_ALTER = "No Authorizer is configured."


def _denied(ctx: BrokerContext, operation: AclOperation) -> bool:
    return not ctx.authorized(operation, ResourceType.CLUSTER, CLUSTER_NAME)


def _not_authorized(req: Request) -> str:
    """Kafka's message for a refused ACL request names the request and its connection."""
    session = SESSION.get()
    who = f"{session.principal},{session.client_host.lstrip('/')}" if session is not None else "unknown"
    listener = session.listener if session is not None else "PLAINTEXT"
    return (f"Request Request(processor=0, connectionId=pylog, session=Session({who}), "
            f"listenerName=ListenerName({listener}), securityProtocol="
            f"{session.security_protocol if session is not None else 'PLAINTEXT'}, buffer=null, "
            f"envelope=None) is not authorized.")


def _alter_refusal(ctx: BrokerContext, req: Request) -> tuple[ErrorCode, str] | None:
    return (ErrorCode.cluster_authorization_failed, _not_authorized(req)) if _denied(ctx, AclOperation.ALTER) \
        else None


def handle_describe_acls(ctx: BrokerContext, req: Request) -> Any:
    schema = response_schema(ApiKey.DESCRIBE_ACLS, req.api_version)
    if _denied(ctx, AclOperation.DESCRIBE):
        return build(schema, {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed,
                              "error_message": _not_authorized(req), "resources": []})
    if ctx.authorizer is None:
        return build(schema, {"throttle_time": 0, "error_code": ErrorCode.security_disabled,
                              "error_message": NO_AUTHORIZER, "resources": []})
    b = req.body
    acl_filter = AclBindingFilter.of(b.resource_type_filter, b.resource_name_filter, getattr(b, "pattern_type_filter", 3),
                                     b.principal_filter, b.host_filter, b.operation, b.permission_type)
    if acl_filter.unknown:      # Kafka cannot parse such a request: the connection closes
        raise MalformedRequestError(UNKNOWN_ELEMENTS)
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in ctx.authorizer.store.describe(acl_filter):
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    resources = [{"resource_type": p.resource_type, "resource_name": p.name, "pattern_type": p.pattern_type,
                  "acls": [{"principal": e.principal, "host": e.host, "operation": e.operation,
                            "permission_type": e.permission} for e in entries]}
                 for p, entries in grouped.items()]
    return build(schema, {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": "",
                          "resources": resources})


def _creation_problem(binding: AclBinding) -> tuple[ErrorCode, str | None]:
    """Kafka's answer to one creation: the request's checks (INVALID_REQUEST with a message), then bindings
    Kafka's own classes cannot build (ANY, MATCH, a principal without a type: UNKNOWN_SERVER_ERROR, no
    message), then AclAuthorizer's (a '/' in the name: INVALID_REQUEST "Failed to create ACL")."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return ErrorCode.invalid_request, f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if not pattern.name:
        return ErrorCode.invalid_request, "Invalid empty resource name"
    try:
        KafkaPrincipal.parse(entry.principal)
    except ValueError:
        return ErrorCode.unknown_server_error, None
    if not pattern.definite or not entry.definite:
        return ErrorCode.unknown_server_error, None
    if "/" in pattern.name:
        return ErrorCode.invalid_request, "Failed to create ACL"
    return ErrorCode.none, None


def handle_create_acls(ctx: BrokerContext, req: Request) -> Any:
    schema = response_schema(ApiKey.CREATE_ACLS, req.api_version)
    creations = req.body.creations
    bindings = [AclBinding(ResourcePattern.of(c.resource_type, c.resource_name, getattr(c, "resource_pattern_type", 3)),
                           AccessControlEntry.of(c.principal, c.host, c.operation, c.permission_type)) for c in creations]
    if any(b.pattern.unknown or b.entry.unknown for b in bindings):
        raise MalformedRequestError(UNKNOWN_ELEMENTS)
    refusal = _alter_refusal(ctx, req)
    if refusal is not None or ctx.authorizer is None:
        code, message = refusal or (ErrorCode.security_disabled, NO_AUTHORIZER_ALTER)
        return build(schema, {"throttle_time": 0, "results": [{"error_code": code, "error_message": message}
                                                              for _ in creations]})
    results, valid = [], []
    for binding in bindings:
        code, problem = _creation_problem(binding)
        results.append({"error_code": code, "error_message": problem if code != ErrorCode.none else ""})
        if code == ErrorCode.none:
            valid.append(binding)
    ctx.authorizer.store.create(valid)
    return build(schema, {"throttle_time": 0, "results": results})


def handle_delete_acls(ctx: BrokerContext, req: Request) -> Any:
    schema = response_schema(ApiKey.DELETE_ACLS, req.api_version)
    filters = req.body.filters
    parsed = [AclBindingFilter.of(f.resource_type_filter, f.resource_name_filter, getattr(f, "pattern_type_filter", 3),
                                  f.principal_filter, f.host_filter, f.operation, f.permission_type) for f in filters]
    if any(f.unknown for f in parsed):
        raise MalformedRequestError(UNKNOWN_ELEMENTS)
    refusal = _alter_refusal(ctx, req)
    if refusal is not None or ctx.authorizer is None:
        code, message = refusal or (ErrorCode.security_disabled, NO_AUTHORIZER_ALTER)
        return build(schema, {"throttle_time": 0, "filter_results": [
            {"error_code": code, "error_message": message, "matching_acls": []} for _ in filters]})
    removed = ctx.authorizer.store.delete(parsed)
    return build(schema, {"throttle_time": 0, "filter_results": [
        {"error_code": ErrorCode.none, "error_message": None, "matching_acls": [
            {"error_code": ErrorCode.none, "error_message": None, "resource_type": b.pattern.resource_type,
             "resource_name": b.pattern.name, "pattern_type": b.pattern.pattern_type, "principal": b.entry.principal,
             "host": b.entry.host, "operation": b.entry.operation, "permission_type": b.entry.permission}
            for b in bindings]} for bindings in removed]})
