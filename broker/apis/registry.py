"""The table of implemented APIs: key, name, version range and handler. ApiVersions reports it.

`CONTROLLER_API_TABLE` adds the controller's requests in cluster mode. A handler is `handler(ctx, request) -> response entity | Awaitable[...] | None` (None: no response,
as for acks=0 produce). Version ranges are the ones whose fields the handlers honour.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from kafka_protocol.api_keys import ApiKey
from broker.apis import admin_configs, admin_topics, api_versions, fetch, list_offsets, metadata, produce
from broker.apis import (acls, client_quotas, controller_requests, groups, leader_election, leader_epochs, log_dirs,
                         offsets, reassignments, sasl, scram_users, transactions)


def _api_versions(ctx: Any, req: Any) -> Any:
    return api_versions.handle(ctx, req, advertised(ctx.replicas.cluster is not None))


@dataclass(frozen=True)
class Api:
    key: ApiKey
    min_version: int
    max_version: int
    handler: Callable[..., Any]

    @property
    def name(self) -> str:
        return self.key.api_name


API_TABLE: dict[int, Api] = {
    a.key: a
    for a in [
        Api(ApiKey.PRODUCE, 3, 9, produce.handle),
        Api(ApiKey.FETCH, 4, 12, fetch.handle),
        Api(ApiKey.LIST_OFFSETS, 1, 9, list_offsets.handle),
        Api(ApiKey.METADATA, 0, 12, metadata.handle),
        Api(ApiKey.DESCRIBE_CLUSTER, 0, 1, metadata.describe_cluster),
        Api(ApiKey.OFFSET_COMMIT, 2, 8, offsets.handle_offset_commit),
        Api(ApiKey.OFFSET_FETCH, 1, 8, offsets.handle_offset_fetch),
        Api(ApiKey.FIND_COORDINATOR, 0, 4, groups.handle_find_coordinator),
        Api(ApiKey.JOIN_GROUP, 0, 9, groups.handle_join_group),
        Api(ApiKey.HEARTBEAT, 0, 4, groups.handle_heartbeat),
        Api(ApiKey.LEAVE_GROUP, 0, 5, groups.handle_leave_group),
        Api(ApiKey.SYNC_GROUP, 0, 5, groups.handle_sync_group),
        Api(ApiKey.DESCRIBE_GROUPS, 0, 5, groups.handle_describe_groups),
        Api(ApiKey.LIST_GROUPS, 0, 5, groups.handle_list_groups),
        Api(ApiKey.API_VERSIONS, 0, 3, _api_versions),
        Api(ApiKey.CREATE_TOPICS, 2, 7, admin_topics.handle_create_topics),
        Api(ApiKey.DELETE_TOPICS, 1, 6, admin_topics.handle_delete_topics),
        Api(ApiKey.DELETE_RECORDS, 0, 2, admin_topics.handle_delete_records),
        Api(ApiKey.INIT_PRODUCER_ID, 0, 4, transactions.handle_init_producer_id),
        Api(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2, 4, leader_epochs.handle),
        Api(ApiKey.DESCRIBE_CONFIGS, 1, 4, admin_configs.handle_describe_configs),
        Api(ApiKey.ALTER_CONFIGS, 0, 2, admin_configs.handle_alter_configs),
        Api(ApiKey.DESCRIBE_LOG_DIRS, 1, 4, log_dirs.handle),
        Api(ApiKey.CREATE_PARTITIONS, 0, 3, admin_topics.handle_create_partitions),
        Api(ApiKey.DELETE_GROUPS, 0, 2, groups.handle_delete_groups),
        Api(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1, admin_configs.handle_incremental_alter_configs),
        Api(ApiKey.OFFSET_DELETE, 0, 0, offsets.handle_offset_delete),
        Api(ApiKey.ELECT_LEADERS, 0, 2, leader_election.handle),
        Api(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0, reassignments.alter),
        Api(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, reassignments.list_),
        # transactions (KIP-98; the tools' KIP-664); WriteTxnMarkers at v1 only (kio has no v0, Kafka 4 dropped it)
        Api(ApiKey.ADD_PARTITIONS_TO_TXN, 0, 4, transactions.handle_add_partitions_to_txn),
        Api(ApiKey.ADD_OFFSETS_TO_TXN, 0, 3, transactions.handle_add_offsets_to_txn),
        Api(ApiKey.END_TXN, 0, 3, transactions.handle_end_txn),
        Api(ApiKey.WRITE_TXN_MARKERS, 1, 1, transactions.handle_write_txn_markers),
        Api(ApiKey.TXN_OFFSET_COMMIT, 0, 3, transactions.handle_txn_offset_commit),
        Api(ApiKey.DESCRIBE_PRODUCERS, 0, 0, transactions.handle_describe_producers),
        Api(ApiKey.DESCRIBE_TRANSACTIONS, 0, 0, transactions.handle_describe_transactions),
        Api(ApiKey.LIST_TRANSACTIONS, 0, 1, transactions.handle_list_transactions),
        # security (issue 28): logins on SASL listeners, SCRAM users (KIP-554)
        Api(ApiKey.SASL_HANDSHAKE, 0, 1, sasl.handle_sasl_handshake),
        Api(ApiKey.SASL_AUTHENTICATE, 0, 2, sasl.handle_sasl_authenticate),
        Api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, scram_users.handle_describe_user_scram_credentials),
        Api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0, scram_users.handle_alter_user_scram_credentials),
        Api(ApiKey.DESCRIBE_CLIENT_QUOTAS, 0, 1, client_quotas.handle_describe_client_quotas),
        # ACLs (kio has v1-3; Kafka's v0 cannot name a pattern type)
        Api(ApiKey.DESCRIBE_ACLS, 1, 3, acls.handle_describe_acls),
        Api(ApiKey.CREATE_ACLS, 1, 3, acls.handle_create_acls),
        Api(ApiKey.DELETE_ACLS, 1, 3, acls.handle_delete_acls),
    ]
}


# The ZooKeeper-mode controller's requests to brokers, and a stopping broker's to the controller: served and
# advertised in cluster mode only, at the version Kafka 3.9 sends (kafka_protocol/controller_schemas.py)
CONTROLLER_API_TABLE: dict[int, Api] = {
    a.key: a
    for a in [
        Api(ApiKey.LEADER_AND_ISR, 7, 7, controller_requests.handle_leader_and_isr),
        Api(ApiKey.STOP_REPLICA, 4, 4, controller_requests.handle_stop_replica),
        Api(ApiKey.UPDATE_METADATA, 8, 8, controller_requests.handle_update_metadata),
        Api(ApiKey.CONTROLLED_SHUTDOWN, 3, 3, controller_requests.handle_controlled_shutdown),
    ]
}


def apis(cluster: bool) -> dict[int, Api]:
    """Every API this broker serves: the client APIs, and in cluster mode the controller's."""
    return {**API_TABLE, **CONTROLLER_API_TABLE} if cluster else API_TABLE


def advertised(cluster: bool) -> api_versions.ApiKeys:
    """The api_keys of an ApiVersions response: every API served, with its version range."""
    return [{"api_key": a.key, "min_version": a.min_version, "max_version": a.max_version}
            for a in sorted(apis(cluster).values(), key=lambda a: a.key)]


def supported(api_key: int, version: int, cluster: bool = False) -> Api | None:
    api = apis(cluster).get(api_key)
    if api is None or not api.min_version <= version <= api.max_version:
        return None
    return api
