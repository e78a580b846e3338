"""SCRAM credentials in ZooKeeper (Kafka 3.9's ZkAdminManager for KIP-554): a user's credentials
are the `SCRAM-SHA-256` / `SCRAM-SHA-512` keys of `/config/users/<sanitized user>`, the znode that
also holds the user's quotas; a write keeps those other keys and leaves a /config/changes
notification, which every broker's users config handler applies to its CredentialCache."""

from __future__ import annotations

from broker.sasl.scram import MECHANISMS
from broker.security.sanitizer import desanitize, sanitize
from controller.zk.kafka_zk_client import KafkaZkClient


class ZkScramCredentialStore:
    """broker.sasl.credential_store.ScramCredentialStore over a broker's KafkaZkClient."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk

    async def users(self) -> list[str]:
        return sorted(desanitize(e) for e in await self.zk.get_all_entities_with_config("users"))

    async def credentials(self, user: str) -> dict[str, str]:
        config = await self.zk.get_entity_configs("users", sanitize(user))
        return {k: v for k, v in config.items() if k in MECHANISMS}

    async def set_credentials(self, user: str, credentials: dict[str, str]) -> None:
        name = sanitize(user)
        config = {k: v for k, v in (await self.zk.get_entity_configs("users", name)).items() if k not in MECHANISMS}
        config.update(credentials)
        await self.zk.change_entity_config("users", name, config)
