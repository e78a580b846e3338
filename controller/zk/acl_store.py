"""ACLs in ZooKeeper as Kafka 3.9 stores them (kafka.zk.ZkData's ZkAclStore / ZkAclChangeStore,
AclEntry.toJsonCompatibleMap), so a Kafka 3.9 broker and Odradek sharing a ZooKeeper read each
other's ACLs:

* a LITERAL pattern's entries in `/kafka-acl/<Type>/<name>`, a PREFIXED one's in
  `/kafka-acl-extended/prefixed/<Type>/<name>` (Type in PascalCase: Topic, Group, Cluster,
  TransactionalId, DelegationToken, User), data
  `{"version":1,"acls":[{"principal":"User:a","permissionType":"Allow","operation":"Read","host":"*"}]}`;
  a resource whose last entry goes is deleted;
* each change is announced by a persistent sequential `/kafka-acl-changes/acl_changes_<seq>`
  holding `<TYPE>:<name>` (LITERAL) or `/kafka-acl-extended-changes/acl_changes_<seq>` holding
  `{"version":1,"resourceType":"TOPIC","name":"p","patternType":"PREFIXED"}`; every broker
  watches both (ZkNodeChangeNotificationListener, the listener the config overrides use) and
  re-reads the named resource into its authorizer's cache.

Writes are conditional on the znode's version and retried on a conflict (AclAuthorizer's
updateResourceAcls), so two brokers adding to one resource at once both land.

Who may call: the event loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from broker.security.acl import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    decode_entries,
    encode_entries,
)
from controller.zk.client import BadVersionError, NodeExistsError, NoNodeError
from controller.zk.config_manager import ZkNodeChangeNotificationListener

if TYPE_CHECKING:
    from broker.security.authorizer import AclAuthorizer
    from controller.zk.kafka_zk_client import KafkaZkClient

Entries = frozenset[AccessControlEntry]
log = logging.getLogger("kafka.authorizer.logger")

LITERAL_ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
LITERAL_CHANGE_PATH = "/kafka-acl-changes"
EXTENDED_CHANGE_PATH = "/kafka-acl-extended-changes"
SEQUENCE_PREFIX = "acl_changes_"
MAX_UPDATE_RETRIES = 10  # AclAuthorizer.maxUpdateRetries


def resource_path(resource: ResourcePattern) -> str:
    """ZkAclStore.path: the znode holding the pattern's entries."""
    base = LITERAL_ACL_PATH if resource.pattern_type == PatternType.LITERAL else \
        f"{EXTENDED_ACL_PATH}/{resource.pattern_type.name.lower()}"
    return f"{base}/{resource.resource_type.pascal}/{resource.name}"


def encode_change(resource: ResourcePattern) -> tuple[str, bytes]:
    """(the change notification's path prefix, its data): LiteralAclChangeStore / ExtendedAclChangeStore."""
    if resource.pattern_type == PatternType.LITERAL:
        return (f"{LITERAL_CHANGE_PATH}/{SEQUENCE_PREFIX}",
                f"{resource.resource_type.name}:{resource.name}".encode())
    event = {"version": 1, "resourceType": resource.resource_type.name, "name": resource.name,
             "patternType": resource.pattern_type.name}
    return f"{EXTENDED_CHANGE_PATH}/{SEQUENCE_PREFIX}", json.dumps(event, separators=(",", ":")).encode()


def decode_literal_change(data: bytes) -> ResourcePattern:
    kind, _, name = data.decode().partition(":")
    return ResourcePattern(ResourceType.from_string(kind), name, PatternType.LITERAL)  # type: ignore[arg-type]


def decode_extended_change(data: bytes) -> ResourcePattern:
    js = json.loads(data)
    if int(js.get("version", 1)) > 1:
        raise ValueError(f"Acl change event received for unsupported version: {js['version']}")
    return ResourcePattern(ResourceType.from_string(js["resourceType"]), js["name"],  # type: ignore[arg-type]
                           PatternType.from_string(js["patternType"]))  # type: ignore[arg-type]



# -- ZooKeeper ------------------------------------------------------------------------------------

class ZkAclStore:
    """ACLs in ZooKeeper (see the module docstring). `start(authorizer)` starts the change
    listeners first and then loads, as AclAuthorizer.configure, so no change falls between."""

    def __init__(self, zk_client: KafkaZkClient) -> None:
        self.zk_client = zk_client
        self.authorizer: AclAuthorizer | None = None
        self.listeners: list[ZkNodeChangeNotificationListener] = []

    async def start(self, authorizer: AclAuthorizer) -> None:
        self.authorizer = authorizer
        for path in (LITERAL_ACL_PATH, f"{EXTENDED_ACL_PATH}/prefixed", LITERAL_CHANGE_PATH, EXTENDED_CHANGE_PATH):
            await self.zk_client.make_sure_persistent_path_exists(path)  # ZkClient.createAclPaths
        for path, decode in ((LITERAL_CHANGE_PATH, decode_literal_change),
                             (EXTENDED_CHANGE_PATH, decode_extended_change)):
            async def handle(data: bytes, decode: Callable[[bytes], ResourcePattern] = decode) -> None:
                await self._refresh(decode(data))
            listener = ZkNodeChangeNotificationListener(self.zk_client, path, SEQUENCE_PREFIX, handle)
            listener.init()
            self.listeners.append(listener)
        await authorizer.load()

    async def close(self) -> None:
        for listener in self.listeners:
            await listener.close()
        self.listeners.clear()

    async def _refresh(self, resource: ResourcePattern) -> None:
        """processAclChangeNotification: the resource as ZooKeeper has it now, into the cache."""
        data, _ = await self.zk_client.get_data_and_stat(resource_path(resource))
        if self.authorizer is not None:
            self.authorizer.update_cache(resource, decode_entries(data))

    async def load(self) -> dict[ResourcePattern, Entries]:
        out: dict[ResourcePattern, Entries] = {}
        for base, pattern_type in ((LITERAL_ACL_PATH, PatternType.LITERAL),
                                   (f"{EXTENDED_ACL_PATH}/prefixed", PatternType.PREFIXED)):
            for kind in await self.zk_client.get_children(base):
                resource_type = ResourceType.from_string(kind)
                for name in await self.zk_client.get_children(f"{base}/{kind}"):
                    data, _ = await self.zk_client.get_data_and_stat(f"{base}/{kind}/{name}")
                    entries = decode_entries(data)
                    if entries:
                        out[ResourcePattern(resource_type, name, pattern_type)] = entries  # type: ignore[arg-type]
        return out

    async def update(self, resource: ResourcePattern, change: Callable[[Entries], Entries]) -> Entries:
        """updateResourceAcls: read, change, write conditionally on the version (retried on a
        conflict), then announce the change."""
        path = resource_path(resource)
        zk = self.zk_client
        for _ in range(MAX_UPDATE_RETRIES):
            data, stat = await zk.get_data_and_stat(path)
            current = decode_entries(data)
            new = change(current)
            if new == current and stat is not None:
                return new
            try:
                if not new:
                    if stat is None:
                        return new
                    version = stat.version
                    await zk.zk.retry_until_connected(lambda v=version: zk.zk.delete(path, v))
                elif stat is None:
                    payload = encode_entries(new)
                    await zk.zk.retry_until_connected(lambda p=payload: zk.zk.create(path, p, makepath=True))
                else:
                    ok, _ = await zk.conditional_update_path(path, encode_entries(new), stat.version)
                    if not ok:
                        continue
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            await self._announce(resource)
            return new
        raise RuntimeError(f"Failed to update ACLs for {resource} after trying a maximum of "
                           f"{MAX_UPDATE_RETRIES} times")

    async def _announce(self, resource: ResourcePattern) -> None:
        prefix, event = encode_change(resource)
        zk = self.zk_client.zk
        await zk.retry_until_connected(lambda: zk.create(prefix, event, sequential=True, makepath=True))


