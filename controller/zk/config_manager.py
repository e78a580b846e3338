"""How a ZooKeeper-mode broker learns of config overrides: Kafka 3.9's ZkConfigManager
(core/src/main/scala/kafka/server/ZkConfigManager.scala), ZkNodeChangeNotificationListener
(kafka/common/ZkNodeChangeNotificationListener.scala) and ZkConfigRepository.

The overrides live once, in `/config/<type>/<name>` ({"version":1,"config":{...}}): topics by
name, brokers by id and `<default>` for the whole cluster. Whoever changes one (AdminZkClient,
on any broker) then creates a persistent sequential `/config/changes/config_change_<seq>`
naming the entity ({"version":2,"entity_path":"topics/t"}). Every broker watches the children of
/config/changes; for each notification with a sequence above the last one it processed it
re-reads the entity's znode and hands the whole override set to the handler of its type (a
notification is only a trigger: two quick changes may be applied as one, which is harmless).
Notifications older than `change_expiration_ms` (Kafka: 15 minutes) are deleted by whichever
broker processes notifications next.

Start-up, as Kafka's: every entity's overrides are read and applied first (a broker that was
down when a change was made learns it here; an entity whose values its handler refuses is logged
and skipped), then every notification still in /config/changes is
processed once more (the last processed sequence starts at -1), which also arms the watch. Doing
the bootstrap before the first notification keeps one order of application: a notification's
fresh read can never be overwritten by an older bootstrap read. A new ZooKeeper session (after an
expiry, whose watches are gone) re-processes the notifications, as Kafka's ZkStateChangeHandler.

Processing runs on one task: a watch firing while a pass is running queues exactly one more pass
(Kafka's queue of at most one ChangeNotification). A handler that fails is logged with the
notification and does not stop the others; a ZooKeeper error ends the pass, and the next watch or
session retries from the last sequence processed.

`ZkConfigRepository` reads an entity's overrides straight from ZooKeeper: what Kafka's
DescribeConfigs and IncrementalAlterConfigs use in ZooKeeper mode, so a change acknowledged by one
broker is what the next request to any broker sees.

Who may call: the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from controller.zk.data import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityChangeNotificationZNode,
    ConfigType,
    parse,
)
from controller.zk.kafka_zk_client import KafkaZkClient

__all__ = [
    "CHANGE_EXPIRATION_MS",
    "ConfigHandler",
    "ZkConfigManager",
    "ZkConfigRepository",
    "ZkNodeChangeNotificationListener",
    "scala_map",
]

log = logging.getLogger("kafka.server.ZkConfigManager")
listener_log = logging.getLogger("kafka.common.ZkNodeChangeNotificationListener")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's changeExpirationMs


def scala_map(config: Mapping[str, str]) -> str:
    """A config as Kafka's log lines print it (a Scala mutable map: `HashMap(k -> v, ...)`)."""
    return "HashMap(" + ", ".join(f"{k} -> {v}" for k, v in config.items()) + ")"


class ConfigHandler(Protocol):
    """Kafka's ConfigHandler: applies one entity's whole override set (its znode's `config`)."""

    def process_config_changes(self, entity: str, config: dict[str, str]) -> Awaitable[None] | None: ...


class ZkConfigRepository:
    """Kafka's ZkConfigRepository: an entity's overrides as ZooKeeper has them now ({} when the
    znode does not exist)."""

    def __init__(self, zk_client: KafkaZkClient) -> None:
        self.zk_client = zk_client

    async def topic_config(self, topic: str) -> dict[str, str]:
        return await self.zk_client.get_entity_configs(ConfigType.TOPIC, topic)

    async def broker_config(self, entity: str) -> dict[str, str]:
        """`entity`: a broker id, or `<default>` for the cluster-wide dynamic broker configs."""
        return await self.zk_client.get_entity_configs(ConfigType.BROKER, entity)


class ZkNodeChangeNotificationListener:
    """Watches the sequential children of `seq_node_root` (see the module docstring); the
    handler gets each new notification's data, in sequence order."""

    def __init__(self, zk_client: KafkaZkClient, seq_node_root: str, seq_node_prefix: str,
                 notification_handler: Callable[[bytes], Awaitable[None]], *,
                 change_expiration_ms: int = CHANGE_EXPIRATION_MS,
                 time_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000) -> None:
        self.zk_client = zk_client
        self.path = seq_node_root  # ZNodeChildChangeHandler
        self.name = f"change-notification-{seq_node_root}"  # StateChangeHandlers.zkNodeChangeListenerHandler
        self.seq_node_prefix = seq_node_prefix
        self.notification_handler = notification_handler
        self.change_expiration_ms = change_expiration_ms
        self.time_ms = time_ms
        self.last_executed_change = -1
        self._wake = asyncio.Event()  # a pass is queued (at most one, as Kafka's queue)
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.passes = 0  # completed passes (tests and tools wait on them)
        self._pass_done = asyncio.Condition()

    # -- lifecycle ----------------------------------------------------------------------------

    def init(self) -> None:
        """Register for child changes and new sessions, and queue the first pass (which arms the
        watch and processes every notification present)."""
        zk = self.zk_client.zk
        zk.register_state_change_handler(self)
        zk.register_znode_child_change_handler(self)
        self.add_change_notification()
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        self._closed = True
        zk = self.zk_client.zk
        zk.unregister_state_change_handler(self.name)
        zk.unregister_znode_child_change_handler(self.path)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    # -- ZNodeChildChangeHandler / StateChangeHandler ------------------------------------------

    def handle_child_change(self) -> None:
        self.add_change_notification()

    def before_initializing_session(self) -> None:
        return None

    def after_initializing_session(self) -> None:
        self.add_change_notification()  # the expired session's watch is gone: read and re-arm

    def add_change_notification(self) -> None:
        if not self._closed:
            self._wake.set()

    # -- processing ---------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self.process_notifications()
            async with self._pass_done:
                self.passes += 1
                self._pass_done.notify_all()

    async def wait_for_pass(self, after: int, timeout_s: float) -> None:
        """Until more than `after` passes completed (bounded)."""
        async def done() -> None:
            async with self._pass_done:
                await self._pass_done.wait_for(lambda: self.passes > after)
        await asyncio.wait_for(done(), timeout_s)

    async def process_notifications(self) -> None:
        try:
            notifications = sorted(await self.zk_client.get_children(self.path, watch=True))
            if not notifications:
                return
            listener_log.info("Processing notification(s) to %s", self.path)
            now = self.time_ms()
            for notification in notifications:
                change_id = self._change_number(notification)
                if change_id > self.last_executed_change:
                    await self._process_notification(notification)
                    self.last_executed_change = change_id
            await self._purge_obsolete_notifications(now, notifications)
        except asyncio.CancelledError:
            raise
        except Exception:
            if not self._closed:
                listener_log.exception("Error while processing notification change for path = %s", self.path)

    async def _process_notification(self, notification: str) -> None:
        change_znode = f"{self.path}/{notification}"
        data, _ = await self.zk_client.get_data_and_stat(change_znode)
        if data is None:
            listener_log.warning("read null data from %s", change_znode)
            return
        try:
            await self.notification_handler(data)
        except Exception:
            listener_log.exception("error processing change notification %s from %s",
                                   data.decode("utf-8", "replace"), change_znode)

    async def _purge_obsolete_notifications(self, now: int, notifications: list[str]) -> None:
        for notification in notifications:
            node = f"{self.path}/{notification}"
            data, stat = await self.zk_client.get_data_and_stat(node)
            if data is not None and stat is not None and now - stat.ctime > self.change_expiration_ms:
                listener_log.debug("Purging change notification %s", node)
                await self.zk_client.delete_recursive(node)

    def _change_number(self, name: str) -> int:
        return int(name[len(self.seq_node_prefix):])


class ZkConfigManager:
    """See the module docstring. `config_handlers` maps an entity type ("topics", "brokers",
    ...) to its ConfigHandler."""

    def __init__(self, zk_client: KafkaZkClient, config_handlers: Mapping[str, ConfigHandler], *,
                 change_expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        self.zk_client = zk_client
        self.config_handlers = dict(config_handlers)
        self.repository = ZkConfigRepository(zk_client)
        self.config_change_listener = ZkNodeChangeNotificationListener(
            zk_client, ConfigEntityChangeNotificationZNode.path,
            ConfigEntityChangeNotificationSequenceZNode.SEQUENCE_NUMBER_PREFIX,
            self.process_notification, change_expiration_ms=change_expiration_ms)

    async def startup(self) -> None:
        """Apply every entity's overrides, then start processing notifications."""
        for config_type, handler in self.config_handlers.items():
            entities = sorted(await self.zk_client.get_all_entities_with_config(config_type))
            if config_type == ConfigType.USER:  # and /config/users/<u>/clients/<c> (fetchAllChildEntityConfigs)
                entities += [f"{user}/clients/{client}" for user in list(entities) for client in sorted(
                    await self.zk_client.get_all_entities_with_config(f"{ConfigType.USER}/{user}/clients"))]
            for entity in entities:
                config = await self.zk_client.get_entity_configs(config_type, entity)
                try:
                    await _maybe_await(handler.process_config_changes(entity, config))
                except ValueError as e:  # a value the handler refuses: the others still apply
                    log.error("Config of %s/%s not applied: %s", config_type, entity, e)
        self.config_change_listener.init()

    async def shutdown(self) -> None:
        await self.config_change_listener.close()

    async def process_notification(self, json_bytes: bytes) -> None:
        """ConfigChangedNotificationHandler: non-JSON is ignored (it can come from the deprecated
        TopicConfigManager); versions 1 and 2 name the entity; anything else is an error."""
        js = parse(json_bytes)
        if js is None:
            return
        text = json_bytes.decode("utf-8", "replace")
        if not isinstance(js, dict):
            raise ValueError(
                "Config change notification has an unexpected value. The format is:"
                '{"version" : 1, "entity_type":"topics/clients", "entity_name" : "topic_name/client_id"} or '
                '{"version" : 2, "entity_path":"entity_type/entity_name"}. ' f"Received: {text}")
        version = js.get("version")
        if version == 1:
            await self._process_version_1(js, text)
        elif version == 2:
            await self._process_version_2(js, text)
        else:
            raise ValueError(f"Config change notification has unsupported version '{version}', "
                             "supported versions are 1 and 2.")

    async def _process_version_1(self, js: dict[str, object], text: str) -> None:
        entity_type = js.get("entity_type")
        if entity_type not in (ConfigType.TOPIC, ConfigType.CLIENT):
            raise ValueError("Version 1 config change notification must have 'entity_type' set to "
                             f"'clients' or 'topics'. Received: {text}")
        entity = js.get("entity_name")
        if not isinstance(entity, str):
            raise ValueError(f"Version 1 config change notification does not specify 'entity_name'. Received: {text}")
        config = await self.zk_client.get_entity_configs(str(entity_type), entity)
        log.info("Processing override for entityType: %s, entity: %s with config: %s", entity_type, entity,
                 "{" + ", ".join(f"{k}={v}" for k, v in config.items()) + "}")
        await self._apply(str(entity_type), entity, config, text)

    async def _process_version_2(self, js: dict[str, object], text: str) -> None:
        entity_path = js.get("entity_path")
        if not isinstance(entity_path, str):
            raise ValueError(f"Version 2 config change notification must specify 'entity_path'. Received: {text}")
        index = entity_path.find("/")
        root_entity_type = entity_path[:index]
        if index < 0 or root_entity_type not in self.config_handlers:
            types = ", ".join(f"'{t}'/" for t in self.config_handlers)
            raise ValueError("Version 2 config change notification must have 'entity_path' starting with "
                             f"one of {types}. Received: {text}")
        full_sanitized_entity_name = entity_path[index + 1:]
        config = await self.zk_client.get_entity_configs(root_entity_type, full_sanitized_entity_name)
        log.info("Processing override for entityPath: %s with config: %s", entity_path, scala_map(config))
        await self._apply(root_entity_type, full_sanitized_entity_name, config, text)

    async def _apply(self, entity_type: str, entity: str, config: dict[str, str], text: str) -> None:
        handler = self.config_handlers.get(entity_type)
        if handler is None:
            raise ValueError(f"No config handler for entity type {entity_type}. Received: {text}")
        await _maybe_await(handler.process_config_changes(entity, config))


async def _maybe_await(value: object) -> None:
    if inspect.isawaitable(value):
        await value
