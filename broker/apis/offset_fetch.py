"""OffsetFetch (key 9), versions 1-8 (see NOTES.md).

Committed offsets of a group: -1 with no error for partitions without a commit (and for groups
that do not exist). v2+ `topics` null means every committed partition of the group, and group
errors (NOT_COORDINATOR, ...) go to the top-level error code; v1 puts them on each partition.
v5+ leader epochs. v8 batches groups (`groups` in, `groups` out, errors per group).

Pending commits (Kafka's GroupMetadataManager.getOffsets): a transaction's offsets
(TxnOffsetCommit) before its marker, and a plain commit while it is being written, are not
answered: OffsetFetch gives the offset committed before them (-1 if none). With v7+
require_stable (KIP-447, a read_committed consumer) such a partition is answered
UNSTABLE_OFFSET_COMMIT (offset -1) instead, and the client retries until the transaction ends.
With `topics` null the answer lists the committed partitions only, as Kafka's.
Authorization (KafkaApis.handleOffsetFetchRequest): DESCRIBE on the GROUP (else
GROUP_AUTHORIZATION_FAILED, per group in v8) and on each TOPIC: a named topic without it is
TOPIC_AUTHORIZATION_FAILED per partition, and `topics` null leaves it out.
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from broker.security.acl import AclOperation, ResourceType
from protocol.errors import ErrorCode
from protocol.messages import OffsetFetchRequest, OffsetFetchResponse
from protocol.messages.offset_fetch_response import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)


def _fetch(ctx: RequestContext, group_id: str, topics: list | None, require_stable: bool) -> tuple[int, dict, dict]:
    """(group error, offsets, partitions answered with an error of their own: UNSTABLE_OFFSET_COMMIT,
    TOPIC_AUTHORIZATION_FAILED)."""
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED, {}, {}
    gc = ctx.server.group_coordinator
    tps = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    allowed = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC,
                                   (t.name for t in topics) if topics is not None else ())
    denied = [] if tps is None else [tp for tp in tps if tp[0] not in allowed]
    code, offsets = gc.handle_fetch_offsets(group_id, None if tps is None else [tp for tp in tps if tp[0] in allowed])
    errors = dict.fromkeys(gc.pending_offset_partitions(group_id) if require_stable and not code else (),
                           ErrorCode.UNSTABLE_OFFSET_COMMIT)
    if tps is None and ctx.server.authorizer is not None:  # every committed topic: the described ones
        described = ctx.authorized_names(AclOperation.DESCRIBE, ResourceType.TOPIC, (tp[0] for tp in offsets))
        offsets = {tp: om for tp, om in offsets.items() if tp[0] in described}
    elif denied and not code:
        offsets = {tp: offsets.get(tp) for tp in tps}
        errors.update(dict.fromkeys(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    return code, offsets, errors


def _by_topic(offsets: dict, part_cls: type, error: int = 0, errors: dict | None = None) -> dict[str, list]:
    out: dict[str, list] = {}
    for tp, om in offsets.items():
        if errors and tp in errors:
            om, code = None, errors[tp]
        else:
            code = error
        out.setdefault(tp[0], []).append(
            part_cls(
                partition_index=tp[1],
                committed_offset=om.offset if om is not None else -1,
                committed_leader_epoch=om.leader_epoch if om is not None else -1,
                metadata=om.metadata if om is not None else "",
                error_code=code,
            )
        )
    return out


@api(9, 1, 8)
async def handle(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.version >= 8:
        groups = []
        for g in req.groups:
            code, offsets, unstable = _fetch(ctx, g.group_id, g.topics, req.require_stable)
            by_topic = _by_topic(offsets, OffsetFetchResponsePartitions, errors=unstable) if not code else {}
            groups.append(
                OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    error_code=code,
                    topics=[OffsetFetchResponseTopics(name=n, partitions=ps) for n, ps in by_topic.items()],
                )
            )
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    topics = req.topics if ctx.version >= 2 or req.topics is not None else []
    code, offsets, unstable = _fetch(ctx, req.group_id, topics, ctx.version >= 7 and req.require_stable)
    if code:
        if ctx.version >= 2:
            return OffsetFetchResponse(throttle_time_ms=0, error_code=code)
        requested = {(t.name, p): None for t in (topics or []) for p in t.partition_indexes}
        by_topic = _by_topic(requested, OffsetFetchResponsePartition, code)
    else:
        by_topic = _by_topic(offsets, OffsetFetchResponsePartition, errors=unstable)
    return OffsetFetchResponse(
        throttle_time_ms=0,
        error_code=0,
        topics=[OffsetFetchResponseTopic(name=n, partitions=ps) for n, ps in by_topic.items()],
    )
