"""DescribeConfigs (key 32, v1-4), AlterConfigs (key 33, v0-2), IncrementalAlterConfigs (key 44,
v0-1) for topics (resource type 2) and brokers (4).

* Topic configs are validated as a whole against LogConfig (unknown key or bad value:
  INVALID_CONFIG, nothing changes), persisted by the controller, and applied to the partition
  logs at once. AlterConfigs replaces a topic's whole override set; IncrementalAlterConfigs
  applies SET / DELETE / APPEND / SUBTRACT per key (APPEND/SUBTRACT only for list configs).
* Describe answers every topic config with its source: DYNAMIC_TOPIC_CONFIG (1) for overrides,
  STATIC_BROKER_CONFIG (4) when server.properties set the broker default, DEFAULT_CONFIG (5)
  otherwise. Broker resources answer the broker's settings; dynamic broker overrides are stored
  and described (DYNAMIC_BROKER_CONFIG, 2) but take effect after a restart.
* validate_only checks and changes nothing. Unknown topics: UNKNOWN_TOPIC_OR_PARTITION; a broker
  id other than ours: INVALID_REQUEST.
"""

from __future__ import annotations

from typing import Any

from broker.apis.registry import api
from broker.context import RequestContext
from protocol.errors import ErrorCode, KafkaProtocolError
from protocol.messages import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from protocol.messages import alter_configs_response as acr
from protocol.messages import describe_configs_response as dcr
from protocol.messages import incremental_alter_configs_response as iacr
from storage.config import LogConfig

TOPIC, BROKER = 2, 4
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

# topic key -> broker key that sets its default
BROKER_SYNONYM = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "max.message.bytes": "message.max.bytes",
    "cleanup.policy": "log.cleanup.policy",
    "min.insync.replicas": "min.insync.replicas",
    "message.timestamp.type": "log.message.timestamp.type",
    "compression.type": "compression.type",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "preallocate": "log.preallocate",
}


def _config_type(value: str) -> int:
    if value in ("true", "false"):
        return 1  # BOOLEAN
    try:
        int(value)
        return 5  # LONG
    except ValueError:
        pass
    try:
        float(value)
        return 6  # DOUBLE
    except ValueError:
        return 2  # STRING


def _topic_defaults(ctx: RequestContext) -> LogConfig:
    return LogConfig.from_props(ctx.server.config.topic_defaults())


def _topic(ctx: RequestContext, name: str) -> Any:
    topic = ctx.server.controller.image.topics.get(name)
    if topic is None:
        raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
    return topic


def _check_broker(ctx: RequestContext, name: str) -> None:
    if name not in ("", str(ctx.server.config.broker_id)):
        raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {ctx.server.config.broker_id} but received {name}")


def _validated(ctx: RequestContext, configs: dict[str, str]) -> dict[str, str]:
    try:
        LogConfig.from_props(configs, _topic_defaults(ctx))
    except ValueError as e:
        raise KafkaProtocolError(ErrorCode.INVALID_CONFIG, str(e)) from None
    return configs


@api(32, 1, 4)
async def describe(ctx: RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    cfg = ctx.server.config
    for res in req.resources:
        result = dcr.DescribeConfigsResult(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name, configs=[]
        )
        try:
            wanted = None if res.configuration_keys is None else set(res.configuration_keys)
            entries: list[tuple[str, str, int]] = []
            if res.resource_type == TOPIC:
                topic = _topic(ctx, res.resource_name)
                effective = LogConfig.from_props(topic.configs, _topic_defaults(ctx)).to_props()
                for key, value in sorted(effective.items()):
                    if key in topic.configs:
                        source = DYNAMIC_TOPIC_CONFIG
                    elif BROKER_SYNONYM.get(key) in cfg.originals:
                        source = STATIC_BROKER_CONFIG
                    else:
                        source = DEFAULT_CONFIG
                    entries.append((key, value, source))
            elif res.resource_type == BROKER:
                _check_broker(ctx, res.resource_name)
                dynamic = ctx.server.controller.image.broker_configs
                for key, value in sorted(cfg.values.items()):
                    if key in dynamic:
                        entries.append((key, dynamic[key], DYNAMIC_BROKER_CONFIG))
                        continue
                    text = "" if value is None else ",".join(value) if isinstance(value, list) else str(value).lower() if isinstance(value, bool) else str(value)
                    entries.append((key, text if value is not None else None, STATIC_BROKER_CONFIG if key in cfg.originals else DEFAULT_CONFIG))
            else:
                raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
            for key, value, source in entries:
                if wanted is not None and key not in wanted:
                    continue
                result.configs.append(
                    dcr.DescribeConfigsResourceResult(
                        name=key, value=value, read_only=res.resource_type == BROKER and source != DYNAMIC_BROKER_CONFIG,
                        config_source=source, is_sensitive=False, synonyms=[],
                        config_type=_config_type(value or ""), documentation=None,
                    )
                )
        except KafkaProtocolError as e:
            result.error_code, result.error_message = e.code, e.message
        results.append(result)
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _apply_topic(ctx: RequestContext, name: str, configs: dict[str, str], validate_only: bool) -> None:
    _topic(ctx, name)
    _validated(ctx, configs)
    if not validate_only:
        ctx.server.controller.set_topic_configs(name, configs)


def _apply_broker(ctx: RequestContext, name: str, configs: dict[str, str], validate_only: bool) -> None:
    from broker.config import CONFIGS, ConfigError, parse_value

    _check_broker(ctx, name)
    for key, value in configs.items():
        d = CONFIGS.get(key)
        if d is None:
            raise KafkaProtocolError(ErrorCode.INVALID_CONFIG, f"Unknown broker config {key}")
        try:
            parse_value(d, value)
        except ConfigError as e:
            raise KafkaProtocolError(ErrorCode.INVALID_CONFIG, str(e)) from None
    if not validate_only:
        ctx.server.controller.set_broker_configs(configs)


@api(33, 0, 2)
async def alter(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = []
    for res in req.resources:
        out = acr.AlterConfigsResourceResponse(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name
        )
        try:
            configs = {c.name: c.value for c in res.configs if c.value is not None}
            if res.resource_type == TOPIC:
                _apply_topic(ctx, res.resource_name, configs, req.validate_only)
            elif res.resource_type == BROKER:
                _apply_broker(ctx, res.resource_name, configs, req.validate_only)
            else:
                raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
        except KafkaProtocolError as e:
            out.error_code, out.error_message = e.code, e.message
        responses.append(out)
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


@api(44, 0, 1)
async def incremental_alter(ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    responses = []
    image = ctx.server.controller.image
    for res in req.resources:
        out = iacr.AlterConfigsResourceResponse(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name
        )
        try:
            if res.resource_type == TOPIC:
                current = dict(_topic(ctx, res.resource_name).configs)
                effective = LogConfig.from_props(current, _topic_defaults(ctx)).to_props()
            elif res.resource_type == BROKER:
                _check_broker(ctx, res.resource_name)
                current = dict(image.broker_configs)
                effective = dict(current)
            else:
                raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
            for c in res.configs:
                if c.config_operation == SET:
                    current[c.name] = c.value
                elif c.config_operation == DELETE:
                    current.pop(c.name, None)
                elif c.config_operation in (APPEND, SUBTRACT):
                    if c.name not in ("cleanup.policy", "log.cleanup.policy"):
                        raise KafkaProtocolError(ErrorCode.INVALID_CONFIG, f"Config value append is not allowed for config key: {c.name}")
                    items = [x for x in current.get(c.name, effective.get(c.name, "")).split(",") if x]
                    values = [x for x in (c.value or "").split(",") if x]
                    if c.config_operation == APPEND:
                        items += [v for v in values if v not in items]
                    else:
                        items = [x for x in items if x not in values]
                    current[c.name] = ",".join(items)
                else:
                    raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, f"Unknown config operation {c.config_operation}")
            if res.resource_type == TOPIC:
                _apply_topic(ctx, res.resource_name, current, req.validate_only)
            else:
                _apply_broker(ctx, res.resource_name, current, req.validate_only)
        except KafkaProtocolError as e:
            out.error_code, out.error_message = e.code, e.message
        responses.append(out)
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
