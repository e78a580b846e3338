"""controller.zk.data against Kafka 3.9's own bytes.

The GOLDEN strings were captured from an Apache Kafka 3.9.2 broker in ZooKeeper mode (broker.id=1,
broker.rack=rack-a, one PLAINTEXT listener) run against the test ZooKeeper with a chroot: topics
created and altered through the admin API, a transactional producer for the producer id block.
The older-version broker registrations are those of Kafka's BrokerEndPointTest. Each check parses
both sides and compares field by field (key order is Scala HashMap order, which carries no
meaning), and also checks the encoder writes compact JSON like Jackson."""

from __future__ import annotations

import json
import uuid

import pytest

from controller.zk import data as zd
from controller.zk.data import (
    Broker,
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    EndPoint,
    FeatureZNode,
    FeatureZNodeStatus,
    IsrChangeNotificationSequenceZNode,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    LeaderRecoveryState,
    ProducerIdBlockZNode,
    ProducerIdsBlock,
    ReplicaAssignment,
    SupportedVersionRange,
    TopicPartitionStateZNode,
    TopicZNode,
    ZkDataError,
)

GOLDEN = {
    "/brokers/ids/1": '{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
                      '"endpoints":["PLAINTEXT://127.0.0.1:55089"],"rack":"rack-a","jmx_port":-1,'
                      '"port":55089,"host":"127.0.0.1","version":5,"timestamp":"1795528463215"}',
    "/controller": '{"version":2,"brokerid":1,"timestamp":"1795528463381","kraftControllerEpoch":-1}',
    "/controller_epoch": "1",
    "/brokers/topics/t.x": '{"partitions":{"0":[1],"1":[1]},"topic_id":"u0xf0HKiTg21YdWNjgYivA",'
                           '"adding_replicas":{},"removing_replicas":{},"version":3}',
    "/brokers/topics/t1/partitions/0/state": '{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1]}',
    "/cluster/id": '{"version":"1","id":"lP9wR2hPT0-azxxhPGkl7A"}',
    "/config/brokers/1": '{"version":1,"config":{"log.cleaner.threads":"2"}}',
    "/config/changes/config_change_0000000000": '{"version":2,"entity_path":"topics/t2"}',
    "/config/topics/t.x": '{"version":1,"config":{}}',
    "/config/topics/t1": '{"version":1,"config":{"cleanup.policy":"compact","retention.ms":"1000"}}',
    "/feature": '{"features":{},"version":2,"status":1}',
    "/latest_producer_id_block": '{"version":1,"broker":1,"block_start":"0","block_end":"999"}',
}
# the znodes that Kafka 3.9.2 created with null data, in the order the dump listed them
GOLDEN_NULL_ZNODES = [
    "/admin", "/admin/delete_topics", "/brokers", "/brokers/ids", "/brokers/seqid", "/brokers/topics",
    "/brokers/topics/t1/partitions", "/brokers/topics/t1/partitions/0", "/cluster", "/config",
    "/config/changes", "/config/clients", "/config/ips", "/config/topics", "/config/users",
    "/config/brokers", "/consumers", "/isr_change_notification", "/log_dir_event_notification",
]


def same_json(ours: bytes, kafkas: str) -> None:
    """Field by field (parsed), and compact like Jackson's output."""
    assert json.loads(ours) == json.loads(kafkas)
    assert b": " not in ours and b", " not in ours


def test_paths_are_kafkas():
    assert BrokerIdZNode.path(1) == "/brokers/ids/1"
    assert TopicZNode.path("t1") == "/brokers/topics/t1"
    assert TopicPartitionStateZNode.path("t1", 0) == "/brokers/topics/t1/partitions/0/state"
    assert zd.TopicPartitionsZNode.path("t1") == "/brokers/topics/t1/partitions"
    assert zd.TopicPartitionZNode.path("t1", 0) == "/brokers/topics/t1/partitions/0"
    assert ConfigEntityZNode.path("topics", "t1") == "/config/topics/t1"
    assert ConfigEntityChangeNotificationSequenceZNode.create_path == "/config/changes/config_change_"
    assert zd.DeleteTopicsTopicZNode.path("t1") == "/admin/delete_topics/t1"
    assert ControllerZNode.path == "/controller" and ControllerEpochZNode.path == "/controller_epoch"
    assert ClusterIdZNode.path == "/cluster/id" and FeatureZNode.path == "/feature"
    assert ProducerIdBlockZNode.path == "/latest_producer_id_block"
    assert IsrChangeNotificationSequenceZNode.path("0000000003") == "/isr_change_notification/isr_change_0000000003"
    assert zd.LogDirEventNotificationSequenceZNode.path("0000000001") == "/log_dir_event_notification/log_dir_event_0000000001"


def test_persistent_paths_are_the_ones_kafka_created_at_startup():
    """ZkData.PersistentZkPaths: every one of them was in Kafka 3.9.2's tree, with null data
    (except /latest_producer_id_block, written by then)."""
    assert zd.PERSISTENT_ZK_PATHS == (
        "/consumers", "/brokers/ids", "/brokers/topics", "/config/changes", "/admin/delete_topics",
        "/brokers/seqid", "/isr_change_notification", "/latest_producer_id_block",
        "/log_dir_event_notification", "/config/topics", "/config/clients", "/config/users",
        "/config/brokers", "/config/ips",
    )
    assert set(zd.PERSISTENT_ZK_PATHS) - {"/latest_producer_id_block"} <= set(GOLDEN_NULL_ZNODES)


def test_broker_registration_v5_matches_kafka():
    info = BrokerInfo(Broker(1, (EndPoint("127.0.0.1", 55089, "PLAINTEXT", "PLAINTEXT"),), rack="rack-a"))
    same_json(info.to_json_bytes(timestamp_ms=1795528463215), GOLDEN["/brokers/ids/1"])
    assert info.path == "/brokers/ids/1"
    decoded = BrokerIdZNode.decode(1, GOLDEN["/brokers/ids/1"].encode())
    assert decoded == info


def test_broker_registration_without_rack_or_plaintext():
    """No rack: no "rack" key (Kafka adds it only when set). No PLAINTEXT listener: the legacy
    host/port are null/-1."""
    ssl = EndPoint("h1", 9093, "CLIENT", "SSL")
    doc = json.loads(BrokerInfo(Broker(2, (ssl,))).to_json_bytes(timestamp_ms=5))
    assert "rack" not in doc
    assert doc["host"] is None and doc["port"] == -1
    assert doc["endpoints"] == ["CLIENT://h1:9093"]
    assert doc["listener_security_protocol_map"] == {"CLIENT": "SSL"}
    assert doc["timestamp"] == "5" and doc["version"] == 5 and doc["features"] == {}


def test_broker_registration_features():
    features = {"feature1": SupportedVersionRange(1, 2), "feature2": SupportedVersionRange(2, 4)}
    info = BrokerInfo(Broker(1, (EndPoint("h", 1, "PLAINTEXT", "PLAINTEXT"),), features=features))
    doc = json.loads(info.to_json_bytes(timestamp_ms=1))
    assert doc["features"] == {"feature1": {"min_version": 1, "max_version": 2},
                               "feature2": {"min_version": 2, "max_version": 4}}
    assert BrokerIdZNode.decode(1, info.to_json_bytes()).broker.features == features


@pytest.mark.parametrize("text,endpoint,rack,features", [
    # BrokerEndPointTest.testFromJsonV1: only host/port, which mean a PLAINTEXT listener
    ('{"jmx_port":-1,"timestamp":"1420485325400","host":"172.16.8.243","version":1,"port":9091}',
     EndPoint("172.16.8.243", 9091, "PLAINTEXT", "PLAINTEXT"), None, {}),
    # testFromJsonV2: endpoints without a listener map: listener names are security protocols
    ('{"version":2,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"1416974968782",'
     '"endpoints":["PLAINTEXT://localhost:9092"]}',
     EndPoint("localhost", 9092, "PLAINTEXT", "PLAINTEXT"), None, {}),
    # testFromJsonV3 (the SSL endpoint)
    ('{"version":3,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
     '"endpoints":["PLAINTEXT://host1:9092", "SSL://host1:9093"],"rack":"dc1"}',
     EndPoint("host1", 9093, "SSL", "SSL"), "dc1", {}),
    # testFromJsonV4WithNullRack
    ('{"version":4,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
     '"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
     '"listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},"rack":null}',
     EndPoint("host1", 9092, "CLIENT", "SSL"), None, {}),
    # testFromJsonV5
    ('{"version":5,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
     '"endpoints":["CLIENT://host1:9092", "REPLICATION://host1:9093"],'
     '"listener_security_protocol_map":{"CLIENT":"SSL", "REPLICATION":"PLAINTEXT"},"rack":"dc1",'
     '"features": {"feature1": {"min_version": 1, "max_version": 2}, "feature2": {"min_version": 2, "max_version": 4}}}',
     EndPoint("host1", 9092, "CLIENT", "SSL"), "dc1",
     {"feature1": SupportedVersionRange(1, 2), "feature2": SupportedVersionRange(2, 4)}),
    # testFromJsonFutureVersion: unknown fields and a future version are read like version 2+
    ('{"foo":"bar","version":100,"host":"localhost","port":9092,"jmx_port":9999,'
     '"timestamp":"1416974968782","endpoints":["SSL://localhost:9093"]}',
     EndPoint("localhost", 9093, "SSL", "SSL"), None, {}),
])
def test_broker_registration_older_versions_decode_as_kafka(text, endpoint, rack, features):
    info = BrokerIdZNode.decode(1, text.encode())
    assert info.broker.id == 1
    assert info.broker.endpoint(endpoint.listener_name) == endpoint
    assert info.broker.rack == rack
    assert dict(info.broker.features) == features


def test_broker_registration_errors():
    with pytest.raises(ZkDataError, match="Failed to parse ZooKeeper registration for broker 1"):
        BrokerIdZNode.decode(1, b"not json")
    with pytest.raises(ZkDataError, match="Unsupported version"):
        BrokerIdZNode.decode(1, b'{"version":0,"jmx_port":-1}')
    with pytest.raises(ZkDataError, match="No security protocol defined for listener CLIENT"):
        BrokerIdZNode.decode(1, b'{"version":4,"jmx_port":-1,"endpoints":["CLIENT://h:1"],'
                                b'"listener_security_protocol_map":{"OTHER":"SSL"}}')


@pytest.mark.parametrize("text,host,port", [
    # BrokerEndPointTest.testEndpointFromUri
    ("PLAINTEXT://localhost:9092", "localhost", 9092),
    ("PLAINTEXT://local_host:9092", "local_host", 9092),
    ("PLAINTEXT://:9092", None, 9092),
    ("PLAINTEXT://[::1]:9092", "::1", 9092),
    ("PLAINTEXT://[fe80::b1da:69ca:57f7:63d8%3]:9092", "fe80::b1da:69ca:57f7:63d8%3", 9092),
    ("PLAINTEXT://MyHostname:9092", "MyHostname", 9092),
])
def test_endpoint_connection_strings_round_trip(text, host, port):
    e = EndPoint.parse(text, zd.DEFAULT_NAME_TO_SECURITY_PROTO)
    assert (e.host, e.port, e.listener_name, e.security_protocol) == (host, port, "PLAINTEXT", "PLAINTEXT")
    assert e.connection_string() == text


def test_controller_znode():
    same_json(ControllerZNode.encode(1, timestamp_ms=1795528463381), GOLDEN["/controller"])
    assert ControllerZNode.decode(GOLDEN["/controller"].encode()) == 1
    reg = ControllerZNode.decode_controller(GOLDEN["/controller"].encode(), zk_version=0)
    assert reg == zd.ZkControllerRegistration(broker=1, kraft_epoch=-1, zk_version=0)
    # a version 1 registration (before KIP-866) has no kraftControllerEpoch
    v1 = b'{"version":1,"brokerid":3,"timestamp":"1"}'
    assert ControllerZNode.decode_controller(v1, 4) == zd.ZkControllerRegistration(3, None, 4)
    assert ControllerZNode.decode(b"garbage") is None  # Json.parseBytes -> None


def test_controller_epoch_is_a_bare_number():
    assert ControllerEpochZNode.encode(1) == GOLDEN["/controller_epoch"].encode()
    assert ControllerEpochZNode.decode(b"17") == 17
    with pytest.raises(ZkDataError):
        ControllerEpochZNode.decode(b'{"epoch":1}')


def test_topic_assignment_v3():
    topic_id = zd.uuid_from_string("u0xf0HKiTg21YdWNjgYivA")
    assignment = {0: ReplicaAssignment((1,)), 1: ReplicaAssignment((1,))}
    same_json(TopicZNode.encode(topic_id, assignment), GOLDEN["/brokers/topics/t.x"])
    decoded = TopicZNode.decode("t.x", GOLDEN["/brokers/topics/t.x"].encode())
    assert decoded == zd.TopicIdReplicaAssignment("t.x", topic_id, assignment)
    assert zd.uuid_to_string(topic_id) == "u0xf0HKiTg21YdWNjgYivA"


def test_topic_assignment_during_reassignment_and_without_id():
    assignment = {0: ReplicaAssignment((1, 2, 3), adding_replicas=(3,), removing_replicas=(1,)),
                  1: ReplicaAssignment((2, 3))}
    doc = json.loads(TopicZNode.encode(None, assignment))
    assert doc == {"version": 3, "partitions": {"0": [1, 2, 3], "1": [2, 3]},
                   "adding_replicas": {"0": [3]}, "removing_replicas": {"0": [1]}}
    assert TopicZNode.decode("t", TopicZNode.encode(None, assignment)).assignment == assignment


def test_topic_assignment_older_versions_and_garbage():
    """Version 1 (before KIP-455) had only partitions; Kafka's decoder defaults the rest. Bytes
    that are not JSON decode to no id and no partitions (Json.parseBytes -> None)."""
    v1 = TopicZNode.decode("t", b'{"version":1,"partitions":{"1":[2,3],"0":[1,2]}}')
    assert v1.topic_id is None
    assert v1.assignment == {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 3))}
    assert list(v1.assignment) == [0, 1]
    assert TopicZNode.decode("t", b"{oops") == zd.TopicIdReplicaAssignment("t", None, {})
    assert TopicZNode.decode("t", b'{"version":2}').assignment == {}
    with pytest.raises(ZkDataError):
        TopicZNode.decode("t", b'{"version":3,"topic_id":"short","partitions":{}}')


def test_partition_state():
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader=1, leader_epoch=0, isr=(1,)), controller_epoch=1)
    golden = GOLDEN["/brokers/topics/t1/partitions/0/state"]
    same_json(TopicPartitionStateZNode.encode(state), golden)
    assert TopicPartitionStateZNode.decode(golden.encode(), zk_version=0) == state
    # the znode version becomes the partition epoch
    assert TopicPartitionStateZNode.decode(golden.encode(), zk_version=7).leader_and_isr.partition_epoch == 7


def test_partition_state_leader_recovery_state_only_while_recovering():
    recovering = LeaderIsrAndControllerEpoch(
        LeaderAndIsr(2, 5, (2,), LeaderRecoveryState.RECOVERING), controller_epoch=3)
    doc = json.loads(TopicPartitionStateZNode.encode(recovering))
    assert doc == {"controller_epoch": 3, "leader": 2, "version": 1, "leader_epoch": 5, "isr": [2],
                   "leader_recovery_state": 1}
    assert TopicPartitionStateZNode.decode(TopicPartitionStateZNode.encode(recovering), 0) == recovering
    assert TopicPartitionStateZNode.decode(b"nope", 0) is None
    with pytest.raises(ZkDataError):
        TopicPartitionStateZNode.decode(b'{"leader":1,"leader_epoch":0,"controller_epoch":1}', 0)  # no isr


def test_leader_and_isr_helpers():
    lai = LeaderAndIsr(1, 4, (1, 2), partition_epoch=9)
    assert lai.new_leader_and_isr(2, [2]) == LeaderAndIsr(2, 5, (2,), partition_epoch=9)
    assert lai.with_partition_epoch(10).partition_epoch == 10


def test_config_entities():
    same_json(ConfigEntityZNode.encode({"cleanup.policy": "compact", "retention.ms": "1000"}),
              GOLDEN["/config/topics/t1"])
    same_json(ConfigEntityZNode.encode({}), GOLDEN["/config/topics/t.x"])
    same_json(ConfigEntityZNode.encode({"log.cleaner.threads": "2"}), GOLDEN["/config/brokers/1"])
    assert ConfigEntityZNode.decode(GOLDEN["/config/topics/t1"].encode()) == {
        "cleanup.policy": "compact", "retention.ms": "1000"}
    # null data, not JSON, or no config object: no overrides (an empty Properties in Kafka)
    assert ConfigEntityZNode.decode(None) == {}
    assert ConfigEntityZNode.decode(b"x") == {}
    assert ConfigEntityZNode.decode(b'{"version":1}') == {}
    with pytest.raises(ZkDataError):
        ConfigEntityZNode.decode(b'{"version":1,"config":{"retention.ms":1000}}')


def test_config_change_notifications():
    same_json(ConfigEntityChangeNotificationSequenceZNode.encode("topics/t2"),
              GOLDEN["/config/changes/config_change_0000000000"])
    decode = ConfigEntityChangeNotificationSequenceZNode.decode
    assert decode(GOLDEN["/config/changes/config_change_0000000000"].encode()) == "topics/t2"
    assert decode(b'{"version":1,"entity_type":"topics","entity_name":"t2"}') == "topics/t2"
    with pytest.raises(ZkDataError, match="supported versions are 1 and 2"):
        decode(b'{"version":3,"entity_path":"topics/t2"}')


def test_sanitizer_is_javas_url_encoder():
    assert zd.sanitize("user-1_a.b") == "user-1_a.b"
    assert zd.sanitize("User:alice*") == "User%3Aalice%2A"
    assert zd.sanitize("a b~") == "a%20b%7E"
    assert zd.sanitize("é") == "%C3%A9"
    for name in ("User:alice*", "a b~", "é", "plain"):
        assert zd.desanitize(zd.sanitize(name)) == name


def test_cluster_id_version_is_a_string():
    same_json(ClusterIdZNode.to_json("lP9wR2hPT0-azxxhPGkl7A"), GOLDEN["/cluster/id"])
    assert json.loads(ClusterIdZNode.to_json("x"))["version"] == "1"
    assert ClusterIdZNode.from_json(GOLDEN["/cluster/id"].encode()) == "lP9wR2hPT0-azxxhPGkl7A"
    with pytest.raises(ZkDataError, match="Failed to parse the cluster id json"):
        ClusterIdZNode.from_json(b"{}")


def test_producer_id_block_ids_are_strings():
    block = ProducerIdsBlock(assigned_broker_id=1, first_producer_id=0)
    assert (block.size, block.last_producer_id, block.next_block_first_id()) == (1000, 999, 1000)
    same_json(ProducerIdBlockZNode.generate_producer_id_block_json(block), GOLDEN["/latest_producer_id_block"])
    assert ProducerIdBlockZNode.parse_producer_id_block_data(GOLDEN["/latest_producer_id_block"].encode()) == block
    big = ProducerIdsBlock(3, 2**62, 1000)
    assert ProducerIdBlockZNode.parse_producer_id_block_data(
        ProducerIdBlockZNode.generate_producer_id_block_json(big)) == big
    with pytest.raises(ZkDataError):
        ProducerIdBlockZNode.parse_producer_id_block_data(b'{"version":1,"broker":1,"block_start":0,"block_end":999}')


def test_feature_znode():
    node = FeatureZNode(2, FeatureZNodeStatus.ENABLED, {})
    same_json(FeatureZNode.encode(node), GOLDEN["/feature"])
    assert FeatureZNode.decode(GOLDEN["/feature"].encode()) == node
    v1 = b'{"version":1,"status":1,"features":{"f":{"min_version_level":1,"max_version_level":3}}}'
    assert FeatureZNode.decode(v1) == FeatureZNode(1, FeatureZNodeStatus.ENABLED, {"f": 3})
    assert json.loads(FeatureZNode.encode(FeatureZNode(2, FeatureZNodeStatus.ENABLED, {"f": 3}))) == {
        "version": 2, "status": 1, "features": {"f": {"max_version_level": 3}}}
    for bad, msg in [
        (b'{"version":3,"status":1,"features":{}}', "Unsupported version"),
        (b'{"version":2,"features":{}}', "Status can not be absent"),
        (b'{"version":2,"status":5,"features":{}}', "Malformed status"),
        (b'{"version":2,"status":1}', "Features map can not be absent"),
        (b'{"version":1,"status":1,"features":{"f":{"max_version_level":1}}}', "min_version_level absent"),
        (b'{"version":2,"status":1,"features":{"f":{"max_version_level":0}}}', "Expected maxValue >= 1"),
    ]:
        with pytest.raises(ZkDataError, match=msg):
            FeatureZNode.decode(bad)


def test_notifications_the_controller_reads():
    encoded = IsrChangeNotificationSequenceZNode.encode([("t", 0), ("t", 1)])
    assert json.loads(encoded) == {"version": 1, "partitions": [{"topic": "t", "partition": 0},
                                                                {"topic": "t", "partition": 1}]}
    assert IsrChangeNotificationSequenceZNode.decode(encoded) == {("t", 0), ("t", 1)}
    assert IsrChangeNotificationSequenceZNode.sequence_number("/isr_change_notification/isr_change_0000000012") == "0000000012"
    assert json.loads(zd.LogDirEventNotificationSequenceZNode.encode(4)) == {"version": 1, "broker": 4, "event": 1}
    assert zd.LogDirEventNotificationSequenceZNode.decode(b'{"version":1,"broker":4,"event":1}') == 4
    pre = zd.PreferredReplicaElectionZNode
    assert pre.decode(pre.encode([("a", 1)])) == {("a", 1)}
    re = zd.ReassignPartitionsZNode
    assert json.loads(re.encode({("a", 1): [1, 2]})) == {
        "version": 1, "partitions": [{"topic": "a", "partition": 1, "replicas": [1, 2]}]}
    assert re.decode(re.encode({("a", 1): [1, 2]})) == {("a", 1): [1, 2]}


def test_uuid_strings():
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert zd.uuid_from_string(zd.uuid_to_string(u)) == u
    assert len(zd.uuid_to_string(u)) == 22


def test_replica_assignment_reassign_to_as_kafka():
    """Kafka's ReplicaAssignment.reassignTo / originReplicas / targetReplicas (ReplicaAssignmentTest):
    RS = (TRS ++ ORS).distinct, AR = RS -- ORS, RR = RS -- TRS, in RS order."""
    from controller.zk.data import ReplicaAssignment

    moving = ReplicaAssignment((1, 2)).reassign_to([2, 3])
    assert moving == ReplicaAssignment((2, 3, 1), (3,), (1,))
    assert (moving.origin_replicas, moving.target_replicas, moving.is_being_reassigned) == ((2, 1), (2, 3), True)
    assert str(moving) == "ReplicaAssignment(replicas=2,3,1, addingReplicas=3, removingReplicas=1)"
    # a new target during a reassignment starts from the origin replicas; cancelling goes back to them
    assert moving.reassign_to([4, 5]) == ReplicaAssignment((4, 5, 2, 1), (4, 5), (2, 1))
    assert moving.reassign_to(moving.origin_replicas) == ReplicaAssignment((2, 1))
    assert not ReplicaAssignment((1, 2)).reassign_to([1, 2]).is_being_reassigned
    # a reordering only: nothing added or removed
    assert ReplicaAssignment((1, 2, 3)).reassign_to([3, 1, 2]) == ReplicaAssignment((3, 1, 2))
