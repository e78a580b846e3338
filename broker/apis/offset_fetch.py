"""OffsetFetch (key 9), versions 1-8 (see NOTES.md).

Committed offsets of a group: -1 with no error for partitions without a commit (and for groups
that do not exist). v2+ `topics` null means every committed partition of the group, and group
errors (NOT_COORDINATOR, ...) go to the top-level error code; v1 puts them on each partition.
v5+ leader epochs. v7 require_stable needs no waiting (no transactional offset commits yet).
v8 batches groups (`groups` in, `groups` out, errors per group).
"""

from __future__ import annotations

from broker.apis.registry import api
from broker.context import RequestContext
from protocol.messages import OffsetFetchRequest, OffsetFetchResponse
from protocol.messages.offset_fetch_response import (
    OffsetFetchResponseGroup,
    OffsetFetchResponsePartition,
    OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic,
    OffsetFetchResponseTopics,
)


def _fetch(ctx: RequestContext, group_id: str, topics: list | None) -> tuple[int, dict]:
    tps = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    return ctx.server.group_coordinator.handle_fetch_offsets(group_id, tps)


def _by_topic(offsets: dict, part_cls: type, error: int = 0) -> dict[str, list]:
    out: dict[str, list] = {}
    for (topic, partition), om in offsets.items():
        out.setdefault(topic, []).append(
            part_cls(
                partition_index=partition,
                committed_offset=om.offset if om is not None else -1,
                committed_leader_epoch=om.leader_epoch if om is not None else -1,
                metadata=om.metadata if om is not None else "",
                error_code=error,
            )
        )
    return out


@api(9, 1, 8)
async def handle(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    if ctx.version >= 8:
        groups = []
        for g in req.groups:
            code, offsets = _fetch(ctx, g.group_id, g.topics)
            by_topic = _by_topic(offsets, OffsetFetchResponsePartitions) if not code else {}
            groups.append(
                OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    error_code=code,
                    topics=[OffsetFetchResponseTopics(name=n, partitions=ps) for n, ps in by_topic.items()],
                )
            )
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    topics = req.topics if ctx.version >= 2 or req.topics is not None else []
    code, offsets = _fetch(ctx, req.group_id, topics)
    if code:
        if ctx.version >= 2:
            return OffsetFetchResponse(throttle_time_ms=0, error_code=code)
        requested = {(t.name, p): None for t in (topics or []) for p in t.partition_indexes}
        by_topic = _by_topic(requested, OffsetFetchResponsePartition, code)
    else:
        by_topic = _by_topic(offsets, OffsetFetchResponsePartition)
    return OffsetFetchResponse(
        throttle_time_ms=0,
        error_code=0,
        topics=[OffsetFetchResponseTopic(name=n, partitions=ps) for n, ps in by_topic.items()],
    )
