"""The table of implemented APIs: key, name, version range and handler. ApiVersions reports it.

`CONTROLLER_API_TABLE` adds the controller's requests in cluster mode. A handler is `handler(ctx, request) -> response entity | Awaitable[...] | None` (None: no response,
as for acks=0 produce). Version ranges are the ones whose fields the handlers honour.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from broker.apis import admin_configs, admin_topics, api_versions, fetch, list_offsets, metadata, produce, producer_id
from broker.apis import controller_requests, groups, leader_epochs, log_dirs, offsets


@dataclass(frozen=True)
class Api:
    key: int
    name: str
    min_version: int
    max_version: int
    handler: Callable[..., Any]


API_TABLE: dict[int, Api] = {
    a.key: a
    for a in [
        Api(0, "Produce", 3, 9, produce.handle),
        Api(1, "Fetch", 4, 12, fetch.handle),
        Api(2, "ListOffsets", 1, 7, list_offsets.handle),
        Api(3, "Metadata", 0, 12, metadata.handle),
        Api(8, "OffsetCommit", 2, 8, offsets.handle_offset_commit),
        Api(9, "OffsetFetch", 1, 8, offsets.handle_offset_fetch),
        Api(10, "FindCoordinator", 0, 4, groups.handle_find_coordinator),
        Api(11, "JoinGroup", 0, 9, groups.handle_join_group),
        Api(12, "Heartbeat", 0, 4, groups.handle_heartbeat),
        Api(13, "LeaveGroup", 0, 5, groups.handle_leave_group),
        Api(14, "SyncGroup", 0, 5, groups.handle_sync_group),
        Api(15, "DescribeGroups", 0, 5, groups.handle_describe_groups),
        Api(16, "ListGroups", 0, 5, groups.handle_list_groups),
        Api(18, "ApiVersions", 0, 3, api_versions.handle),
        Api(19, "CreateTopics", 2, 7, admin_topics.handle_create_topics),
        Api(20, "DeleteTopics", 1, 6, admin_topics.handle_delete_topics),
        Api(21, "DeleteRecords", 0, 2, admin_topics.handle_delete_records),
        Api(22, "InitProducerId", 0, 4, producer_id.handle),
        Api(23, "OffsetForLeaderEpoch", 2, 4, leader_epochs.handle),
        Api(32, "DescribeConfigs", 1, 4, admin_configs.handle_describe_configs),
        Api(33, "AlterConfigs", 0, 2, admin_configs.handle_alter_configs),
        Api(35, "DescribeLogDirs", 1, 4, log_dirs.handle),
        Api(37, "CreatePartitions", 0, 3, admin_topics.handle_create_partitions),
        Api(42, "DeleteGroups", 0, 2, groups.handle_delete_groups),
        Api(44, "IncrementalAlterConfigs", 0, 1, admin_configs.handle_incremental_alter_configs),
        Api(47, "OffsetDelete", 0, 0, offsets.handle_offset_delete),
    ]
}


# The ZooKeeper-mode controller's requests to brokers: served and advertised in cluster mode only, at the
# version Kafka 3.9 sends (broker/protocol/controller_schemas.py)
CONTROLLER_API_TABLE: dict[int, Api] = {
    a.key: a
    for a in [
        Api(4, "LeaderAndIsr", 7, 7, controller_requests.handle_leader_and_isr),
        Api(5, "StopReplica", 4, 4, controller_requests.handle_stop_replica),
        Api(6, "UpdateMetadata", 8, 8, controller_requests.handle_update_metadata),
    ]
}


def apis(cluster: bool) -> dict[int, Api]:
    """Every API this broker serves: the client APIs, and in cluster mode the controller's."""
    return {**API_TABLE, **CONTROLLER_API_TABLE} if cluster else API_TABLE


def supported(api_key: int, version: int, cluster: bool = False) -> Api | None:
    api = apis(cluster).get(api_key)
    if api is None or not api.min_version <= version <= api.max_version:
        return None
    return api
