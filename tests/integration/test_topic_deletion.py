"""Topic deletion at its edges, through a real broker and kafka-python's admin client.

* A 249-character topic (the longest Kafka allows) is deleted: its directory is renamed to a
  name capped at 255 bytes, as Kafka's `UnifiedLog.logDeleteDirName`, not to
  `<topic>-<partition>.<uuid>-delete` (which is too long for the file system).
* Deleting a topic removes the committed offsets of its partitions from every group, as Kafka's
  `GroupCoordinator.onPartitionsDeleted`: a group that commits on a re-created topic of the same
  name must start from its reset policy, not resume at the old topic's offsets.
"""

from __future__ import annotations

import time
import warnings

import pytest

from tests.broker_process import BrokerProcess

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.structs import OffsetAndMetadata


@pytest.fixture
def broker(gbroker: BrokerProcess) -> BrokerProcess:
    """conftest's consumer-group broker (FAST_GROUPS); `admin` is conftest's too."""
    return gbroker


def produce(broker: BrokerProcess, topic: str, n: int) -> None:
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    try:
        for i in range(n):
            p.send(topic, f"v{i}".encode(), partition=0).get(timeout=30)
    finally:
        p.close()


def wait_until(check, what: str, timeout_s: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s}s: {what}")
        time.sleep(0.05)


def partition_dirs(broker: BrokerProcess, topic: str) -> list[str]:
    return sorted(p.name for p in broker.log_dir.iterdir() if p.is_dir() and p.name.startswith(topic))


def test_a_topic_with_a_249_character_name_is_deleted(broker: BrokerProcess,
                                                      admin: KafkaAdminClient) -> None:
    topic = "t" * 249
    admin.create_topics([NewTopic(topic, 2, 1)])
    produce(broker, topic, 3)
    assert partition_dirs(broker, topic) == [f"{topic}-0", f"{topic}-1"]

    response = admin.delete_topics([topic])
    assert [(t["name"], t["error_code"]) for t in response["topics"]] == [(topic, 0)]
    wait_until(lambda: not partition_dirs(broker, topic), "the partition directories removed")
    assert topic not in admin.list_topics()
    assert "File name too long" not in broker.log_text()

    broker.stop()
    broker.start()
    again = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert topic not in again.list_topics()
    finally:
        again.close()
    assert not partition_dirs(broker, topic)


def test_deleting_a_topic_removes_its_offsets_from_every_group(broker: BrokerProcess,
                                                               admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("doomed", 2, 1), NewTopic("kept", 1, 1)])
    produce(broker, "doomed", 5)
    produce(broker, "kept", 5)
    for group in ("g1", "g2"):
        admin.alter_group_offsets(group, {
            TopicPartition("doomed", 0): OffsetAndMetadata(4, "", None),
            TopicPartition("doomed", 1): OffsetAndMetadata(0, "", None),
            TopicPartition("kept", 0): OffsetAndMetadata(3, "", None),
        })
    admin.delete_topics(["doomed"])

    def committed(group: str) -> dict[tuple[str, int], int]:
        got = admin.list_group_offsets(group).get(group, {})
        return {(tp.topic, tp.partition): om.offset for tp, om in got.items() if om.offset >= 0}

    for group in ("g1", "g2"):  # deletion may finish after DeleteTopics answers, as in Kafka
        wait_until(lambda group=group: committed(group) == {("kept", 0): 3},
                   f"{group}'s offsets of the deleted topic removed, its others kept")

    # the same name again: a member of the group starts at the log start (its reset policy),
    # not at the old topic's offset 4
    admin.create_topics([NewTopic("doomed", 2, 1)])
    produce(broker, "doomed", 10)
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g1",
                             auto_offset_reset="earliest", enable_auto_commit=False)
    try:
        tp = TopicPartition("doomed", 0)
        consumer.assign([tp])
        assert consumer.position(tp, timeout_ms=30000) == 0
    finally:
        consumer.close()

    # and that survives a restart (the removal was written to __consumer_offsets)
    broker.stop()
    broker.start()
    again = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        got = again.list_group_offsets("g2").get("g2", {})
        assert {(tp.topic, tp.partition): om.offset for tp, om in got.items()
                if om.offset >= 0} == {("kept", 0): 3}
    finally:
        again.close()
