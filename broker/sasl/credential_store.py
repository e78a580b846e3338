"""Where DescribeUserScramCredentials / AlterUserScramCredentials read and write SCRAM
credentials: ZooKeeper's `/config/users/<user>` in a cluster (controller.zk.scram_store), the
metadata file on a single node (controller.metadata.EmbeddedScramCredentialStore). Credentials
are by mechanism (`SCRAM-SHA-256` / `SCRAM-SHA-512`) in Kafka's stored form
`salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>` (broker.sasl.scram.ScramCredential)."""

from __future__ import annotations

from typing import Protocol


class ScramCredentialStore(Protocol):
    async def users(self) -> list[str]:
        """Every user with a stored entry (in ZooKeeper possibly one with quotas only), sorted."""

    async def credentials(self, user: str) -> dict[str, str]:
        """The user's stored credentials by mechanism (empty: none)."""

    async def set_credentials(self, user: str, credentials: dict[str, str]) -> None:
        """Replace the user's credentials (other keys the store keeps for the user stay)."""
