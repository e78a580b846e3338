"""Apache Kafka 3.9 in ZooKeeper mode and controller.zk share one ZooKeeper tree, both ways.

Before Kafka starts, our KafkaZkClient writes the cluster id, a broker registration (broker 2, a
rack, a port that forwards to Kafka's), a topic (assignment with a topic id, and a config override) and a
producer id block. A Kafka 3.9.2 broker (id 1) then starts on that tree, becomes the controller
and must *read* all of it: its Metadata shows our cluster id, our broker 2 with its rack, our
topic with our id and assignment (now with leaders it elected), DescribeConfigs our override, and
the producer id block it allocates for an idempotent producer follows ours. Then our decoders
must read everything Kafka *wrote*: its registration, /controller, /controller_epoch, partition
states, a topic created through the admin API with its config, the config change notification,
the new producer id block, /feature.

Nothing here is mocked: real ZooKeeper (Debian's package), real Kafka jars (build/java/kafka)."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controller.zk import data as zd
from controller.zk.client import ZooKeeperClient
from controller.zk.data import Broker, BrokerInfo, EndPoint
from controller.zk.kafka_zk_client import KafkaZkClient, random_cluster_id
from tests.broker_process import LoggedProcess, free_port
from tests.cluster.zk_proxy import ZkProxy
from tests.compat.jvm import java_command
from tests.zookeeper import ZooKeeperServer

CHROOT = "/kafka39"
LOG4J = """\
log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
log4j.logger.state.change.logger=TRACE
"""


class ZkModeKafka(LoggedProcess):
    """A Kafka 3.9 broker in ZooKeeper mode (`kafka.Kafka server.properties` with zookeeper.connect),
    ready at its "[KafkaServer id=N] started" line."""

    what = "Kafka 3.9 (ZooKeeper mode)"

    def __init__(self, work_dir: Path, zookeeper_connect: str, broker_id: int = 1,
                 overrides: dict[str, str] | None = None) -> None:
        super().__init__()
        self.work_dir, self.broker_id = work_dir, broker_id
        self.overrides = dict(overrides or {})
        self.port = free_port()
        self.zookeeper_connect = zookeeper_connect

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> ZkModeKafka:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = {
            "broker.id": self.broker_id, "zookeeper.connect": self.zookeeper_connect,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}", "log.dirs": self.work_dir / "logs",
            "broker.rack": "rack-a", "num.partitions": 1, "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1, "transaction.state.log.min.isr": 1,
            "transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1,
            "group.initial.rebalance.delay.ms": 0, "zookeeper.session.timeout.ms": 18000,
            **self.overrides,
        }
        config = self.work_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log4j = self.work_dir / "log4j.properties"
        log4j.write_text(LOG4J)
        cmd = [f"-Dlog4j.configuration=file:{log4j}" if a.startswith("-Dlog4j.configuration=") else a
               for a in java_command("kafka.Kafka", [str(config)], jvm_args=("-Xmx512m", "-XX:+UseSerialGC"))]
        self._spawn(cmd, f"[KafkaServer id={self.broker_id}] started", timeout)
        return self


@pytest.fixture
async def ours(zookeeper: ZooKeeperServer) -> AsyncIterator[KafkaZkClient]:
    zk = await ZooKeeperClient(zookeeper.connect_string(CHROOT), session_timeout_ms=18000,
                               request_timeout_ms=30_000).start(create_chroot=True)
    try:
        yield KafkaZkClient(zk)
    finally:
        await zk.close()


with warnings.catch_warnings():  # kafka-python's import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic


def kafka_side(bootstrap: str) -> dict[str, object]:
    """What Kafka's clients see (blocking calls): cluster, topic "ours" and its configs; then
    create and alter "theirs" and produce idempotently (Kafka allocates a producer id block)."""
    a = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        seen = {"cluster": a.describe_cluster(), "topics": a.describe_topics(["ours"]),
                "configs": a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "ours")])}
        # on broker 1 only: Kafka would also place replicas on broker 2, which has no process
        a.create_topics([NewTopic("theirs", -1, replica_assignments={0: [1], 1: [1]},
                                  topic_configs={"cleanup.policy": "compact"})])
        a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "theirs", configs={"segment.bytes": "1048576"})])
    finally:
        a.close()
    from confluent_kafka import Producer

    # an idempotent producer's InitProducerId makes the broker ask the controller for a block
    # (AllocateProducerIds), which the controller takes from /latest_producer_id_block
    delivered: list[object] = []
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    p.produce("ours", b"v", on_delivery=lambda err, msg: delivered.append(err))
    assert p.flush(60) == 0 and delivered == [None], delivered
    return seen


@pytest.mark.slow
async def test_kafka_39_reads_our_znodes_and_we_read_its(ours: KafkaZkClient, zookeeper: ZooKeeperServer,
                                                        tmp_path: Path) -> None:
    # --- what we write before Kafka starts
    cluster_id = random_cluster_id()
    topic_id = uuid.uuid4()
    await ours.create_top_level_paths()
    assert await ours.create_or_get_cluster_id(cluster_id) == cluster_id
    kafka = ZkModeKafka(tmp_path / "kafka", zookeeper.connect_string(CHROOT))
    # broker 2's advertised port forwards to Kafka, so clients that pick node 2 are answered too
    ghost_proxy = await ZkProxy(kafka.port).start()
    ghost_port = ghost_proxy.port
    try:
        ghost = BrokerInfo(Broker(2, (EndPoint("127.0.0.1", ghost_port, "PLAINTEXT", "PLAINTEXT"),), rack="rack-b"))
        ghost_epoch = await ours.register_broker(ghost)
        await ours.create_topic_assignment("ours", topic_id, {0: [1], 1: [1]})
        await ours.set_or_create_entity_configs("topics", "ours", {"retention.ms": "12345"}, controller_check=False)
        our_block = await ours.get_new_producer_id_block(2)
        assert (our_block.first_producer_id, our_block.last_producer_id) == (0, 999)

        # blocking clients off the loop: the loop serves broker 2's forwarding meanwhile
        await asyncio.to_thread(kafka.start)
        # the controller elects leaders for our partitions (they had no state znode) after the
        # broker's "started": wait until its metadata cache holds both
        for p in (0, 1):
            await asyncio.to_thread(kafka.wait_for_line, f"Cached leader info UpdateMetadataPartitionState("
                                    f"topicName='ours', partitionIndex={p}", 60)
        seen = await asyncio.to_thread(kafka_side, kafka.bootstrap)
        # --- Kafka read ours
        cluster = seen["cluster"]
        assert cluster["cluster_id"] == cluster_id
        brokers = {b["broker_id"]: b for b in cluster["brokers"]}
        assert set(brokers) == {1, 2}
        assert (brokers[2]["host"], brokers[2]["port"], brokers[2]["rack"]) == ("127.0.0.1", ghost_port, "rack-b")
        assert cluster["controller_id"] == 1
        (topic,) = seen["topics"]
        assert topic["error_code"] == 0
        assert {p["partition_index"]: p["replica_nodes"] for p in topic["partitions"]} == {0: [1], 1: [1]}
        assert {p["leader_id"] for p in topic["partitions"]} == {1}
        assert uuid.UUID(str(topic["topic_id"])) == topic_id
        assert "12345" in repr(seen["configs"])

        # --- we read Kafka's
        registration = await ours.get_controller_registration()
        assert registration is not None and (registration.broker, registration.kraft_epoch) == (1, -1)
        epoch = await ours.get_controller_epoch()
        assert epoch is not None and epoch[0] == 1
        all_brokers = await ours.get_all_broker_and_epochs_in_cluster()
        assert all_brokers[2].epoch == ghost_epoch
        assert all_brokers[1].broker == Broker(1, (EndPoint("127.0.0.1", kafka.port, "PLAINTEXT", "PLAINTEXT"),),
                                               rack="rack-a", features={})
        assert all_brokers[1].epoch > ghost_epoch
        states = await ours.get_topic_partition_states([("ours", 0), ("ours", 1), ("theirs", 0), ("theirs", 1)])
        assert set(states) == {("ours", 0), ("ours", 1), ("theirs", 0), ("theirs", 1)}
        for s in states.values():
            assert (s.leader_and_isr.leader, s.leader_and_isr.isr, s.controller_epoch) == (1, (1,), 1)
        assert (await ours.get_topic_assignment("ours")).topic_id == topic_id  # Kafka kept our id
        theirs = await ours.get_topic_assignment("theirs")
        assert theirs is not None and theirs.topic_id is not None
        assert {p: a.replicas for p, a in theirs.assignment.items()} == {0: (1,), 1: (1,)}
        assert await ours.get_entity_configs("topics", "theirs") == {"cleanup.policy": "compact", "segment.bytes": "1048576"}
        notifications = sorted(await ours.get_children(zd.ConfigEntityChangeNotificationZNode.path))
        decoded = [zd.ConfigEntityChangeNotificationSequenceZNode.decode((await ours.get_data_and_stat(
            f"{zd.ConfigEntityChangeNotificationZNode.path}/{n}"))[0]) for n in notifications]
        assert "topics/theirs" in decoded
        data, _ = await ours.get_data_and_stat(zd.ProducerIdBlockZNode.path)
        kafka_block = zd.ProducerIdBlockZNode.parse_producer_id_block_data(data)
        assert (kafka_block.assigned_broker_id, kafka_block.first_producer_id) == (1, 1000)  # after ours
        feature = await ours.get_feature_znode()
        assert feature is not None and feature[0].status is zd.FeatureZNodeStatus.ENABLED
        assert await ours.get_cluster_id() == cluster_id
    finally:
        await asyncio.to_thread(kafka.stop, 60)
        await ghost_proxy.close()
