"""DescribeLogDirs: the bytes each partition holds on disk, per log directory (one here: `log.dirs`).

Answers as Kafka does: all partitions when `topics` is null, the requested ones otherwise (an
unknown topic or partition is left out, as Kafka leaves out replicas it does not host); total and
usable bytes of the directory's file system from v4. The Spark source's maxBytesPerTrigger reads
partition sizes from here.
"""
from __future__ import annotations

import shutil
from typing import Any

from kafka_protocol.api_keys import ApiKey
from broker.context import BrokerContext
from kafka_protocol.errors import ErrorCode
from kafka_protocol.builder import build
from kafka_protocol.codec import Request, response_schema
from kafka_protocol.security.acls import CLUSTER_NAME, AclOperation, ResourceType



def _partition(size: int, index: int) -> dict[str, Any]:
    return {"partition_index": index, "partition_size": size, "offset_lag": 0, "is_future_key": False}


def handle(ctx: BrokerContext, req: Request) -> Any:
    if not ctx.authorized(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):    # with ACLs, as Kafka
        return build(response_schema(ApiKey.DESCRIBE_LOG_DIRS, req.api_version),
                     {"throttle_time": 0, "error_code": ErrorCode.cluster_authorization_failed, "results": []})
    logs = ctx.replicas.logs
    by_topic: dict[str, list[dict[str, Any]]] = {}
    if req.body.topics is None:
        for plog in logs.all_logs():
            by_topic.setdefault(plog.topic, []).append(_partition(plog.size_in_bytes(), plog.partition))
    else:
        for t in req.body.topics:
            for p in t.partitions:
                hosted = logs.get(t.topic, p)
                if hosted is not None:
                    by_topic.setdefault(t.topic, []).append(_partition(hosted.size_in_bytes(), p))
    data_dir = ctx.config.data_dir
    usage = shutil.disk_usage(data_dir)
    result = {"error_code": ErrorCode.none, "log_dir": str(data_dir.resolve()), "total_bytes": usage.total,
              "usable_bytes": usage.free,
              "topics": [{"name": name, "partitions": parts} for name, parts in sorted(by_topic.items())]}
    return build(response_schema(ApiKey.DESCRIBE_LOG_DIRS, req.api_version),
                 {"throttle_time": 0, "error_code": ErrorCode.none, "results": [result]})
