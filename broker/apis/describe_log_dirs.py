"""DescribeLogDirs (key 35), versions 1-4: each log dir with its partitions' sizes (bytes on
disk), offset lag 0 (no future replicas) and, v4+, the dir's total and usable bytes.
topics null means every partition. A dir an I/O error took offline is answered as Kafka's:
KAFKA_STORAGE_ERROR, no partitions, total and usable bytes -1 (the operator's way to see it:
`kafka-log-dirs.sh --describe`, `odradek cluster status`)."""

from __future__ import annotations

import os

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import DescribeLogDirsRequest, DescribeLogDirsResponse
from protocol.messages import describe_log_dirs_response as r


@api(35, 1, 4)
async def handle(ctx: RequestContext, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):  # KafkaApis: DESCRIBE on the cluster
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, results=[])
    lm = ctx.server.log_manager
    wanted = None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    results = []
    for d in lm.log_dirs:
        if not lm.is_log_dir_online(d):
            results.append(r.DescribeLogDirsResult(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=str(d.resolve()),
                                                   topics=[], total_bytes=-1, usable_bytes=-1))
            continue
        by_topic: dict[str, list[r.DescribeLogDirsPartition]] = {}
        for tp, lg in lm:
            if lm.log_dir_of.get(tp) != d or (wanted is not None and tp not in wanted):
                continue
            by_topic.setdefault(tp[0], []).append(
                r.DescribeLogDirsPartition(partition_index=tp[1], partition_size=lg.size, offset_lag=0, is_future_key=False)
            )
        st = os.statvfs(d)
        results.append(
            r.DescribeLogDirsResult(
                error_code=0,
                log_dir=str(d.resolve()),
                topics=[r.DescribeLogDirsTopic(name=n, partitions=ps) for n, ps in sorted(by_topic.items())],
                total_bytes=st.f_blocks * st.f_frsize,
                usable_bytes=st.f_bavail * st.f_frsize,
            )
        )
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=results)
