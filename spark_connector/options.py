"""Reader and writer options, parsed and checked once on the driver (pure: no Spark, no I/O).

The option names are those of Spark's kafka source, so a job moves between `format("kafka")` and
`format("odradek")` by changing the format string. Options are refused rather than ignored when
unknown: a misspelt `startingOffset` that silently reads from `latest` is a data bug found weeks
later. Spark hands options over lower-cased (a case-insensitive map), so matching is on lower case
and messages use the documented spelling.

`kafka.<java.config.name>` options are passed to the kafka-python client under its own name
(`kafka.fetch.max.bytes` -> `fetch_max_bytes`), typed after kafka-python's default for that
setting. Settings the data source must own (consumer group, offset reset, (de)serializers) are
refused with the reason, as Spark's kafka source refuses them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from spark_connector.errors import OptionError
from spark_connector.offsets import (
    EARLIEST,
    LATEST,
    PartitionOffsets,
    TopicPartition,
    parse_assign,
    parse_partition_offsets,
)

SOURCE_OPTIONS = (
    "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
    "startingTimestamp", "startingOffsetsByTimestampStrategy", "maxOffsetsPerTrigger",
    "minPartitions", "failOnDataLoss", "includeHeaders", "kafkaConsumer.pollTimeoutMs",
)
SINK_OPTIONS = ("topic",)
#: Options Spark itself adds to the map (streaming sinks get their checkpoint location).
SPARK_OPTIONS = ("checkpointLocation",)

BOOTSTRAP = "kafka.bootstrap.servers"

#: kafka-python settings the data source owns, with the reason given to the user.
_MANAGED_CONSUMER = {
    "group_id": "the odradek source assigns partitions itself and uses no consumer group",
    "group_instance_id": "the odradek source uses no consumer group",
    "enable_auto_commit": "offsets are tracked in Spark's checkpoint, not committed to Kafka",
    "auto_offset_reset": "use the 'startingOffsets' option instead",
    "key_deserializer": "keys are always returned as binary; cast them in the query",
    "value_deserializer": "values are always returned as binary; cast them in the query",
}
_MANAGED_PRODUCER = {
    "key_serializer": "keys are written from the 'key' column (string or binary)",
    "value_serializer": "values are written from the 'value' column (string or binary)",
    "transactional_id": "the odradek sink does not write in transactions (neither does Spark's kafka sink)",
}
#: Java client keys mapped through clients/client_properties.py (TLS and SASL).
_SECURITY_PREFIXES = ("security.", "ssl.", "sasl.")


@dataclass(frozen=True)
class Subscription:
    """Which partitions to read: a topic list, a regex over topic names, or fixed partitions."""

    kind: Literal["subscribe", "subscribePattern", "assign"]
    topics: tuple[str, ...] = ()
    pattern: str = ""
    partitions: tuple[TopicPartition, ...] = ()

    def matches(self, topic: str) -> bool:
        if self.kind == "subscribe":
            return topic in self.topics
        if self.kind == "subscribePattern":
            return re.fullmatch(self.pattern, topic) is not None
        return any(t == topic for t, _ in self.partitions)


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends before it is resolved against the broker: `earliest`, `latest`,
    explicit offsets (which may hold the -1/-2 sentinels), or the first offset at a timestamp."""

    kind: Literal["earliest", "latest", "specific", "timestamp"]
    offsets: PartitionOffsets = field(default_factory=dict)
    timestamp_ms: int = 0


@dataclass(frozen=True)
class ReadOptions:
    bootstrap_servers: tuple[str, ...]
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None
    timestamp_strategy: Literal["error", "latest"]
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    fail_on_data_loss: bool
    include_headers: bool
    poll_timeout_ms: int
    #: kafka-python KafkaConsumer settings from `kafka.*` options (bootstrap excluded).
    consumer_config: dict[str, Any]


@dataclass(frozen=True)
class WriteOptions:
    bootstrap_servers: tuple[str, ...]
    topic: str | None
    #: kafka-python KafkaProducer settings from `kafka.*` options (bootstrap excluded).
    producer_config: dict[str, Any]


def parse_read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Check and type the options of `spark.read` (streaming=False) or `spark.readStream`."""
    opts = _lower(options)
    mode = "streaming read" if streaming else "batch read"
    kafka = _check_names(opts, SOURCE_OPTIONS, mode)
    subscription = _parse_subscription(opts)

    if "startingtimestamp" in opts:
        starting = OffsetSpec("timestamp", timestamp_ms=_parse_int(opts, "startingTimestamp", 0))
    else:
        starting = _parse_offset_spec(opts, "startingOffsets", "latest" if streaming else "earliest")
    if streaming:
        if "endingoffsets" in opts:
            raise OptionError("option 'endingOffsets' is not valid in streaming queries")
        ending = None
    else:
        ending = _parse_offset_spec(opts, "endingOffsets", "latest")
        if starting.kind == "latest" or LATEST in starting.offsets.values():
            raise OptionError("option 'startingOffsets': latest is not allowed for batch queries "
                              "(the read would be empty); use earliest or explicit offsets")
        if ending.kind == "earliest" or EARLIEST in ending.offsets.values():
            raise OptionError("option 'endingOffsets': earliest is not allowed for batch queries "
                              "(the read would be empty); use latest or explicit offsets")
    for spec, name in ((starting, "startingOffsets"), (ending, "endingOffsets")):
        if spec is not None and subscription.kind == "assign" and spec.kind == "specific":
            extra = set(spec.offsets) - set(subscription.partitions)
            if extra:
                raise OptionError(f"option '{name}' names partitions that are not assigned: "
                                  f"{_tps(extra)}")

    strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError("option 'startingOffsetsByTimestampStrategy' must be 'error' or "
                          f"'latest', got {strategy!r}")

    return ReadOptions(
        bootstrap_servers=_bootstrap(opts),
        subscription=subscription,
        starting=starting,
        ending=ending,
        timestamp_strategy=strategy,  # type: ignore[arg-type]
        max_offsets_per_trigger=_parse_int(opts, "maxOffsetsPerTrigger", 1, optional=True),
        min_partitions=_parse_int(opts, "minPartitions", 1, optional=True),
        fail_on_data_loss=_parse_bool(opts, "failOnDataLoss", True),
        include_headers=_parse_bool(opts, "includeHeaders", False),
        poll_timeout_ms=_parse_int(opts, "kafkaConsumer.pollTimeoutMs", 1, default=120_000),
        consumer_config=kafka_client_config(kafka, "consumer"),
    )


def parse_write_options(options: Mapping[str, str], *, streaming: bool) -> WriteOptions:
    """Check and type the options of `df.write` (streaming=False) or `df.writeStream`."""
    opts = _lower(options)
    kafka = _check_names(opts, SINK_OPTIONS, "streaming write" if streaming else "batch write")
    topic = opts.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option 'topic' is empty")
    return WriteOptions(
        bootstrap_servers=_bootstrap(opts),
        topic=topic,
        producer_config=kafka_client_config(kafka, "producer"),
    )


def kafka_client_config(kafka_options: Mapping[str, str],
                        role: Literal["consumer", "producer"]) -> dict[str, Any]:
    """`{"fetch.max.bytes": "1048576"}` -> `{"fetch_max_bytes": 1048576}` for kafka-python,
    refusing names kafka-python does not know and settings the data source owns. The security
    keys of a Java client (`security.protocol`, `ssl.*`, `sasl.mechanism`, `sasl.jaas.config`)
    are mapped as the CLI's --command-config maps them (clients/client_properties.py), so the
    options of Spark's kafka source work unchanged; the TLS context they make pickles as its
    options and is rebuilt on each executor."""
    from kafka import KafkaConsumer, KafkaProducer

    from clients.client_properties import (
        ClientConfigError,
        ClientProperties,
        kafka_python_name,
        typed_setting,
    )

    defaults = (KafkaConsumer if role == "consumer" else KafkaProducer).DEFAULT_CONFIG
    managed = _MANAGED_CONSUMER if role == "consumer" else _MANAGED_PRODUCER
    out: dict[str, Any] = {}
    security: dict[str, str] = {}
    try:
        for java_name, raw in kafka_options.items():
            if java_name.startswith(_SECURITY_PREFIXES):
                security[java_name] = raw
                continue
            name = kafka_python_name(java_name)
            option = f"kafka.{java_name}"
            if name in managed:
                raise OptionError(f"option '{option}' is not supported: {managed[name]}")
            if name not in defaults:
                raise OptionError(f"option '{option}' is not a kafka-python {role} setting "
                                  f"(kafka.* options are passed to kafka-python as '{name}')")
            out[name] = typed_setting(java_name, raw, defaults[name])
        out |= ClientProperties(security, origin="kafka.* options").security_kafka_python()
    except ClientConfigError as e:
        raise OptionError(f"option 'kafka.{e.key}': {e.reason}" if e.key else f"kafka.* options: {e}") from None
    level = out.get("isolation_level")
    if level is not None and level not in ("read_uncommitted", "read_committed"):
        raise OptionError("option 'kafka.isolation.level' must be read_uncommitted or "
                          f"read_committed, got {level!r}")
    return out


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _check_names(opts: Mapping[str, str], allowed: tuple[str, ...], mode: str) -> dict[str, str]:
    """Refuse unknown options; return the `kafka.*` ones with the prefix stripped."""
    names = {n.lower(): n for n in (*allowed, *SPARK_OPTIONS)}
    other = {n.lower(): n for n in (*SOURCE_OPTIONS, *SINK_OPTIONS)}
    kafka: dict[str, str] = {}
    for key, value in opts.items():
        if key.startswith("kafka."):
            if key != BOOTSTRAP:
                kafka[key[len("kafka."):]] = value
        elif key in other and key not in names:
            raise OptionError(f"option '{other[key]}' does not apply to a {mode}")
        elif key not in names:
            known = ", ".join(sorted([*allowed, "kafka.*"], key=str.lower))
            hint = (f" (a Kafka client setting takes the 'kafka.' prefix: 'kafka.{key}')"
                    if _is_client_setting(key) else "")
            raise OptionError(f"unknown option '{key}' for the odradek {mode}{hint}; known "
                              f"options: {known}")
    return kafka


def _is_client_setting(name: str) -> bool:
    """Whether `name` (Java spelling, e.g. isolation.level) is a kafka-python client setting, so
    an option given without its `kafka.` prefix is named back with it instead of just refused."""
    from kafka import KafkaConsumer, KafkaProducer

    python_name = name.replace(".", "_")
    return "." in name and (name.startswith(_SECURITY_PREFIXES) or python_name in KafkaConsumer.DEFAULT_CONFIG
                            or python_name in KafkaProducer.DEFAULT_CONFIG)


def _bootstrap(opts: Mapping[str, str]) -> tuple[str, ...]:
    servers = tuple(s.strip() for s in opts.get(BOOTSTRAP, "").split(",") if s.strip())
    if not servers:
        raise OptionError(f"option '{BOOTSTRAP}' must be specified (e.g. 127.0.0.1:9092)")
    return servers


def _parse_subscription(opts: Mapping[str, str]) -> Subscription:
    given = [n for n in ("subscribe", "subscribePattern", "assign") if n.lower() in opts]
    if len(given) != 1:
        what = "Only one" if given else "One"
        raise OptionError(f"{what} of the options 'subscribe', 'subscribePattern', 'assign' "
                          f"must be specified" + (f" (got {', '.join(given)})" if given else ""))
    kind = given[0]
    value = opts[kind.lower()]
    if kind == "subscribe":
        topics = tuple(dict.fromkeys(t.strip() for t in value.split(",") if t.strip()))
        if not topics:
            raise OptionError(f"option 'subscribe': no topics in {value!r}")
        return Subscription("subscribe", topics=topics)
    if kind == "subscribePattern":
        if not value.strip():
            raise OptionError("option 'subscribePattern' is empty")
        try:
            re.compile(value)
        except re.error as e:
            raise OptionError(f"option 'subscribePattern': invalid regex {value!r} ({e})") from None
        return Subscription("subscribePattern", pattern=value)
    return Subscription("assign", partitions=tuple(parse_assign(value)))


def _parse_offset_spec(opts: Mapping[str, str], name: str, default: str) -> OffsetSpec:
    value = opts.get(name.lower(), default).strip()
    if value.lower() in ("earliest", "latest"):
        return OffsetSpec(value.lower())  # type: ignore[arg-type]
    if not value.startswith("{"):
        raise OptionError(f"option '{name}' must be 'earliest', 'latest' or per-partition JSON "
                          f"such as {{\"topic\": {{\"0\": 23}}}}, got {value!r}")
    return OffsetSpec("specific", offsets=parse_partition_offsets(value, name))


def _parse_bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    return default if raw is None else _bool(f"option '{name}'", raw.strip())


def _bool(what: str, text: str) -> bool:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise OptionError(f"{what} must be true or false, got {text!r}")


def _parse_int(opts: Mapping[str, str], name: str, minimum: int, *, optional: bool = False,
               default: int | None = None) -> Any:
    raw = opts.get(name.lower())
    if raw is None:
        if optional or default is not None:
            return default
        raise OptionError(f"option '{name}' must be specified")
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(f"option '{name}' must be an integer, got {raw!r}") from None
    if value < minimum:
        raise OptionError(f"option '{name}' must be at least {minimum}, got {value}")
    return value


def _tps(tps: set[TopicPartition]) -> str:
    return ", ".join(f"{t}-{p}" for t, p in sorted(tps))


def include_headers(options: Mapping[str, str]) -> bool:
    """Just `includeHeaders`, which decides the schema before the other options are checked."""
    return _parse_bool(_lower(options), "includeHeaders", False)
