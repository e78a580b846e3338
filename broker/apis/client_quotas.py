"""DescribeClientQuotas (key 48, v0-1) and AlterClientQuotas (key 49, v0-1), as Kafka 3.9's
KafkaApis with ZkAdminManager (broker/quota/admin.py holds the pure logic).

* Describe needs DESCRIBE_CONFIGS on the CLUSTER, Alter ALTER_CONFIGS (else
  CLUSTER_AUTHORIZATION_FAILED for the whole request / every entry).
* Describe: filter components of entity type `user` or `client-id` with match type EXACT (0, a
  name), DEFAULT (1, the `<default>`) or SPECIFIED (2, any name but the default); `strict` leaves
  out entities with parts the filter does not name. Entities with no quota key are left out. A
  duplicate or unknown entity type: INVALID_REQUEST for the request. Answered from ZooKeeper in a
  cluster (what every broker will apply), from the metadata store on a single node.
* Alter: each entry's ops (`producer_byte_rate`, `consumer_byte_rate` -- longs --,
  `request_percentage`, `controller_mutation_rate`; remove=true deletes the key) applied to the
  entity's stored configs; an invalid entity or op is INVALID_REQUEST for that entry only. As
  Kafka reads entities and entries into maps, a repeated entity type keeps its last name and a
  repeated entity its last entry, answered once (client-id before user in each entity).
  validate_only checks and changes nothing. A cluster writes /config/users/... or
  /config/clients/... and a /config/changes notification (every broker applies it); a single
  node stores it in its metadata file, durable before the answer. This broker applies the change
  at once.
"""

from __future__ import annotations

from typing import Any

from broker.apis.registry import api
from broker.context import RequestContext
from broker.quota.admin import Component, apply_ops, check_filter, entity_of, entity_parts, matches
from broker.quota.entity import parse_quota_config
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from protocol.messages import alter_client_quotas_response as acq
from protocol.messages import describe_client_quotas_response as dcq

_CLUSTER_DENIED = "Cluster authorization failed."


@api(48, 0, 1)
async def describe(ctx: RequestContext, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                            error_message=_CLUSTER_DENIED, entries=None)
    components = [Component(c.entity_type, c.match_type, c.match) for c in req.components]
    try:
        check_filter(components)
        stored = await ctx.server.controller.client_quota_configs()
    except KafkaProtocolError as e:
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=e.code, error_message=e.message,
                                            entries=None)
    entries = []
    for entity, config in stored.items():
        values = parse_quota_config(config)
        if not values or not matches(entity, components, req.strict):
            continue
        entries.append(dcq.EntryData(
            entity=[dcq.EntityData(entity_type=t, entity_name=n) for t, n in entity_parts(entity)],
            values=[dcq.ValueData(key=k, value=v) for k, v in values.items()]))
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=0, error_message=None, entries=entries)


@api(49, 0, 1)
async def alter(ctx: RequestContext, req: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    allowed = ctx.authorize_cluster(AclOperation.ALTER_CONFIGS)
    # Kafka keys the entries by entity (a map): one answer per entity, the last entry's ops
    entries: dict[tuple[tuple[str, str | None], ...], Any] = {}
    for entry in req.entries:
        parts = dict((e.entity_type, e.entity_name) for e in entry.entity)
        key = tuple(sorted(parts.items(), key=lambda p: p[0] != "client-id"))
        entries.pop(key, None)
        entries[key] = entry
    out = []
    for key, entry in entries.items():
        res = acq.EntryData(error_code=0, error_message=None, entity=[
            acq.EntityData(entity_type=t, entity_name=n) for t, n in key])
        out.append(res)
        try:
            if not allowed:
                raise KafkaProtocolError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _CLUSTER_DENIED)
            entity = entity_of(key)
            ops = [(op.key, op.value, op.remove) for op in entry.ops]
            apply_ops({}, ops)  # every op checked before anything is written
            if not req.validate_only:
                config = await ctx.server.controller.alter_client_quota(entity, ops)
                ctx.server.quotas.update(entity, config)
        except KafkaProtocolError as e:
            res.error_code, res.error_message = e.code, e.message
    await ctx.committed(out)
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=out)
