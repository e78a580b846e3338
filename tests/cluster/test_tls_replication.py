"""A 3-broker ZooKeeper-mode cluster whose inter-broker listener is SSL with mutual TLS (issue #23
§1): the replica fetchers, the controller's channel (LeaderAndIsr / UpdateMetadata), AlterPartition
and the marker sender connect to the other brokers' SSL endpoints, verify their certificates
(hostname verification on: ssl.endpoint.identification.algorithm=https, SAN 127.0.0.1) and present
their own keystore as client certificate (ssl.client.auth=required on that listener). Clients use
the PLAINTEXT listener. acks=all records survive the leader's kill -9, as over PLAINTEXT."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.broker_process import BrokerProcess, free_port
from tests.cluster.processes import IDS, Cluster, subclass_fixture
from tests.cluster.test_replication import kill_a_leader_and_read_back, open_and_produce_rf3
from tests.tls_certs import PASSWORD, CertificateAuthority
from tests.zookeeper import ZooKeeperServer


class TlsCluster(Cluster):
    """Brokers with PLAINTEXT (clients) and INTERNAL (SSL, mTLS: the inter-broker listener)."""

    def __init__(self, zookeeper: ZooKeeperServer, root: Path) -> None:
        super().__init__(zookeeper, root, ("replica.lag.time.max.ms=800",))
        self.ca = CertificateAuthority(root / "certs")
        self.ssl_ports = {i: free_port() for i in IDS}
        self.keystores = {i: self.ca.issue(f"broker{i}", f"broker{i}").pkcs12_file() for i in IDS}

    def broker_process(self, i: int) -> BrokerProcess:
        b = super().broker_process(i)
        b.listeners = f"PLAINTEXT://127.0.0.1:{self.ports[i]},INTERNAL://127.0.0.1:{self.ssl_ports[i]}"
        b.overrides += [
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
            "inter.broker.listener.name=INTERNAL",
            "ssl.keystore.type=PKCS12", f"ssl.keystore.location={self.keystores[i]}",
            f"ssl.keystore.password={PASSWORD}",
            "ssl.truststore.type=PEM", f"ssl.truststore.location={self.ca.ca_file()}",
            "listener.name.internal.ssl.client.auth=required",
            "ssl.principal.mapping.rules=RULE:^CN=([a-z0-9]+),.*$/$1/",
        ]
        return b


cluster = subclass_fixture(TlsCluster)


async def test_replication_over_mutual_tls_survives_the_leaders_kill(cluster: TlsCluster) -> None:
    cid, acked = await open_and_produce_rf3(cluster)
    # the followers' fetches came over the SSL listener, each authenticated by its certificate
    for i in IDS:
        others = {f"principal='User:broker{j}'" for j in IDS if j != i}
        lines = [line for line in cluster.brokers[i].lines if "authenticated TLS client" in line]
        assert all("listener='INTERNAL'" in line for line in lines)
        assert others <= {p for line in lines for p in others if p in line}, (i, lines)
    await kill_a_leader_and_read_back(cluster, cid, acked)


def commit_and_read(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    """One confluent-kafka transaction of `values` committed, then read back read_committed."""
    from confluent_kafka import Consumer, Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "tls-txn", "transaction.timeout.ms": 30000})
    p.init_transactions(60)
    p.begin_transaction()
    for v in values:
        p.produce(topic, v, partition=0)
    p.commit_transaction(60)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "tls-txn-reader", "auto.offset.reset": "earliest",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(values) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
        return got
    finally:
        c.close()


async def test_a_transaction_commits_over_mutual_tls(cluster: TlsCluster) -> None:
    """The transaction's requests between brokers -- the partition leader's KIP-890
    AddPartitionsToTxn verification to the coordinator, the coordinator's WriteTxnMarkers to the
    leader -- go over the SSL inter-broker listener: the commit completes and read_committed sees
    the records (a broker-to-broker client without TLS leaves the produce unverified and the
    commit failing)."""
    await cluster.open()
    cid, _ = await cluster.controller()
    values = [b"t%03d" % i for i in range(20)]
    got = await asyncio.to_thread(commit_and_read, cluster.brokers[cid].bootstrap, "rf3", values)
    assert got == values
