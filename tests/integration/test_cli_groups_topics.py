"""Operator CLI details that follow Kafka's tools, through a real broker: the TopicId of
`topics describe` in Kafka's base64 form, `groups list --state` without a value, `--all-groups`
on describe/delete, and `groups delete-offsets` (kafka-consumer-groups.sh --delete-offsets)."""

from __future__ import annotations

import base64
import re
import warnings
from collections.abc import Iterator

import pytest

from tests.broker_process import BrokerProcess, module_broker
from tests.client_waits import poll_until_assigned
from tests.integration.test_cli import failed, ok, rows

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata


broker = module_broker("cli-groups", ["num.partitions=1", "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=200"])


@pytest.fixture
def admin(broker: BrokerProcess) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        yield a
    finally:
        a.close()


def commit(admin: KafkaAdminClient, group: str, offsets: dict[tuple[str, int], int]) -> None:
    admin.alter_group_offsets(group, {TopicPartition(t, p): OffsetAndMetadata(o, "", None)
                                      for (t, p), o in offsets.items()})


def committed(admin: KafkaAdminClient, group: str) -> dict[tuple[str, int], int]:
    got = admin.list_group_offsets(group).get(group, {})
    return {(tp.topic, tp.partition): om.offset for tp, om in got.items() if om.offset >= 0}


def test_topics_describe_prints_the_topic_id_as_kafka_does(broker: BrokerProcess,
                                                          admin: KafkaAdminClient) -> None:
    b = broker.bootstrap
    ok("topics", "create", "ids", "-p", "2", bootstrap=b)
    first = ok("topics", "describe", "ids", bootstrap=b).splitlines()[0]
    shown = re.search(r"\tTopicId: (\S+)\t", first)
    assert shown, first
    # Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, without padding (22 characters)
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", shown.group(1)), first
    [meta] = admin.describe_topics(["ids"])
    topic_id = meta["topic_id"]
    raw = topic_id.bytes if hasattr(topic_id, "bytes") else bytes.fromhex(str(topic_id).replace("-", ""))
    assert shown.group(1) == base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_groups_list_state_without_a_value_lists_every_group_with_its_state(
        broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    b = broker.bootstrap
    ok("topics", "create", "listed", bootstrap=b)
    commit(admin, "listed-empty", {("listed", 0): 0})
    table = rows(ok("groups", "list", "--state", bootstrap=b), "GROUP")
    assert ["listed-empty", "Empty"] in table
    # with a value it still filters
    assert ["listed-empty", "Empty"] not in rows(
        ok("groups", "list", "--state", "Stable", bootstrap=b), "GROUP")


def test_describe_and_delete_all_groups(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    b = broker.bootstrap
    ok("topics", "create", "every", "-p", "2", bootstrap=b)
    for group in ("every-a", "every-b"):
        commit(admin, group, {("every", 0): 1, ("every", 1): 0})
    described = rows(ok("groups", "describe", "--all-groups", bootstrap=b), "GROUP")
    assert {(r[0], r[1], r[2]) for r in described} >= {
        ("every-a", "every", "0"), ("every-a", "every", "1"),
        ("every-b", "every", "0"), ("every-b", "every", "1")}
    assert "give group names or --all-groups" in failed("groups", "describe", bootstrap=b)
    assert "give group names or --all-groups" in failed(
        "groups", "describe", "every-a", "--all-groups", bootstrap=b)

    out = ok("groups", "delete", "--all-groups", bootstrap=b)
    assert "'every-a'" in out and "'every-b'" in out and "was successful" in out
    assert committed(admin, "every-a") == {} and committed(admin, "every-b") == {}
    listed = ok("groups", "list", bootstrap=b).split()
    assert "every-a" not in listed and "every-b" not in listed


def test_delete_offsets_of_a_topic_or_some_partitions(broker: BrokerProcess,
                                                      admin: KafkaAdminClient) -> None:
    b = broker.bootstrap
    ok("topics", "create", "off-a", "-p", "3", bootstrap=b)
    ok("topics", "create", "off-b", bootstrap=b)
    commit(admin, "offdel", {("off-a", 0): 1, ("off-a", 1): 2, ("off-a", 2): 3, ("off-b", 0): 4})

    out = ok("groups", "delete-offsets", "offdel", "--topic", "off-a:0,2", bootstrap=b)
    assert "Request succeed for deleting offsets from group offdel." in out
    assert sorted(rows(out, "TOPIC")) == [["off-a", "0", "Successful"], ["off-a", "2", "Successful"]]
    assert committed(admin, "offdel") == {("off-a", 1): 2, ("off-b", 0): 4}

    out = ok("groups", "delete-offsets", "offdel", "--topic", "off-b", bootstrap=b)
    assert rows(out, "TOPIC") == [["off-b", "0", "Successful"]]
    assert committed(admin, "offdel") == {("off-a", 1): 2}

    assert "does not exist" in failed("groups", "delete-offsets", "offdel", "--topic", "nope",
                                      bootstrap=b)
    assert "does not exist" in failed("groups", "delete-offsets", "no-such-group", "--topic",
                                      "off-a", bootstrap=b)


def test_delete_offsets_of_a_topic_the_group_is_subscribed_to_fails(broker: BrokerProcess) -> None:
    b = broker.bootstrap
    ok("topics", "create", "off-live", bootstrap=b)
    consumer = KafkaConsumer("off-live", bootstrap_servers=b, group_id="offlive",
                             session_timeout_ms=6000)
    try:
        poll_until_assigned(consumer)
        consumer.commit({TopicPartition("off-live", 0): OffsetAndMetadata(0, "", -1)})
        err = failed("groups", "delete-offsets", "offlive", "--topic", "off-live", bootstrap=b)
        assert "off-live-0: GROUP_SUBSCRIBED_TO_TOPIC" in err, err
    finally:
        consumer.close()


def test_reset_offsets_of_all_groups(broker: BrokerProcess, admin: KafkaAdminClient) -> None:
    b = broker.bootstrap
    ok("topics", "create", "reset-all", "-p", "2", bootstrap=b)
    ok("produce", "reset-all", "--partition", "1", bootstrap=b, input=b"a\nb\nc\n")
    groups = ("reset-all-a", "reset-all-b")
    for group in groups:
        commit(admin, group, {("reset-all", 0): 0, ("reset-all", 1): 1})
    # --all-groups also covers the other (inactive) groups this module's broker has; only the
    # two above are checked
    out = ok("groups", "reset-offsets", "--all-groups", "--topic", "reset-all", "--to-latest",
             "--execute", bootstrap=b)
    planned = {(r[0], r[1], r[2]): r[3] for r in rows(out, "GROUP")}
    for group in groups:
        assert planned[(group, "reset-all", "0")] == "0"
        assert planned[(group, "reset-all", "1")] == "3"
        assert committed(admin, group) == {("reset-all", 0): 0, ("reset-all", 1): 3}
    assert "give group names or --all-groups" in failed(
        "groups", "reset-offsets", "--topic", "reset-all", "--to-latest", bootstrap=b)
