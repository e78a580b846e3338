"""DescribeConfigs (key 32, v1-4), AlterConfigs (key 33, v0-2), IncrementalAlterConfigs (key 44,
v0-1) for topics (resource type 2) and brokers (4).

* Topic configs are validated as a whole against LogConfig (unknown key or bad value:
  INVALID_CONFIG, nothing changes), persisted by the controller, and applied to the partition
  logs at once. AlterConfigs replaces a topic's whole override set; IncrementalAlterConfigs
  applies SET / DELETE / APPEND / SUBTRACT per key (APPEND/SUBTRACT only for list configs).
* Describe answers every topic config with its source, synonyms (v1+ include_synonyms), ConfigDef
  type (v3+) and documentation (v3+ include_documentation) as Kafka's ConfigHelper does
  (broker/config_synonyms.py): DYNAMIC_TOPIC_CONFIG (1) for overrides, then the broker keys that
  give the default, from dynamic (2, 3), server.properties (4) or built-in (5) values. Broker
  resources answer every key Kafka 3.9 defines (broker/kafka_broker_configs, with Kafka's
  defaults and read-only flags) and Odradek's own; dynamic broker overrides are checked as
  Kafka's DynamicBrokerConfig.validateConfigs (a read-only key, a listener store key without its
  prefix, a per-broker key at the cluster default: INVALID_REQUEST with Kafka's message), stored
  and described (DYNAMIC_BROKER_CONFIG, 2) -- a single node does not apply them (not even after
  a restart); ZooKeeper mode: below. A topic name is validated first (INVALID_TOPIC_EXCEPTION),
  as Kafka's Topic.validate.
* IncrementalAlterConfigs first checks each resource's shape as Kafka's ConfigAdminManager.preprocess
  does (INVALID_REQUEST, nothing changes): a resource named twice, a config key named twice, a
  null value for any operation but DELETE.
* Authorization (KafkaApis): DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic (else
  TOPIC_AUTHORIZATION_FAILED) or on the cluster for a broker (else CLUSTER_AUTHORIZATION_FAILED).
* validate_only checks and changes nothing. Unknown topics: UNKNOWN_TOPIC_OR_PARTITION; a broker
  id other than ours: INVALID_REQUEST.
* ZooKeeper mode, as Kafka's ZkAdminManager / ZkConfigRepository: a topic's overrides are read from
  /config/topics/<t> by Describe and by IncrementalAlterConfigs (which changes what ZooKeeper has,
  so a change acknowledged by any broker is never lost to another's stale view); broker
  resources answer this broker's dynamic configs as its ZkConfigManager last applied them, the
  cluster-wide `<default>` ones with source DYNAMIC_DEFAULT_BROKER_CONFIG (3). The broker
  resource named "" is the cluster default: Describe lists its keys only, Alter and
  IncrementalAlter change /config/brokers/<default>. Dynamic broker configs that set a
  topic-config default (log.retention.ms, message.max.bytes, ...) take effect on every broker
  they reach (broker/dynamic_config.py). A topic's effective values use the broker's current
  log defaults.
"""

from __future__ import annotations

import math
from collections import Counter
from decimal import Decimal
from typing import Any

from broker.apis.registry import api
from broker.config import (
    CONFIGS,
    DEFINITIONS,
    LISTENER_PREFIX,
    ConfigError,
    config_def,
    parse_value,
)
from broker.config_synonyms import (
    CONFIG_TYPES,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    TOPIC_SYNONYMS,
    UNKNOWN_TYPE,
    Synonym,
    broker_key_synonyms,
    source_of,
    topic_synonyms,
)
from broker.context import RequestContext
from broker.dynamic_config import DEFAULT_ENTITY
from broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS, validate_dynamic
from broker.kafka_broker_configs import read_only as kafka_read_only
from broker.security.acl import AclOperation, ResourceType
from controller.image import validate_topic_name
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
from storage.config import LogConfig, topic_config_kind

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def _text(value: Any) -> str | None:
    """A broker setting as Kafka's ConfigDef.convertToString writes it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (list, tuple)):
        return ",".join(value)
    if isinstance(value, float):
        return _java_double(value)
    return str(value)


def _java_double(value: float) -> str:
    """Java's Double.toString: plain from 10^-3 up to 10^7 (always with a fraction digit),
    else computerized scientific notation (`1.7976931348623157E308`)."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(value)  # Python writes these as Java does: 0.5, 10.0
    if math.isinf(value) or math.isnan(value):
        return "Infinity" if value > 0 else "-Infinity" if value < 0 else "NaN"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    shortest = "".join(map(str, digits))  # repr's shortest round-tripping digits
    return (f"{'-' if sign else ''}{shortest[0]}.{shortest[1:] or '0'}"
            f"E{len(shortest) - 1 + int(exponent)}")


class _BrokerSources:
    """The broker's values by source, for synonyms: dynamic overrides, server.properties, and
    built-in defaults (for broker keys Odradek does not define, the topic config's default, which
    is Kafka's broker default for the same setting)."""

    def __init__(self, ctx: RequestContext) -> None:
        cfg = ctx.server.config
        self.dynamic = dict(ctx.server.metadata_cache.broker_configs)
        self.dynamic_default = dict(ctx.server.metadata_cache.broker_default_configs)
        self.static = {k: _text(v) for k, v in cfg.originals.items() if k in CONFIGS or k in KAFKA_BROKER_CONFIGS}
        self.defaults = {k: c.default for k, c in KAFKA_BROKER_CONFIGS.items() if c.default is not None}
        self.defaults.update({d.key: _text(d.default) for d in DEFINITIONS if d.default is not None})
        topic_defaults = LogConfig().to_props()
        for topic_key, (primary, *_) in TOPIC_SYNONYMS.items():
            if primary not in CONFIGS:
                self.defaults[primary] = topic_defaults[topic_key]


def _documentation(key: str, resource_type: int) -> str:
    if resource_type == BROKER:
        d = config_def(key)
        return d.doc if d is not None else ""
    primary = TOPIC_SYNONYMS.get(key, ("",))[0]
    if primary in CONFIGS:
        return CONFIGS[primary].doc
    return f"Topic config {key}" + (f"; its broker default is {primary}." if primary else ".")


def _topic_defaults(ctx: RequestContext) -> LogConfig:
    """The log defaults the broker runs with (ZooKeeper mode: with the dynamic broker configs)."""
    rm = ctx.server.replica_manager
    return LogConfig.from_props(rm.topic_defaults if rm is not None else ctx.server.config.topic_defaults())


def _topic(ctx: RequestContext, name: str) -> Any:
    topic = ctx.server.metadata_cache.topic(name)
    if topic is None:
        raise KafkaProtocolError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist.")
    return topic


async def _topic_overrides(ctx: RequestContext, name: str) -> dict[str, str]:
    """The topic's overrides: from ZooKeeper in ZooKeeper mode (the topic must be in the
    metadata cache first, as Kafka checks), else from the metadata."""
    topic = _topic(ctx, name)
    repository = ctx.server.config_repository
    if repository is None:
        return dict(topic.configs)
    return await _read(repository.topic_config(name), f"topic {name}")


async def _read(aw: Any, what: str) -> dict[str, str]:
    try:
        return await aw
    except Exception as e:  # ZooKeeper unreachable: this resource's error, not the connection's
        raise KafkaProtocolError(ErrorCode.UNKNOWN_SERVER_ERROR,
                                 f"Reading the configs of {what} from ZooKeeper failed: {e}") from None


def _check_broker(ctx: RequestContext, name: str) -> None:
    if name not in ("", str(ctx.server.config.broker_id)):
        raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {ctx.server.config.broker_id} but received {name}")


def _validated(ctx: RequestContext, configs: dict[str, str]) -> dict[str, str]:
    try:
        LogConfig.from_props(configs, _topic_defaults(ctx))
    except ValueError as e:
        raise KafkaProtocolError(ErrorCode.INVALID_CONFIG, str(e)) from None
    return configs


def _authorize(ctx: RequestContext, resource_type: int, name: str, op: AclOperation) -> None:
    """KafkaApis' config checks: `op` on the topic (TOPIC_AUTHORIZATION_FAILED), or on the cluster
    for a broker or broker logger (CLUSTER_AUTHORIZATION_FAILED); other types are left to the
    caller's INVALID_REQUEST."""
    if resource_type == TOPIC and not ctx.authorize(op, ResourceType.TOPIC, name):
        raise KafkaProtocolError(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if resource_type in (BROKER, BROKER_LOGGER) and not ctx.authorize_cluster(op):
        raise KafkaProtocolError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)


@api(32, 1, 4)
async def describe(ctx: RequestContext, req: DescribeConfigsRequest) -> DescribeConfigsResponse:
    results = []
    sources = _BrokerSources(ctx)
    for res in req.resources:
        result = dcr.DescribeConfigsResult(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name, configs=[]
        )
        try:
            _authorize(ctx, res.resource_type, res.resource_name, AclOperation.DESCRIBE_CONFIGS)
            wanted = None if res.configuration_keys is None else set(res.configuration_keys)
            # (key, value, synonyms, ConfigDef type, read only)
            entries: list[tuple[str, str | None, list[Synonym], str | None, bool]] = []
            if res.resource_type == TOPIC:
                validate_topic_name(res.resource_name)
                overrides = await _topic_overrides(ctx, res.resource_name)
                effective = LogConfig.from_props(overrides, _topic_defaults(ctx)).to_props()
                for key, value in sorted(effective.items()):
                    synonyms = topic_synonyms(key, value, overrides, sources.dynamic, sources.static,
                                              sources.defaults, sources.dynamic_default)
                    entries.append((key, value, synonyms, topic_config_kind(key), False))
            elif res.resource_type == BROKER and res.resource_name == "" and ctx.server.zk_mode:
                # the cluster default (Kafka's perBrokerConfig = false): its own keys, and of the
                # synonyms only the cluster default's (as Kafka 3.9 answers)
                for key, value in sorted(sources.dynamic_default.items()):
                    synonyms = [s for s in broker_key_synonyms(key, sources.dynamic, sources.static, sources.defaults,
                                                               sources.dynamic_default)
                                if s.source == DYNAMIC_DEFAULT_BROKER_CONFIG]
                    d = config_def(key)
                    entries.append((key, value, synonyms, d.type if d is not None else None, False))
            elif res.resource_type == BROKER:
                # Kafka's allConfigs: every key it defines, those Odradek adds, and the ones set
                # in server.properties or dynamically (listener.name.<l>.ssl.*, ...)
                _check_broker(ctx, res.resource_name)
                values: dict[str, Any] = {k: c.default for k, c in KAFKA_BROKER_CONFIGS.items()}
                values.update({k: v for k, v in sources.static.items() if k not in CONFIGS})
                values.update({k: _text(v) for k, v in ctx.server.config.values.items()})
                for key in (*sources.dynamic_default, *sources.dynamic):
                    values.setdefault(key, None)
                for key, value in sorted(values.items()):
                    synonyms = broker_key_synonyms(key, sources.dynamic, sources.static, sources.defaults,
                                                   sources.dynamic_default)
                    dynamic = sources.dynamic.get(key, sources.dynamic_default.get(key))
                    if dynamic is not None:
                        value = dynamic
                    if not synonyms and dynamic is not None:  # a key broker_key_synonyms does not know
                        synonyms = [Synonym(key, value, DYNAMIC_BROKER_CONFIG if key in sources.dynamic
                                            else DYNAMIC_DEFAULT_BROKER_CONFIG)]
                    d = config_def(key)
                    entries.append((key, value, synonyms, d.type if d is not None else None, _read_only(key)))
            else:
                raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
            for key, value, synonyms, kind, read_only in entries:
                if wanted is not None and key not in wanted:
                    continue
                sensitive = kind == "password"  # described without its value, as Kafka does
                result.configs.append(
                    dcr.DescribeConfigsResourceResult(
                        name=key, value=None if sensitive else value, read_only=read_only,
                        config_source=source_of(synonyms), is_sensitive=sensitive,
                        synonyms=[dcr.DescribeConfigsSynonym(name=s.name, value=None if sensitive else s.value,
                                                             source=s.source)
                                  for s in synonyms] if req.include_synonyms else [],
                        config_type=CONFIG_TYPES.get(kind or "", UNKNOWN_TYPE),
                        documentation=_documentation(key, res.resource_type) if req.include_documentation else None,
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


# Kafka's DynamicConfig.Broker keys that are not KafkaConfig's (so not in its describe table)
_DYNAMIC_ONLY = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


def _read_only(key: str) -> bool:
    """DescribeConfigs' read_only, as Kafka's ConfigHelper: a key Kafka cannot change without a
    restart. Odradek's own keys are not acted on dynamically either (only stored)."""
    if key in KAFKA_BROKER_CONFIGS:
        return kafka_read_only(key)
    return key not in _DYNAMIC_ONLY and not key.startswith(LISTENER_PREFIX)


def _resource(name: str) -> str:
    return f"ConfigResource(type=BROKER, name='{name}')"


async def _apply_broker(ctx: RequestContext, name: str, configs: dict[str, str], validate_only: bool,
                        changed: list[str] | None = None) -> None:
    """`configs`: the resource's whole new set; `changed`: the keys the request sets (default:
    all), which Kafka's rules for dynamic keys are checked on -- the others were checked when
    they were stored (and a single node's cluster default shares the broker's own set)."""
    _check_broker(ctx, name)
    invalid = validate_dynamic(list(configs) if changed is None else changed, per_broker=name != "")
    if invalid:  # DynamicBrokerConfig.validateConfigs, answered as ZkAdminManager answers a ConfigException
        raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, f"Invalid config value for resource {_resource(name)}: "
                                 f"{invalid}")
    for key, value in configs.items():
        d = config_def(key)
        if d is None:
            raise KafkaProtocolError(ErrorCode.INVALID_CONFIG, f"Unknown broker config {key}")
        try:
            parse_value(d, value)
        except ConfigError as e:
            raise KafkaProtocolError(ErrorCode.INVALID_CONFIG, str(e)) from None
        if d.type == "password" and key not in ctx.server.metadata_cache.broker_configs:
            # Kafka keeps dynamic passwords encrypted with password.encoder.secret, which Odradek
            # does not have: they stay in server.properties
            raise KafkaProtocolError(ErrorCode.INVALID_CONFIG, f"Password config {key} cannot be set dynamically: "
                                     "Odradek has no password.encoder.secret; set it in server.properties")
    tls = ctx.server.tls
    if name != "" and tls is not None:
        # the new stores must load before they are stored (Kafka validates the SslFactory)
        try:
            await tls.validate({**ctx.server.config.originals, **configs})
        except ConfigError as e:
            raise KafkaProtocolError(ErrorCode.INVALID_CONFIG, f"Validation of dynamic config update of "
                                     f"SSLFactory failed: {e}") from None
    if not validate_only:
        ctx.server.controller.set_broker_configs(configs, cluster_default=name == "")


@api(33, 0, 2)
async def alter(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    responses = []
    for res in req.resources:
        out = acr.AlterConfigsResourceResponse(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name
        )
        try:
            _authorize(ctx, res.resource_type, res.resource_name, AclOperation.ALTER_CONFIGS)
            configs = {c.name: c.value for c in res.configs if c.value is not None}
            if res.resource_type == TOPIC:
                _apply_topic(ctx, res.resource_name, configs, req.validate_only)
            elif res.resource_type == BROKER:
                await _apply_broker(ctx, res.resource_name, configs, req.validate_only)
            else:
                raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}")
        except KafkaProtocolError as e:
            out.error_code, out.error_message = e.code, e.message
        responses.append(out)
    await ctx.committed(responses)  # durable and hosted before the client is told
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


def _check_incremental_shape(res: Any, resource_counts: Counter[tuple[int, str]]) -> None:
    if resource_counts[(res.resource_type, res.resource_name)] > 1:
        raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
    if len({c.name for c in res.configs}) < len(res.configs):
        raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    null_updates = [c.name for c in res.configs if c.config_operation != DELETE and c.value is None]
    if null_updates:
        raise KafkaProtocolError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(null_updates))


async def _broker_overrides(ctx: RequestContext, name: str, cached: dict[str, str]) -> dict[str, str]:
    """The dynamic configs an IncrementalAlterConfigs of broker resource `name` starts from:
    ZooKeeper's (`<default>` for ""), else the metadata's."""
    repository = ctx.server.config_repository
    if repository is None:
        return dict(cached)
    entity = DEFAULT_ENTITY if name == "" else name
    return await _read(repository.broker_config(entity), f"broker {entity}")


@api(44, 0, 1)
async def incremental_alter(ctx: RequestContext, req: IncrementalAlterConfigsRequest) -> IncrementalAlterConfigsResponse:
    responses = []
    image = ctx.server.metadata_cache.image
    resource_counts = Counter((res.resource_type, res.resource_name) for res in req.resources)
    for res in req.resources:
        out = iacr.AlterConfigsResourceResponse(
            error_code=0, error_message=None, resource_type=res.resource_type, resource_name=res.resource_name
        )
        try:
            _check_incremental_shape(res, resource_counts)
            _authorize(ctx, res.resource_type, res.resource_name, AclOperation.ALTER_CONFIGS)
            if res.resource_type == TOPIC:
                current = await _topic_overrides(ctx, res.resource_name)
                effective = LogConfig.from_props(current, _topic_defaults(ctx)).to_props()
            elif res.resource_type == BROKER:
                _check_broker(ctx, res.resource_name)
                current = await _broker_overrides(ctx, res.resource_name, image.broker_configs)
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
                await _apply_broker(ctx, res.resource_name, current, req.validate_only,
                                    [c.name for c in res.configs if c.config_operation != DELETE])
        except KafkaProtocolError as e:
            out.error_code, out.error_message = e.code, e.message
        responses.append(out)
    await ctx.committed(responses)  # durable and hosted before the client is told
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
