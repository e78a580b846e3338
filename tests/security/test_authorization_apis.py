"""What each API answers a principal the ACLs do not allow, over a real connection (raw requests
with our codecs, so every error code is seen as sent): User:ANONYMOUS may only DESCRIBE topic
"t". The ACL (and transactional id "tx", whose transaction is left open on "t") is created while
User:ANONYMOUS is a super user; the broker then restarts without super.users. Each assertion
fails if the handler's check is removed (it would answer NONE, or list what it must hide)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic
from confluent_kafka.admin import ResourcePatternType as Pattern
from confluent_kafka.admin import ResourceType as Kind

from broker.apis.registry import REGISTRY, load_all
from protocol.errors import ErrorCode as E
from protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeLogDirsRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ListTransactionsRequest,
    MetadataRequest,
    WriteTxnMarkersRequest,
)
from protocol.messages.create_partitions_request import CreatePartitionsTopic
from protocol.messages.create_topics_request import CreatableTopic
from protocol.messages.describe_configs_request import DescribeConfigsResource
from protocol.messages.describe_producers_request import TopicRequest
from protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from protocol.messages.metadata_request import MetadataRequestTopic
from protocol.messages.write_txn_markers_request import WritableTxnMarker, WritableTxnMarkerTopic
from tests.broker_process import BrokerProcess
from tests.raw_client import RawConnection
from tests.security.acl_tools import AUTHORIZER

DESCRIBE_BIT = 1 << 8
ONE_NODE_TXN = ["transaction.state.log.min.isr=1", "transaction.state.log.num.partitions=3"]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("authz-apis") / "data"
    b = BrokerProcess(data, overrides=[AUTHORIZER, "super.users=User:ANONYMOUS", *ONE_NODE_TXN]).start()
    try:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
        for f in admin.create_acls([AclBinding(Kind.TOPIC, "t", Pattern.LITERAL, "User:ANONYMOUS", "*",
                                               AclOperation.DESCRIBE, AclPermissionType.ALLOW)]).values():
            f.result(30)
        p = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "tx"})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce("t", b"open")
        p.flush(30)  # the transaction stays open on t-0
    finally:
        b.stop()
    b = BrokerProcess(data, port=b.port, overrides=[AUTHORIZER, *ONE_NODE_TXN]).start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def conn(broker: BrokerProcess) -> Iterator[RawConnection]:
    with RawConnection(broker.port) as c:
        yield c


def test_topic_admin_apis(conn: RawConnection) -> None:
    r = conn.call(19, 5, CreateTopicsRequest(topics=[CreatableTopic(name="new", num_partitions=1, replication_factor=1,
                                                                    assignments=[], configs=[])], timeout_ms=5000))
    assert [(t.name, t.error_code, t.error_message, t.topic_config_error_code) for t in r.topics] == [
        ("new", E.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", E.TOPIC_AUTHORIZATION_FAILED)]
    r = conn.call(20, 4, DeleteTopicsRequest(topic_names=["t"], timeout_ms=5000))
    assert [(t.name, t.error_code) for t in r.responses] == [("t", E.TOPIC_AUTHORIZATION_FAILED)]
    r = conn.call(37, 1, CreatePartitionsRequest(topics=[CreatePartitionsTopic(name="t", count=2, assignments=None)],
                                                 timeout_ms=5000))
    assert [(t.name, t.error_code) for t in r.results] == [("t", E.TOPIC_AUTHORIZATION_FAILED)]
    r = conn.call(32, 4, DescribeConfigsRequest(resources=[
        DescribeConfigsResource(resource_type=2, resource_name="t", configuration_keys=None),
        DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=None)]))
    assert [x.error_code for x in r.results] == [E.TOPIC_AUTHORIZATION_FAILED, E.CLUSTER_AUTHORIZATION_FAILED]


def test_metadata_list_offsets_and_operations(conn: RawConnection) -> None:
    r = conn.call(3, 9, MetadataRequest(topics=[MetadataRequestTopic(name="t"), MetadataRequestTopic(name="hidden")],
                                        allow_auto_topic_creation=True, include_topic_authorized_operations=True,
                                        include_cluster_authorized_operations=True))
    by_name = {t.name: t for t in r.topics}
    assert by_name["hidden"].error_code == E.TOPIC_AUTHORIZATION_FAILED  # neither disclosed nor created
    assert (by_name["t"].error_code, by_name["t"].topic_authorized_operations) == (0, DESCRIBE_BIT)
    assert r.cluster_authorized_operations == 0  # no DESCRIBE on the cluster
    r = conn.call(60, 0, DescribeClusterRequest(include_cluster_authorized_operations=True))
    assert r.cluster_authorized_operations == 0
    r = conn.call(2, 7, ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsTopic(name=n, partitions=[ListOffsetsPartition(partition_index=0, timestamp=-1)])
        for n in ("t", "hidden")]))
    assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [("t", 0), ("hidden", E.TOPIC_AUTHORIZATION_FAILED)]


def test_coordinator_producer_id_and_cluster_apis(conn: RawConnection) -> None:
    r = conn.call(10, 3, FindCoordinatorRequest(key="g", key_type=0))
    assert r.error_code == E.GROUP_AUTHORIZATION_FAILED
    r = conn.call(10, 3, FindCoordinatorRequest(key="tx", key_type=1))
    assert r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    r = conn.call(22, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000))
    assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED  # no IDEMPOTENT_WRITE, no WRITE on any topic
    r = conn.call(22, 4, InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000))
    assert r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    r = conn.call(27, 1, WriteTxnMarkersRequest(markers=[WritableTxnMarker(
        producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0,
        topics=[WritableTxnMarkerTopic(name="t", partition_indexes=[0])])]))
    assert r.markers[0].topics[0].partitions[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
    r = conn.call(35, 3, DescribeLogDirsRequest(topics=None))
    assert r.error_code == E.CLUSTER_AUTHORIZATION_FAILED


def test_every_handler_authorizes() -> None:
    """DESIGN.md 6b: every registered handler consults the authorizer. The exceptions are the
    requests Kafka answers before or during authentication, with no principal to authorize yet:
    ApiVersions (18), SaslHandshake (17) and SaslAuthenticate (36)."""
    import inspect
    import sys

    load_all()
    before_authentication = {17, 18, 36}
    unchecked = [h.api_key for h in REGISTRY.values()
                 if h.api_key not in before_authentication
                 and "ctx.authoriz" not in inspect.getsource(sys.modules[h.handle.__module__])
                 and "unauthorized(ctx" not in inspect.getsource(sys.modules[h.handle.__module__])]
    assert unchecked == []


def test_transaction_admin_apis(conn: RawConnection) -> None:
    """DescribeProducers needs READ on the topic (checked before the topic's existence);
    DescribeTransactions and ListTransactions need DESCRIBE on the transactional id: "tx" exists
    and is Ongoing, yet is neither described nor listed."""
    r = conn.call(61, 0, DescribeProducersRequest(topics=[TopicRequest(name="t", partition_indexes=[0]),
                                                          TopicRequest(name="missing", partition_indexes=[0])]))
    assert [(t.name, t.partitions[0].error_code) for t in r.topics] == [
        ("t", E.TOPIC_AUTHORIZATION_FAILED), ("missing", E.TOPIC_AUTHORIZATION_FAILED)]
    r = conn.call(65, 0, DescribeTransactionsRequest(transactional_ids=["tx"]))
    assert [(t.transactional_id, t.error_code, t.topics) for t in r.transaction_states] == [
        ("tx", E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, [])]
    deadline = time.monotonic() + 30
    while (r := conn.call(66, 1, ListTransactionsRequest(state_filters=[], producer_id_filters=[],
                                                         duration_filter=-1))).error_code:
        assert r.error_code == E.COORDINATOR_LOAD_IN_PROGRESS and time.monotonic() < deadline, r
        time.sleep(0.05)
    assert r.transaction_states == []
