"""Config sources, synonyms and types for DescribeConfigs, as Kafka's ConfigHelper answers them.

A config's value can come from several places; Kafka lists them, highest precedence first, as the
config's *synonyms* (KIP-226): the topic override (DYNAMIC_TOPIC_CONFIG), then for each broker key
that sets the same thing (`retention.ms` <- `log.retention.ms`, `log.retention.minutes`,
`log.retention.hours`) a dynamic broker value, a server.properties value, and the built-in
default. The answer's `config_source` is the first synonym's source. Kafka then drops the
synonyms before the first one named like the primary broker key (`dropWhile(name != primary)` in
ConfigHelper.configSynonyms), which is why `retention.ms` has no synonyms unless
`log.retention.ms` itself is set: clients see exactly that, so we keep it.

Pure functions over plain mappings: the handler passes the broker's dynamic, static and default
values in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 3, 4, 5
# DescribeConfigsResponse.ConfigType, by ConfigDef type name
CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
                "class": 8, "password": 9}
UNKNOWN_TYPE = 0

_LOG, _CLEANER = "log.", "log.cleaner."
# Kafka's ServerTopicConfigSynonyms: topic key -> the broker keys that give its default, primary first.
TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {
    "segment.bytes": (_LOG + "segment.bytes",),
    "segment.ms": (_LOG + "roll.ms", _LOG + "roll.hours"),
    "segment.jitter.ms": (_LOG + "roll.jitter.ms", _LOG + "roll.jitter.hours"),
    "segment.index.bytes": (_LOG + "index.size.max.bytes",),
    "flush.messages": (_LOG + "flush.interval.messages",),
    "flush.ms": (_LOG + "flush.interval.ms", _LOG + "flush.scheduler.interval.ms"),
    "retention.bytes": (_LOG + "retention.bytes",),
    "retention.ms": (_LOG + "retention.ms", _LOG + "retention.minutes", _LOG + "retention.hours"),
    "max.message.bytes": ("message.max.bytes",),
    "index.interval.bytes": (_LOG + "index.interval.bytes",),
    "delete.retention.ms": (_CLEANER + "delete.retention.ms",),
    "min.compaction.lag.ms": (_CLEANER + "min.compaction.lag.ms",),
    "max.compaction.lag.ms": (_CLEANER + "max.compaction.lag.ms",),
    "file.delete.delay.ms": (_LOG + "segment.delete.delay.ms",),
    "min.cleanable.dirty.ratio": (_CLEANER + "min.cleanable.ratio",),
    "cleanup.policy": (_LOG + "cleanup.policy",),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "min.insync.replicas": ("min.insync.replicas",),
    "compression.type": ("compression.type",),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.zstd.level": ("compression.zstd.level",),
    "preallocate": (_LOG + "preallocate",),
    "message.format.version": (_LOG + "message.format.version",),
    "message.timestamp.type": (_LOG + "message.timestamp.type",),
    "message.timestamp.difference.max.ms": (_LOG + "message.timestamp.difference.max.ms",),
    "message.timestamp.before.max.ms": (_LOG + "message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": (_LOG + "message.timestamp.after.max.ms",),
    "message.downconversion.enable": (_LOG + "message.downconversion.enable",),
    "local.retention.ms": (_LOG + "local.retention.ms",),
    "local.retention.bytes": (_LOG + "local.retention.bytes",),
}
# Broker keys that are spellings of one setting (DynamicBrokerConfig.brokerConfigSynonyms).
_BROKER_GROUPS = (
    (_LOG + "retention.ms", _LOG + "retention.minutes", _LOG + "retention.hours"),
    (_LOG + "roll.ms", _LOG + "roll.hours"),
    (_LOG + "roll.jitter.ms", _LOG + "roll.jitter.hours"),
)
_FLUSH = (_LOG + "flush.interval.ms", _LOG + "flush.scheduler.interval.ms")


def broker_synonyms(key: str) -> tuple[str, ...]:
    """The broker keys that set `key`'s value, highest precedence first."""
    for group in _BROKER_GROUPS:
        if key in group:
            return group
    return _FLUSH if key == _FLUSH[0] else (key,)


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: int


def broker_key_synonyms(primary: str, dynamic: Mapping[str, str], static: Mapping[str, str],
                        defaults: Mapping[str, str], dynamic_default: Mapping[str, str] | None = None,
                        ) -> list[Synonym]:
    """Kafka's configSynonyms(primary, brokerSynonyms(primary)): the broker keys' values from each
    source in precedence order (this broker's dynamic value, the cluster-wide dynamic default of
    ZooKeeper mode, server.properties, the built-in default), then everything before the first
    entry named `primary` dropped."""
    keys = broker_synonyms(primary)
    found = [Synonym(k, values[k], source)
             for values, source in ((dynamic, DYNAMIC_BROKER_CONFIG),
                                    (dynamic_default or {}, DYNAMIC_DEFAULT_BROKER_CONFIG),
                                    (static, STATIC_BROKER_CONFIG), (defaults, DEFAULT_CONFIG))
             for k in keys if k in values]
    for i, s in enumerate(found):
        if s.name == primary:
            return found[i:]
    return []


def topic_synonyms(key: str, value: str | None, overrides: Mapping[str, str], dynamic: Mapping[str, str],
                   static: Mapping[str, str], defaults: Mapping[str, str],
                   dynamic_default: Mapping[str, str] | None = None) -> list[Synonym]:
    """The synonyms of topic config `key` (its override first), as createTopicConfigEntry."""
    brokers = TOPIC_SYNONYMS.get(key)
    found = broker_key_synonyms(brokers[0], dynamic, static, defaults, dynamic_default) if brokers else []
    if key in overrides:
        found.insert(0, Synonym(key, value, DYNAMIC_TOPIC_CONFIG))
    return found


def source_of(synonyms: list[Synonym]) -> int:
    return synonyms[0].source if synonyms else DEFAULT_CONFIG
