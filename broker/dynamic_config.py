"""What a ZooKeeper-mode broker does with the config overrides ZooKeeper holds: Kafka 3.9's
config handlers (core/src/main/scala/kafka/server/DynamicConfigManager.scala: TopicConfigHandler,
BrokerConfigHandler) and the log side of DynamicBrokerConfig / DynamicLogConfig.
controller.zk.config_manager.ZkConfigManager calls them at start-up for every entity and then for
every /config/changes notification, each time with the entity's whole override set.

* Topics (`/config/topics/<t>`): the overrides on top of the broker's current log defaults become
  the LogConfig of every log of the topic in the LogManager -- hosted or only loaded, as Kafka's
  LogManager.updateTopicConfig -- so retention, segment size and age, max.message.bytes,
  cleanup.policy, min.insync.replicas, ... change at once. A value the LogConfig refuses (a
  znode written by hand) fails the notification with an error line and changes nothing.
* Brokers (`/config/brokers/<default>` for the cluster, `/config/brokers/<id>` for one broker;
  other brokers' ids are ignored): this broker's dynamic configs are its server.properties
  overlaid by the cluster default, overlaid by its own (DynamicBrokerConfig's precedence). They
  go into the MetadataCache (DescribeConfigs answers them with the sources Kafka gives,
  DYNAMIC_BROKER_CONFIG and DYNAMIC_DEFAULT_BROKER_CONFIG), and the topic-config defaults they
  imply (`log.retention.ms` -> `retention.ms`, `message.max.bytes` -> `max.message.bytes`, ...)
  become the log defaults: of logs created from now on and of every log, under its topic's own
  overrides (DynamicLogConfig.updateLogsConfig). `leader.replication.throttled.rate` and
  `follower.replication.throttled.rate` bound the ReplicaManager's replication throttles
  (BrokerConfigHandler's quotaManagers.leader/follower.updateQuota). The SSL listeners reload
  their keystore and truststore when `listener.name.<l>.ssl.keystore.*` / `ssl.truststore.*`
  (or the unprefixed keys) change (broker.tls.listeners). Other dynamic broker keys are stored and
  described but not applied while the broker runs (Kafka reconfigures thread pools, listeners
  and the cleaner; Odradek has no thread pools and reads those keys at start-up only). A key
  with an invalid value is left out with a warning (DynamicBrokerConfig.removeInvalidConfigs).
* Users (`/config/users/<user>`): the SCRAM credentials (`SCRAM-SHA-256` / `SCRAM-SHA-512`) go
  into the CredentialCache SASL/SCRAM checks (broker.sasl.scram).
* Clients, users, IPs (quotas): accepted and ignored with a warning; Odradek enforces no quotas.

Ordering with LeaderAndIsr: a log the controller's LeaderAndIsr creates takes its topic's
overrides read from ZooKeeper (TopicConfigHandler.topic_config is the ReplicaManager's
topic_config_source). Applying a change takes the ReplicaManager's state-change lock, which a
LeaderAndIsr holds from that read until its logs exist, so a change read after a LeaderAndIsr's
read is applied to the logs it created (Kafka re-reads the config of a log that was initializing
when its topic's config changed, LogManager.finishedInitializingLog).

Who may call: the event loop.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from broker.config import CONFIGS, ConfigError, KafkaConfig, parse_value
from broker.quota.quotas import ClientQuotas
from broker.replication_quota import UNLIMITED
from broker.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from broker.sasl.scram import CredentialCache
from broker.security.sanitizer import desanitize
from storage.config import LogConfig

if TYPE_CHECKING:
    from broker.metadata_cache import MetadataCache
    from broker.replica_manager import ReplicaManager

__all__ = [
    "DEFAULT_ENTITY",
    "BrokerConfigHandler",
    "ConfigRepository",
    "IgnoredConfigHandler",
    "TopicConfigHandler",
    "UserConfigHandler",
    "dynamic_config_handlers",
]

log = logging.getLogger("kafka.server.DynamicConfigManager")

DEFAULT_ENTITY = "<default>"  # ZooKeeperInternals.DEFAULT_STRING: the cluster-wide broker entity


class ConfigRepository(Protocol):
    """Kafka's ConfigRepository as the request handlers need it in ZooKeeper mode: an entity's
    overrides as the cluster has them now (controller.zk.config_manager.ZkConfigRepository)."""

    async def topic_config(self, topic: str) -> dict[str, str]: ...

    async def broker_config(self, entity: str) -> dict[str, str]:
        """`entity`: a broker id, or DEFAULT_ENTITY."""


class TopicConfigHandler:
    """See the module docstring."""

    def __init__(self, replica_manager: ReplicaManager, read_topic_config: Callable[[str], Awaitable[dict[str, str]]]) -> None:
        self.replica_manager = replica_manager
        self.read_topic_config = read_topic_config
        # the last overrides seen per topic: a change of the log defaults keeps each log's own
        self.overrides: dict[str, dict[str, str]] = {}

    async def topic_config(self, topic: str) -> dict[str, str]:
        """The overrides of `topic` from ZooKeeper, for the logs a LeaderAndIsr creates
        (remembered, as they are what those logs run with)."""
        overrides = await self.read_topic_config(topic)
        self.overrides[topic] = overrides
        return overrides

    async def process_config_changes(self, topic: str, config: dict[str, str]) -> None:
        rm = self.replica_manager
        LogConfig.from_props(config, LogConfig.from_props(rm.topic_defaults))  # ValueError: nothing changes
        async with _state_change_lock(rm):
            self.overrides[topic] = dict(config)
            new = LogConfig.from_props(config, LogConfig.from_props(rm.topic_defaults))
            for (t, _), lg in rm.log_manager:
                if t == topic:
                    lg.update_config(new)

    def log_config(self, topic: str, defaults: LogConfig) -> LogConfig:
        return LogConfig.from_props(self.overrides.get(topic, {}), defaults)


class BrokerConfigHandler:
    """See the module docstring."""

    def __init__(self, config: KafkaConfig, metadata_cache: MetadataCache, replica_manager: ReplicaManager,
                 topics: TopicConfigHandler,
                 reconfigurables: tuple[Callable[[Mapping[str, Any]], Awaitable[None]], ...] = ()) -> None:
        self.config = config
        # told the broker's whole config at each change (the SSL listeners' certificate reload)
        self.reconfigurables = reconfigurables
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.topics = topics
        self.default_configs: dict[str, str] = {}
        self.broker_configs: dict[str, str] = {}

    async def process_config_changes(self, entity: str, config: dict[str, str]) -> None:
        if entity == DEFAULT_ENTITY:
            self.default_configs = _valid(config, entity)
        elif int(entity.strip()) == self.config.broker_id:  # another id's: not ours
            self.broker_configs = _valid(config, entity)
        else:
            return
        try:
            current = KafkaConfig({**self.config.originals, **self.default_configs, **self.broker_configs})
        except ConfigError as e:
            log.error("Dynamic broker configs of %s not applied: %s", entity, e)
            return
        for reconfigure in self.reconfigurables:
            await reconfigure(current.originals)
        rm = self.replica_manager
        dynamic = {**self.default_configs, **self.broker_configs}  # Kafka: the rates from dynamic configs only
        for quota in (rm.leader_quota, rm.follower_quota):
            quota.update_quota(int(dynamic.get(f"{quota.name}.replication.throttled.rate", UNLIMITED)))
        async with _state_change_lock(rm):
            cache = self.metadata_cache
            cache.update(dataclasses.replace(cache.image, broker_configs=dict(self.broker_configs),
                                             broker_default_configs=dict(self.default_configs)))
            defaults = current.topic_defaults()
            if defaults == rm.topic_defaults:
                return
            changed = {k: v for k, v in defaults.items() if rm.topic_defaults.get(k) != v}
            rm.topic_defaults = defaults
            log_defaults = LogConfig.from_props(defaults)
            updated = 0
            for (topic, partition), lg in rm.log_manager:
                try:
                    lg.update_config(self.topics.log_config(topic, log_defaults))
                except ValueError as e:  # the topic's overrides do not fit the new defaults
                    log.error("Log %s-%d keeps its config: %s", topic, partition, e)
                    continue
                updated += 1
            log.info("Log defaults changed by dynamic broker configs: %s (applied to %d logs)",
                     ", ".join(f"{k}={v}" for k, v in sorted(changed.items())), updated)


class QuotaConfigHandler:
    """Client and user quota overrides (Kafka's ClientIdConfigHandler / UserConfigHandler): the
    entity's whole config, `alice`, `alice/clients/c1` or `c1` (sanitized), to the quotas."""

    def __init__(self, entity_type: str, quotas: ClientQuotas) -> None:
        self.entity_type = entity_type
        self.quotas = quotas

    def process_config_changes(self, entity: str, config: dict[str, str]) -> None:
        self.quotas.process_config_changes(self.entity_type, entity, config)


class IgnoredConfigHandler:
    """IP quota overrides (connection_creation_rate): not enforced by Odradek."""

    def __init__(self, entity_type: str) -> None:
        self.entity_type = entity_type

    def process_config_changes(self, entity: str, config: dict[str, str]) -> None:
        if config:
            log.warning("Quota overrides of %s/%s are not enforced (Odradek has no IP quotas): %s",
                        self.entity_type, entity, ", ".join(sorted(config)))


class UserConfigHandler:
    """`/config/users/<user>` and `/config/users/<user>/clients/<client-id>` (Kafka's
    UserConfigHandler): a user's SCRAM credentials (`SCRAM-SHA-256` / `SCRAM-SHA-512` keys)
    replace those in the CredentialCache the SASL listeners check; the other keys are the
    user's client quotas (the same znode holds both, as in Kafka)."""

    def __init__(self, credentials: CredentialCache, quotas: ClientQuotas) -> None:
        self.credentials = credentials
        self._quotas = QuotaConfigHandler("users", quotas)

    def process_config_changes(self, entity: str, config: dict[str, str]) -> None:
        if "/clients/" not in entity:  # credentials are a user's, not a user's client's
            user = desanitize(entity)
            for mechanism in self.credentials.update_user(user, config):
                log.error("Invalid %s credential of user %s in ZooKeeper: left out", mechanism, user)
        self._quotas.process_config_changes(entity, {k: v for k, v in config.items() if k not in SCRAM_MECHANISMS})


def dynamic_config_handlers(config: KafkaConfig, metadata_cache: MetadataCache, replica_manager: ReplicaManager,
                            repository: ConfigRepository, quotas: ClientQuotas,
                            reconfigurables: tuple[Callable[[Mapping[str, Any]], Awaitable[None]], ...] = (),
                            credentials: CredentialCache | None = None,
                            ) -> dict[str, Any]:
    """The ZkConfigManager's handlers by entity type (KafkaServer's dynamicConfigHandlers); the
    ReplicaManager's new logs take their topic's overrides through the topic handler."""
    topics = TopicConfigHandler(replica_manager, repository.topic_config)
    replica_manager.topic_config_source = topics.topic_config
    return {
        "topics": topics,
        "clients": QuotaConfigHandler("clients", quotas),
        "users": UserConfigHandler(credentials if credentials is not None else CredentialCache(), quotas),
        "brokers": BrokerConfigHandler(config, metadata_cache, replica_manager, topics, reconfigurables),
        "ips": IgnoredConfigHandler("ips"),
    }


def _valid(config: Mapping[str, str], entity: str) -> dict[str, str]:
    """The entity's configs without the values that do not parse (each named in a warning)."""
    out: dict[str, str] = {}
    for key, value in config.items():
        d = CONFIGS.get(key)
        if d is not None:
            try:
                parse_value(d, value)
            except ConfigError as e:
                log.warning("Dynamic config update invalid for %s, ignoring %s: %s", entity, key, e)
                continue
        out[key] = value
    return out


def _state_change_lock(rm: ReplicaManager) -> Any:
    """The lock the controller's requests hold while they change what this broker hosts (see
    the module docstring: a LeaderAndIsr's new logs and a config change are applied in order)."""
    return rm._state_change_lock
