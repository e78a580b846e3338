"""A 3-broker ZooKeeper-mode cluster whose inter-broker listener is SASL_PLAINTEXT (issue #23 §2):
the replica fetchers, the controller's channel, AlterPartition and the marker sender authenticate
to the other brokers' INTERNAL listener with `sasl.mechanism.inter.broker.protocol=PLAIN` and the
`username` / `password` of that listener's JAAS entry. Clients use the PLAINTEXT listener.
acks=all records survive the leader's kill -9, as over PLAINTEXT.

The INTERNAL listener's PLAIN sessions last `connections.max.reauth.ms` = 2 s (KIP-368): the
brokers' own connections re-authenticate before their sessions end, so the listener never closes
one as expired -- neither the busy replica fetchers' nor the controller's, idle until the kill."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.broker_process import BrokerProcess, free_port
from tests.cluster.processes import IDS, Cluster, subclass_fixture
from tests.cluster.test_replication import kill_a_leader_and_read_back, open_and_produce_rf3
from tests.integration.test_sasl_clients import jaas
from tests.zookeeper import ZooKeeperServer

USERS = {"broker": "broker-secret"}
SESSION_LIFETIME_MS = 2000
REAUTHENTICATED = "re-authenticated SASL client"
EXPIRED = "Disconnecting expired channel"


class SaslCluster(Cluster):
    """Brokers with PLAINTEXT (clients) and INTERNAL (SASL_PLAINTEXT, PLAIN: inter-broker)."""

    def __init__(self, zookeeper: ZooKeeperServer, root: Path) -> None:
        super().__init__(zookeeper, root, ("replica.lag.time.max.ms=800",))
        self.sasl_ports = {i: free_port() for i in IDS}

    def broker_process(self, i: int) -> BrokerProcess:
        b = super().broker_process(i)
        b.listeners = f"PLAINTEXT://127.0.0.1:{self.ports[i]},INTERNAL://127.0.0.1:{self.sasl_ports[i]}"
        b.overrides += [
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
            "inter.broker.listener.name=INTERNAL",
            "sasl.mechanism.inter.broker.protocol=PLAIN",
            "listener.name.internal.sasl.enabled.mechanisms=PLAIN",
            f"listener.name.internal.plain.sasl.jaas.config={jaas('broker', USERS['broker'], USERS)}",
            f"listener.name.internal.plain.connections.max.reauth.ms={SESSION_LIFETIME_MS}",
        ]
        return b


cluster = subclass_fixture(SaslCluster)


async def test_replication_over_sasl_survives_the_leaders_kill(cluster: SaslCluster) -> None:
    cid, acked = await open_and_produce_rf3(cluster)
    # the other brokers' connections came over the SASL listener, authenticated as User:broker
    for i in IDS:
        lines = [line for line in cluster.brokers[i].lines if "authenticated SASL client" in line]
        assert lines, i
        assert all("listener='INTERNAL'" in line and "principal='User:broker'" in line for line in lines), lines

    # the followers' fetchers keep their connections to each leader through re-authentications
    def reauthenticated_twice(lines: list[str]) -> bool:
        return sum(REAUTHENTICATED in line for line in lines) >= 2

    for i in IDS:
        broker = cluster.brokers[i]
        seen = await asyncio.to_thread(broker.wait_until, lambda b=broker: reauthenticated_twice(b.lines),
                                       10 * SESSION_LIFETIME_MS / 1000)
        assert seen, (i, broker.lines[-20:])
    await kill_a_leader_and_read_back(cluster, cid, acked)
    for i in IDS:
        assert not [line for line in cluster.brokers[i].lines if EXPIRED in line], i
