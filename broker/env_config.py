"""Broker configs from environment variables, in the convention of Kafka's container images.

`odradek serve --config-env` (the Docker image's entry point) takes every `KAFKA_<KEY>` variable
as the config `<key>`, the way Confluent's cp-kafka image does, so a compose file written for
that image configures Odradek unchanged: the name after `KAFKA_` is lower-cased, `___` becomes
`-`, `__` becomes `_` and `_` becomes `.` (`KAFKA_ZOOKEEPER_CONNECT` -> `zookeeper.connect`,
`KAFKA_LISTENER_SECURITY_PROTOCOL_MAP` -> `listener.security.protocol.map`). The variables those
images read for the JVM or log4j (`KAFKA_HEAP_OPTS`, `KAFKA_OPTS`, ...) are not configs and are
left out, so an environment copied from a Kafka deployment does not fail on them.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["NOT_CONFIGS", "PREFIX", "config_key", "configs_from_env"]

PREFIX = "KAFKA_"
# Read by Kafka's start scripts or the images' launchers, never by the broker's config.
NOT_CONFIGS = frozenset({
    "KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS", "KAFKA_JMX_PORT",
    "KAFKA_JMX_HOSTNAME", "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_OPTS",
    "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_DEBUG",
})


def config_key(variable: str) -> str:
    """`KAFKA_LOG_RETENTION_MS` -> `log.retention.ms` (`___` -> `-`, `__` -> `_`, `_` -> `.`)."""
    name = variable[len(PREFIX):].lower()
    # placeholders that cannot occur in a variable name keep the longer runs apart
    name = name.replace("___", "\0").replace("__", "\1").replace("_", ".")
    return name.replace("\0", "-").replace("\1", "_")


def configs_from_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The configs that `KAFKA_*` variables of `environ` set, by config key."""
    return {
        config_key(name): value
        for name, value in environ.items()
        if name.startswith(PREFIX) and len(name) > len(PREFIX) and name not in NOT_CONFIGS
    }
