"""A 3-broker ZooKeeper-mode cluster whose inter-broker listener is SASL_PLAINTEXT (issue #23 §2):
the replica fetchers, the controller's channel, AlterPartition and the marker sender authenticate
to the other brokers' INTERNAL listener with `sasl.mechanism.inter.broker.protocol=PLAIN` and the
`username` / `password` of that listener's JAAS entry. Clients use the PLAINTEXT listener.
acks=all records survive the leader's kill -9, as over PLAINTEXT."""

from __future__ import annotations

from pathlib import Path

from tests.broker_process import BrokerProcess, free_port
from tests.cluster.processes import IDS, Cluster, subclass_fixture
from tests.cluster.test_replication import kill_a_leader_and_read_back, open_and_produce_rf3
from tests.integration.test_sasl_clients import jaas
from tests.zookeeper import ZooKeeperServer

USERS = {"broker": "broker-secret"}


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
    await kill_a_leader_and_read_back(cluster, cid, acked)
