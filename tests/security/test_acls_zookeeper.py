"""ACLs in ZooKeeper as Kafka 3.9 keeps them, read both ways, and followed by every broker.

Kafka 3.9.2 in ZooKeeper mode runs its AclAuthorizer on the ZooKeeper tree Odradek uses
(`authorizer.zookeeper.url`, so the two are not one cluster, only one ACL store): an ACL added
through Odradek is listed by Kafka and one added or removed through Kafka is listed by Odradek,
which learns both through the /kafka-acl-changes and /kafka-acl-extended-changes notifications
(polled with a bound, never slept on). Then a 3-broker Odradek cluster: kafka-acls against one
broker, every broker lists the change."""

from __future__ import annotations

import asyncio
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.messages import CreateAclsRequest
from protocol.messages.create_acls_request import AclCreation
from tests.broker_process import BrokerProcess
from tests.cluster.processes import IDS, Cluster, cluster_fixture
from tests.compat.test_zk_znodes import ZkModeKafka
from tests.raw_client import RawConnection
from tests.security.acl_tools import AUTHORIZER, acls, block, until_listing
from tests.zookeeper import ZooKeeperServer

T1 = "ResourcePattern(resourceType=TOPIC, name=t1, patternType=LITERAL)"
PRE = "ResourcePattern(resourceType=TOPIC, name=pre, patternType=PREFIXED)"
ALICE_READ = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
BOB_WRITE_DENY = "(principal=User:bob, host=*, operation=WRITE, permissionType=DENY)"


def test_kafka_and_odradek_read_each_others_acls(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    shared = zookeeper.connect_string("/shared")
    ours = BrokerProcess(tmp_path / "odradek", zookeeper_connect=shared, broker_id=1,
                         overrides=[AUTHORIZER, "super.users=User:ANONYMOUS",
                                    "offsets.topic.replication.factor=1"]).start()
    kafka = ZkModeKafka(tmp_path / "kafka", zookeeper.connect_string("/kafka39"), overrides={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "authorizer.zookeeper.url": shared, "super.users": "User:ANONYMOUS"})
    try:
        kafka.start()
        acls(ours.bootstrap, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t1")
        assert until_listing(kafka.bootstrap, block(T1, ALICE_READ)) == block(T1, ALICE_READ)
        acls(kafka.bootstrap, "--add", "--deny-principal", "User:bob", "--operation", "Write", "--topic", "pre",
             "--resource-pattern-type", "prefixed")
        both = block(T1, ALICE_READ) + "\n\n" + block(PRE, BOB_WRITE_DENY)
        seen = until_listing(ours.bootstrap, both)
        assert set(seen.split("\n\n")) == set(both.split("\n\n")), seen
        acls(kafka.bootstrap, "--remove", "--force", "--topic", "t1")
        assert until_listing(ours.bootstrap, block(PRE, BOB_WRITE_DENY)) == block(PRE, BOB_WRITE_DENY)
        acls(ours.bootstrap, "--remove", "--force", "--topic", "pre", "--resource-pattern-type", "prefixed")
        assert until_listing(kafka.bootstrap, "") == ""
        # AclAuthorizer.createAcls' answers, which the KRaft reference of the differential corpus
        # does not give: a '/' in the name, a principal without a type (the resource's whole update fails)
        creations = [AclCreation(resource_type=2, resource_name=name, resource_pattern_type=3, principal=principal,
                                 host="*", operation=3, permission_type=3)
                     for name, principal in (("bad", "alice"), ("bad", "User:x"), ("a/b", "User:x"), ("fine", "User:x"))]
        answers = []
        for port in (ours.port, kafka.port):
            with RawConnection(port) as c:
                answers.append([r.error_code for r in c.call(30, 3, CreateAclsRequest(creations=creations)).results])
        assert answers[0] == answers[1] == [ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.UNKNOWN_SERVER_ERROR,
                                            ErrorCode.INVALID_REQUEST, 0]
    finally:
        ours.stop()
        kafka.stop()


cluster = cluster_fixture(AUTHORIZER, "super.users=User:ANONYMOUS")


async def test_every_broker_of_a_cluster_follows_the_changes(cluster: Cluster) -> None:
    await cluster.open()
    b1 = cluster.brokers[1].bootstrap
    await asyncio.to_thread(acls, b1, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                            "--topic", "t1")
    for i in IDS:
        seen = await asyncio.to_thread(until_listing, cluster.brokers[i].bootstrap, block(T1, ALICE_READ))
        assert seen == block(T1, ALICE_READ), i
    await asyncio.to_thread(acls, cluster.brokers[3].bootstrap, "--remove", "--force", "--topic", "t1")
    for i in IDS:
        assert await asyncio.to_thread(until_listing, cluster.brokers[i].bootstrap, "") == "", i
