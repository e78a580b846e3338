"""LogConfig: the topic-level configs that govern one partition's log, with Kafka's keys and defaults.

Kafka's ``LogConfig`` (``storage/internals/log/LogConfig.java``) and ``TopicConfig`` key names;
defaults are Kafka 3.9's. Python attributes are the keys in snake_case (``segment.bytes`` ->
``segment_bytes``). Parsing follows Kafka's ``ConfigDef``: values are trimmed; ints are 32-bit,
longs 64-bit, decimal only; booleans are ``true``/``false`` (any case); lists are comma separated.
Invalid values raise ``ValueError`` with Kafka's wording, naming the key:
``Invalid value x for configuration segment.bytes: Not a number of type INT``. Unknown keys raise
``ValueError("Unknown topic config name: k")`` as Kafka's ``LogConfig.validateNames`` does.

Invariants: a LogConfig is immutable and always valid (every constructor path validates);
``min_compaction_lag_ms <= max_compaction_lag_ms``.

Who may call: anyone; it is a value.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["INT_MAX", "LONG_MAX", "LogConfig"]

LONG_MAX = 9223372036854775807
LONG_MIN = -9223372036854775808
INT_MAX = 2147483647
INT_MIN = -2147483648

_CODECS = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
_INTEGER = re.compile(r"[+-]?[0-9]+\Z")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Topic-level log configuration (see the module docstring). Build with :meth:`from_props`
    (Kafka key names, strings) or :meth:`overrides`; the constructor validates too."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    file_delete_delay_ms: int = 60000
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    message_timestamp_difference_max_ms: int = LONG_MAX  # deprecated since Kafka 3.6
    cleanup_policy: tuple[str, ...] = ("delete",)
    min_insync_replicas: int = 1
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    preallocate: bool = False
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    message_downconversion_enable: bool = True
    message_format_version: str = "3.0-IV1"  # deprecated, accepted and ignored
    leader_replication_throttled_replicas: tuple[str, ...] = ()  # broker.replication_quota
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    remote_storage_enable: bool = False  # tiered storage (KIP-405/950): accepted, not implemented
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2

    def __post_init__(self) -> None:
        for f in fields(self):
            spec = _SPECS_BY_ATTR[f.name]
            spec.check(getattr(self, f.name))
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ValueError(
                f"conflict topic config setting min.compaction.lag.ms ({self.min_compaction_lag_ms}) "
                f"> max.compaction.lag.ms ({self.max_compaction_lag_ms})"
            )

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def from_props(
        cls, props: Mapping[str, Any], defaults: LogConfig | None = None
    ) -> LogConfig:
        """``defaults`` (Kafka's defaults when None) with ``props`` (Kafka key names) applied."""
        return (defaults if defaults is not None else _DEFAULT).overrides(props)

    def overrides(self, props: Mapping[str, Any] | None = None, /, **changes: Any) -> LogConfig:
        """A copy with ``props`` (Kafka key names, string values as in server.properties or a
        CreateTopics request) and ``changes`` (attribute names, Python values) applied. Both are
        parsed and validated the same way; an invalid value raises ValueError naming the key."""
        values: dict[str, Any] = {}
        for key, raw in (props or {}).items():
            spec = _SPECS.get(key)
            if spec is None:
                raise ValueError(f"Unknown topic config name: {key}")
            values[spec.attr] = spec.parse(raw)
        for attr, value in changes.items():
            spec = _SPECS_BY_ATTR.get(attr)
            if spec is None:
                raise TypeError(f"LogConfig has no attribute {attr!r}")
            values[attr] = spec.parse(spec.format(value) if not isinstance(value, str) else value)
        if not values:
            return self
        current = {f.name: getattr(self, f.name) for f in fields(self)}
        current.update(values)
        return LogConfig(**current)

    def to_props(self) -> dict[str, str]:
        """Every config under its Kafka key, formatted as Kafka prints it."""
        return {spec.key: spec.format(getattr(self, spec.attr)) for spec in _SPEC_LIST}

    # -- derived values ------------------------------------------------------------------------

    @property
    def max_index_size(self) -> int:
        """segment.index.bytes (Kafka's ``maxIndexSize``)."""
        return self.segment_index_bytes

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        """Whether the broker stamps batches with LogAppendTime."""
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compression_codec(self) -> int | None:
        """Target codec id (0 none .. 4 zstd), or None for ``producer`` (keep the producer's)."""
        return _CODECS.get(self.compression_type)

    @property
    def timestamp_before_max_ms(self) -> int:
        """The effective before-bound: before.max.ms, else the deprecated difference.max.ms."""
        v = self.message_timestamp_before_max_ms
        return v if v != LONG_MAX else self.message_timestamp_difference_max_ms

    @property
    def timestamp_after_max_ms(self) -> int:
        """The effective after-bound: after.max.ms, else the deprecated difference.max.ms."""
        v = self.message_timestamp_after_max_ms
        return v if v != LONG_MAX else self.message_timestamp_difference_max_ms

    def random_segment_jitter(self, rng: random.Random | None = None) -> int:
        """A roll jitter for a new segment: 0, or uniform in [0, min(segment.jitter.ms,
        segment.ms)) as Kafka's ``randomSegmentJitter``."""
        if self.segment_jitter_ms == 0:
            return 0
        return (rng or random).randrange(min(self.segment_jitter_ms, self.segment_ms))


# ---------------------------------------------------------------------------------------------
# key table


def _fail(key: str, value: Any, reason: str) -> ValueError:
    return ValueError(f"Invalid value {value} for configuration {key}: {reason}")


class _Spec:
    __slots__ = ("attr", "check", "format", "key", "kind", "parse")

    def __init__(
        self,
        key: str,
        kind: str,
        *,
        at_least: float | None = None,
        at_most: float | None = None,
        choices: tuple[str, ...] | None = None,
        extra: Callable[[str, Any], None] | None = None,
    ) -> None:
        self.key = key
        self.kind = kind
        self.attr = key.replace(".", "_")
        lo = at_least
        hi = at_most

        def check_range(v: Any) -> None:
            if lo is not None and v < lo:
                if hi is not None:
                    raise _fail(key, v, f"Value must be in the range [{_num(lo)}, {_num(hi)}]")
                raise _fail(key, v, f"Value must be at least {_num(lo)}")
            if hi is not None and v > hi:
                if lo is not None:
                    raise _fail(key, v, f"Value must be in the range [{_num(lo)}, {_num(hi)}]")
                raise _fail(key, v, f"Value must be no more than {_num(hi)}")
            if extra is not None:
                extra(key, v)

        parse: Callable[[Any], Any]
        check: Callable[[Any], None]
        fmt: Callable[[Any], str] = str
        if kind in ("int", "long"):
            bounds = (INT_MIN, INT_MAX) if kind == "int" else (LONG_MIN, LONG_MAX)
            type_name = "INT" if kind == "int" else "LONG"

            def check(v: Any) -> None:
                if isinstance(v, bool) or not isinstance(v, int) or not bounds[0] <= v <= bounds[1]:
                    raise _fail(key, v, f"Not a number of type {type_name}")
                check_range(v)

            def parse(raw: Any) -> int:
                text = str(raw).strip()
                if not _INTEGER.match(text):
                    raise _fail(key, raw, f"Not a number of type {type_name}")
                v = int(text)
                check(v)
                return v

        elif kind == "double":

            def check(v: Any) -> None:
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
                    raise _fail(key, v, "Not a number of type DOUBLE")
                check_range(v)

            def parse(raw: Any) -> float:
                try:
                    v = float(str(raw).strip())
                except ValueError:
                    raise _fail(key, raw, "Not a number of type DOUBLE") from None
                check(v)
                return v

        elif kind == "bool":

            def check(v: Any) -> None:
                if not isinstance(v, bool):
                    raise _fail(key, v, "Expected value to be either true or false")

            def parse(raw: Any) -> bool:
                if isinstance(raw, bool):
                    return raw
                text = str(raw).strip().lower()
                if text not in ("true", "false"):
                    raise _fail(key, raw, "Expected value to be either true or false")
                return text == "true"

            def fmt(v: Any) -> str:
                return "true" if v else "false"

        elif kind == "string":

            def check(v: Any) -> None:
                if not isinstance(v, str):
                    raise _fail(key, v, "Expected value to be a string")
                if choices is not None and v not in choices:
                    raise _fail(key, v, f"String must be one of: {', '.join(choices)}")

            def parse(raw: Any) -> str:
                v = str(raw).strip()
                check(v)
                return v

        elif kind == "list":

            def check(v: Any) -> None:
                if not isinstance(v, tuple) or not all(isinstance(x, str) for x in v):
                    raise _fail(key, v, "Expected a comma separated list")
                if choices is not None:
                    for x in v:
                        if x not in choices:
                            raise _fail(
                                key, ",".join(v), f"Invalid value {x}, must be one of {list(choices)}"
                            )
                if extra is not None:
                    extra(key, v)

            def parse(raw: Any) -> tuple[str, ...]:
                if isinstance(raw, (list, tuple)):
                    items = tuple(str(x).strip() for x in raw)
                else:
                    text = str(raw).strip()
                    items = tuple(x.strip() for x in text.split(",")) if text else ()
                check(items)
                return items

            def fmt(v: Any) -> str:
                return ",".join(v) if isinstance(v, (list, tuple)) else str(v)

        else:  # pragma: no cover - table typo
            raise AssertionError(kind)
        self.parse = parse
        self.check = check
        self.format = fmt


def _gzip_level(key: str, v: int) -> None:
    if v != -1 and not 1 <= v <= 9:
        raise _fail(key, v, "Value must be in the range [1, 9] or -1 (the codec default)")


def _throttled_replicas(key: str, v: tuple[str, ...]) -> None:
    """Kafka's ThrottledReplicaListValidator: `*`, or `partition:broker` pairs."""
    entries = [e.strip() for e in v]
    if entries == ["*"] or all(re.fullmatch(r"[0-9]+:[0-9]+", e) for e in entries):
        return
    raise _fail(key, ",".join(v), f"{key} must be the literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...")


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


_SPEC_LIST: tuple[_Spec, ...] = (
    _Spec("segment.bytes", "int", at_least=14),
    _Spec("segment.ms", "long", at_least=1),
    _Spec("segment.jitter.ms", "long", at_least=0),
    _Spec("segment.index.bytes", "int", at_least=4),
    _Spec("index.interval.bytes", "int", at_least=0),
    _Spec("retention.ms", "long", at_least=-1),
    _Spec("retention.bytes", "long"),
    _Spec("file.delete.delay.ms", "long", at_least=0),
    _Spec("flush.messages", "long", at_least=1),
    _Spec("flush.ms", "long", at_least=0),
    _Spec("max.message.bytes", "int", at_least=0),
    _Spec("message.timestamp.type", "string", choices=("CreateTime", "LogAppendTime")),
    _Spec("message.timestamp.before.max.ms", "long", at_least=0),
    _Spec("message.timestamp.after.max.ms", "long", at_least=0),
    _Spec("message.timestamp.difference.max.ms", "long", at_least=0),
    _Spec("cleanup.policy", "list", choices=("compact", "delete")),
    _Spec("min.insync.replicas", "int", at_least=1),
    _Spec("delete.retention.ms", "long", at_least=0),
    _Spec("min.compaction.lag.ms", "long", at_least=0),
    _Spec("max.compaction.lag.ms", "long", at_least=1),
    _Spec("min.cleanable.dirty.ratio", "double", at_least=0, at_most=1),
    _Spec("preallocate", "bool"),
    _Spec("unclean.leader.election.enable", "bool"),
    _Spec(
        "compression.type",
        "string",
        choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    _Spec("compression.gzip.level", "int", extra=_gzip_level),
    _Spec("compression.lz4.level", "int", at_least=1, at_most=17),
    _Spec("compression.zstd.level", "int", at_least=-131072, at_most=22),
    _Spec("message.downconversion.enable", "bool"),
    _Spec("message.format.version", "string"),
    _Spec("leader.replication.throttled.replicas", "list", extra=_throttled_replicas),
    _Spec("follower.replication.throttled.replicas", "list", extra=_throttled_replicas),
    _Spec("remote.storage.enable", "bool"),
    _Spec("remote.log.copy.disable", "bool"),
    _Spec("remote.log.delete.on.disable", "bool"),
    _Spec("local.retention.ms", "long", at_least=-2),
    _Spec("local.retention.bytes", "long", at_least=-2),
)

_SPECS: dict[str, _Spec] = {s.key: s for s in _SPEC_LIST}


def topic_config_kind(key: str) -> str | None:
    """The ConfigDef type of a topic config (int, long, double, bool, string, list), as Kafka's
    LogConfig.configType reports it; None for a key that is not a topic config."""
    spec = _SPECS.get(key)
    return spec.kind if spec else None
_SPECS_BY_ATTR: dict[str, _Spec] = {s.attr: s for s in _SPEC_LIST}


_DEFAULT = LogConfig()
