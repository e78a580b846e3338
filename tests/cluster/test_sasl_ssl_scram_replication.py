"""A 3-broker ZooKeeper-mode cluster whose inter-broker listener is SASL_SSL with SCRAM-SHA-512
(issue #23 §2): the replica fetchers, the controller's channel, AlterPartition and the marker
sender open TLS to the other brokers' INTERNAL listener (verifying their certificates) and
authenticate as the SCRAM client of `sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512` with
the `username` / `password` of that listener's ScramLoginModule entry. As Kafka's docs say, the
broker user's credentials are created in ZooKeeper before the brokers start, with Kafka 3.9.2's
`kafka-configs.sh --zookeeper ... --entity-type users --entity-name broker`; so are the client's.
Clients (kafka-python) use an EXTERNAL SASL_SSL listener with SCRAM-SHA-256; the PLAINTEXT one
only serves the harness's metadata polls and topic creation. acks=all records survive the
leader's kill -9, as over PLAINTEXT."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from controller.zk.client import ZooKeeperClient
from tests.broker_process import BrokerProcess, free_port
from tests.cluster.processes import CHROOT, IDS, Cluster, subclass_fixture
from tests.cluster.test_replication import kill_a_leader_and_read_back, open_and_produce_rf3
from tests.compat.jvm import run_tool
from tests.tls_certs import PASSWORD, CertificateAuthority
from tests.zookeeper import ZooKeeperServer

CONFIG_COMMAND = "kafka.admin.ConfigCommand"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
BROKER_PASSWORD = "broker-secret"
ALICE_PASSWORD = "alice-secret"


class SaslSslCluster(Cluster):
    """Brokers with PLAINTEXT (the harness), INTERNAL (SASL_SSL, SCRAM-SHA-512: inter-broker)
    and EXTERNAL (SASL_SSL, SCRAM-SHA-256: clients)."""

    def __init__(self, zookeeper: ZooKeeperServer, root: Path) -> None:
        super().__init__(zookeeper, root, ("replica.lag.time.max.ms=800",))
        self.zookeeper = zookeeper
        self.ca = CertificateAuthority(root / "certs")
        self.internal_ports = {i: free_port() for i in IDS}
        self.external_ports = {i: free_port() for i in IDS}
        self.keystores = {i: self.ca.issue(f"broker{i}", f"broker{i}").pkcs12_file() for i in IDS}

    def broker_process(self, i: int) -> BrokerProcess:
        b = super().broker_process(i)
        b.listeners = (f"PLAINTEXT://127.0.0.1:{self.ports[i]},INTERNAL://127.0.0.1:{self.internal_ports[i]},"
                       f"EXTERNAL://127.0.0.1:{self.external_ports[i]}")
        b.overrides += [
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL",
            "inter.broker.listener.name=INTERNAL",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
            "listener.name.internal.sasl.enabled.mechanisms=SCRAM-SHA-512",
            f'listener.name.internal.scram-sha-512.sasl.jaas.config={SCRAM_MODULE} required '
            f'username="broker" password="{BROKER_PASSWORD}";',
            "listener.name.external.sasl.enabled.mechanisms=SCRAM-SHA-256",
            f"listener.name.external.scram-sha-256.sasl.jaas.config={SCRAM_MODULE} required;",
            "ssl.keystore.type=PKCS12", f"ssl.keystore.location={self.keystores[i]}",
            f"ssl.keystore.password={PASSWORD}",
            "ssl.truststore.type=PEM", f"ssl.truststore.location={self.ca.ca_file()}",
        ]
        return b

    def client_settings(self, i: int) -> dict[str, Any]:
        return {"bootstrap_servers": f"127.0.0.1:{self.external_ports[i]}", "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "alice",
                "sasl_plain_password": ALICE_PASSWORD, "ssl_cafile": str(self.ca.ca_file())}

    async def create_users(self) -> None:
        """The SCRAM users, written to ZooKeeper by Kafka 3.9.2's kafka-configs before any broker
        runs (the brokers read /config/users at start). The tool does not create the chroot."""
        client = await ZooKeeperClient(self.zookeeper.connect_string(), session_timeout_ms=10_000,
                                       connection_timeout_ms=10_000, request_timeout_ms=10_000).start()
        try:
            await client.create(CHROOT)
        finally:
            await client.close()
        for user, config in (("broker", f"SCRAM-SHA-512=[password={BROKER_PASSWORD}]"),
                             ("alice", f"SCRAM-SHA-256=[password={ALICE_PASSWORD}]")):
            await asyncio.to_thread(run_tool, CONFIG_COMMAND, "--zookeeper", self.connect, "--alter",
                                    "--add-config", config, "--entity-type", "users", "--entity-name", user)


cluster = subclass_fixture(SaslSslCluster)


async def test_replication_over_sasl_ssl_scram_survives_the_leaders_kill(cluster: SaslSslCluster) -> None:
    await cluster.create_users()
    cid, acked = await open_and_produce_rf3(cluster)
    # the other brokers' connections came over the SASL_SSL listener, SCRAM-SHA-512 as User:broker
    for i in IDS:
        lines = [line for line in cluster.brokers[i].lines if "authenticated SASL client" in line]
        internal = [line for line in lines if "listener='INTERNAL'" in line]
        assert internal, i
        assert all("mechanism='SCRAM-SHA-512'" in line and "principal='User:broker'" in line
                   for line in internal), internal
        assert all("listener='EXTERNAL'" in line for line in lines if "principal='User:alice'" in line)
    # the clients authenticated on EXTERNAL (the controller's broker was their bootstrap)
    assert any("principal='User:alice'" in line for i in IDS for line in cluster.brokers[i].lines)
    await kill_a_leader_and_read_back(cluster, cid, acked)
