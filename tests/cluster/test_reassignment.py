"""Partition reassignment between real `odradek serve` processes, ZooKeeper mode (issue #15), with
Kafka 3.9.2's own `kafka-reassign-partitions` (org.apache.kafka.tools.reassign.
ReassignPartitionsCommand): --execute moves an RF 2 partition's replicas [1, 2] -> [2, 3] through
AlterPartitionReassignments; the controller writes RS = TRS + ORS with adding/removing replicas,
starts broker 3's replica, which catches up and joins the ISR (AlterPartition), then completes:
RS = TRS, a leader from TRS, broker 1's replica stopped and deleted. --list
(ListPartitionReassignments) shows a reassignment held back by a paused new replica, and --cancel
takes it back to the origin replicas (in RS order, [2, 1], as Kafka)."""

from __future__ import annotations

import asyncio
import json
import signal
import time
import warnings
from pathlib import Path
from typing import Any

from protocol.errors import ErrorCode
from protocol.messages import (
    AlterPartitionReassignmentsRequest,
    CreatePartitionsRequest,
    ListPartitionReassignmentsRequest,
)
from protocol.messages.alter_partition_reassignments_request import (
    ReassignablePartition,
    ReassignableTopic,
)
from protocol.messages.create_partitions_request import CreatePartitionsTopic
from tests.broker_process import BrokerProcess
from tests.cluster.processes import IDS, WAIT, cluster_fixture, partitions
from tests.cluster.test_zk_configs import describe
from tests.compat.jvm import run_tool
from tests.raw_client import RawConnection

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
N = 200
LAG_MS = 800


cluster = cluster_fixture(f"replica.lag.time.max.ms={LAG_MS}")


def create_topic(bootstrap: str, topic: str, replicas: list[int]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
    try:
        result = admin.create_topics([NewTopic(topic, -1, -1, replica_assignments={0: replicas})])
        assert [t["error_code"] for t in result["topics"]] == [0], result
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2, request_timeout_ms=10_000)
    try:
        futures = [producer.send(topic, v, partition=0) for v in values]
        producer.flush(30)
        assert [f.get(10).offset for f in futures] == list(range(len(values)))
    finally:
        producer.close(5)


def read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=2000)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        out: list[bytes] = []
        deadline = time.monotonic() + WAIT
        while len(out) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(r.value for r in records)
        return out
    finally:
        consumer.close()


def tool(bootstrap: str, *args: str) -> str:
    return run_tool(REASSIGN, "--bootstrap-server", bootstrap, *args, timeout=90).stdout


def plan(tmp_path: Path, topic: str, replicas: list[int]) -> str:
    path = tmp_path / f"{topic}-plan.json"
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": replicas, "log_dirs": ["any"] * len(replicas)}]}))
    return str(path)


async def until(check: Any, what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        await asyncio.sleep(0.1)


async def test_execute_verify_moves_replicas_and_deletes_the_old_one(cluster, tmp_path):
    zk = await cluster.open()
    bootstrap = cluster.brokers[1].bootstrap
    await asyncio.to_thread(create_topic, bootstrap, "moving", [1, 2])
    await cluster.until_all_agree(lambda m: "moving" in m["topics"] and partitions(m, "moving")[0][1] == 1
                                  and sorted(partitions(m, "moving")[0][4]) == [1, 2], "moving led by 1, ISR 1,2")
    values = [b"m%04d" % i for i in range(N)]
    await asyncio.to_thread(produce, bootstrap, "moving", values)
    assert (cluster.brokers[1].log_dir / "moving-0").is_dir()
    json_file = plan(tmp_path, "moving", [2, 3])

    out = await asyncio.to_thread(tool, bootstrap, "--reassignment-json-file", json_file, "--execute")
    assert "Successfully started partition reassignment for moving-0" in out, out

    verified: list[str] = []

    def completed() -> bool:
        verified.append(tool(bootstrap, "--reassignment-json-file", json_file, "--verify"))
        return "Reassignment of partition moving-0 is completed." in verified[-1]
    await until(completed, "--verify says completed", timeout=60)

    view = await cluster.until_all_agree(
        lambda m: partitions(m, "moving")[0][3] == [2, 3] and sorted(partitions(m, "moving")[0][4]) == [2, 3]
        and partitions(m, "moving")[0][1] in (2, 3), "moving on 2,3")
    # Kafka's znode JSON: RS = TRS, no adding/removing replicas left
    data, _ = await zk.get_data_and_stat("/brokers/topics/moving")
    doc = json.loads(data)
    assert (doc["partitions"], doc["adding_replicas"], doc["removing_replicas"], doc["version"]) == (
        {"0": [2, 3]}, {}, {}, 3), doc
    state, _ = await zk.get_data_and_stat("/brokers/topics/moving/partitions/0/state")
    st = json.loads(state)
    assert st["leader"] == partitions(view, "moving")[0][1] and sorted(st["isr"]) == [2, 3], st
    # broker 1 got StopReplica with delete: its partition directory goes
    await until(lambda: not (cluster.brokers[1].log_dir / "moving-0").exists(), "broker 1's moving-0 deleted")
    assert (cluster.brokers[3].log_dir / "moving-0").is_dir()

    # the data is on broker 3: kill broker 2, read everything from broker 3 as the leader
    if partitions(view, "moving")[0][1] != 3:
        await asyncio.to_thread(cluster.brokers[2].kill)
        await cluster.until_all_agree(lambda m: partitions(m, "moving")[0][1] == 3, "broker 3 leads", among=[1, 3])
    assert await asyncio.to_thread(read_all, cluster.brokers[3].bootstrap, "moving", N) == values


def alter_reassignment(port: int, topic: str, replicas: list[int]) -> Any:
    """AlterPartitionReassignments straight to the controller: no JVM start, so it arrives well
    within the 4 s session of a broker just paused (kafka-reassign-partitions may take longer)."""
    with RawConnection(port) as conn:
        r = conn.call(45, 0, AlterPartitionReassignmentsRequest(timeout_ms=10_000, topics=[ReassignableTopic(
            name=topic, partitions=[ReassignablePartition(partition_index=0, replicas=replicas)])]))
    return r.error_code, [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.responses]


def list_reassignments(port: int) -> Any:
    with RawConnection(port) as conn:
        return conn.call(46, 0, ListPartitionReassignmentsRequest(timeout_ms=10_000, topics=None))


async def test_list_shows_a_reassignment_held_back_and_cancel_reverts_it(cluster, tmp_path):
    """The new replica's broker paused (SIGSTOP; not the controller): it cannot catch up, so the
    reassignment [o1, o2] -> [o2, p] stays in progress: --list and ListPartitionReassignments
    show RS = TRS + ORS = [o2, p, o1], adding p, removing o1, and the znode has Kafka's
    adding/removing maps; CreatePartitions is refused. --cancel goes back to the origin replicas in
    RS order ([o2, o1]: Kafka's replicas.diff(addingReplicas)). (The paused broker's session
    is awaited to expire before CreatePartitions, so the StopReplica of the cancellation is not sent to it: as in Kafka's
    ZooKeeper mode, what it may have created stays a stray log; not checked.)"""
    zk = await cluster.open()
    cid, _ = await cluster.controller()
    paused = max(b for b in (1, 2, 3) if b != cid)
    o1, o2 = [b for b in (1, 2, 3) if b != paused]
    bootstrap = cluster.brokers[cid].bootstrap
    await asyncio.to_thread(create_topic, bootstrap, "stuck", [o1, o2])
    await cluster.until_all_agree(lambda m: "stuck" in m["topics"]
                                  and sorted(partitions(m, "stuck")[0][4]) == sorted([o1, o2]), "stuck in sync")
    await asyncio.to_thread(produce, bootstrap, "stuck", [b"s%04d" % i for i in range(N)])
    cluster.brokers[paused].proc.send_signal(signal.SIGSTOP)
    try:
        json_file = plan(tmp_path, "stuck", [o2, paused])
        assert await asyncio.to_thread(alter_reassignment, cluster.ports[cid], "stuck", [o2, paused]) == (
            0, [("stuck", [(0, 0)])])

        listed = await asyncio.to_thread(tool, bootstrap, "--list")
        assert (f"Current partition reassignments:\nstuck-0: replicas: {o2},{paused},{o1}. adding: {paused}. "
                f"removing: {o1}.") in listed, listed
        resp = await asyncio.to_thread(list_reassignments, cluster.ports[cid])
        assert resp.error_code == 0
        assert [(t.name, [(p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
                          for p in t.partitions]) for t in resp.topics] == [
            ("stuck", [(0, [o2, paused, o1], [paused], [o1])])]
        # a broker that is not the controller answers NOT_CONTROLLER, as Kafka's ZooKeeper-mode KafkaApis
        other = next(b for b in (o1, o2) if b != cid)
        resp = await asyncio.to_thread(list_reassignments, cluster.ports[other])
        assert resp.error_code == ErrorCode.NOT_CONTROLLER and resp.topics == []
        data, _ = await zk.get_data_and_stat("/brokers/topics/stuck")
        doc = json.loads(data)
        assert (doc["partitions"], doc["adding_replicas"], doc["removing_replicas"]) == (
            {"0": [o2, paused, o1]}, {"0": [paused]}, {"0": [o1]}), doc
        verify = await asyncio.to_thread(tool, bootstrap, "--reassignment-json-file", json_file, "--verify")
        assert "Reassignment of partition stuck-0 is still in progress." in verify, verify
        # CreatePartitions is refused meanwhile, as Kafka's ZkAdminManager does (the znode is the controller's),
        # and before any other check: once the paused broker's session has expired, the replication
        # factor of 3 exceeds the live brokers, and that must not be the answer (issue #21 §7: it was,
        # when the session happened to expire first)
        await cluster.until_all_agree(lambda m: paused not in [b[0] for b in m["brokers"]],
                                      f"broker {paused}'s session expired", among=[o1, o2])
        with RawConnection(cluster.ports[cid]) as conn:
            r = conn.call(37, 3, CreatePartitionsRequest(topics=[CreatePartitionsTopic(
                name="stuck", count=2, assignments=None)], timeout_ms=10_000))
        assert [(t.error_code, t.error_message) for t in r.results] == [
            (ErrorCode.REASSIGNMENT_IN_PROGRESS, "A partition reassignment is in progress for the topic 'stuck'.")]
        data, _ = await zk.get_data_and_stat("/brokers/topics/stuck")
        assert json.loads(data)["partitions"] == {"0": [o2, paused, o1]}

        # --preserve-throttles: clearing them would ask the paused broker too
        out = await asyncio.to_thread(tool, bootstrap, "--reassignment-json-file", json_file, "--cancel",
                                      "--preserve-throttles")
        assert "Successfully cancelled partition reassignment for: stuck-0" in out, out
        listed = await asyncio.to_thread(tool, bootstrap, "--list")
        assert "No partition reassignments found." in listed, listed
        data, _ = await zk.get_data_and_stat("/brokers/topics/stuck")
        doc = json.loads(data)
        assert (doc["partitions"], doc["adding_replicas"], doc["removing_replicas"]) == ({"0": [o2, o1]}, {}, {}), doc
        await cluster.until_all_agree(lambda m: partitions(m, "stuck")[0][3] == [o2, o1]
                                      and sorted(partitions(m, "stuck")[0][4]) == sorted([o1, o2]),
                                      "stuck back on the origin replicas", among=[o1, o2])
    finally:
        cluster.brokers[paused].proc.send_signal(signal.SIGCONT)
    await cluster.until_all_agree(lambda m: partitions(m, "stuck")[0][3] == [o2, o1], "all agree on the origin")
    assert (cluster.brokers[o1].log_dir / "stuck-0").is_dir() and (cluster.brokers[o2].log_dir / "stuck-0").is_dir()


async def test_the_deprecated_reassign_partitions_znode_is_honoured(cluster, tmp_path):
    """/admin/reassign_partitions (what `--zookeeper` tools wrote before 2.4; a Kafka 3.9
    controller still watches it): the known partition is moved and the unknown one refused, each
    taken out of the znode, which is deleted once empty."""
    zk = await cluster.open()
    bootstrap = cluster.brokers[1].bootstrap
    await asyncio.to_thread(create_topic, bootstrap, "legacy", [2, 3])
    await cluster.until_all_agree(lambda m: "legacy" in m["topics"]
                                  and sorted(partitions(m, "legacy")[0][4]) == [2, 3], "legacy in sync")
    await asyncio.to_thread(produce, bootstrap, "legacy", [b"l%04d" % i for i in range(N)])
    await zk.create_recursive("/admin/reassign_partitions", json.dumps({"version": 1, "partitions": [
        {"topic": "legacy", "partition": 0, "replicas": [1, 2]},
        {"topic": "nosuch", "partition": 0, "replicas": [1]}]}).encode())
    await cluster.until_all_agree(lambda m: partitions(m, "legacy")[0][3] == [1, 2]
                                  and sorted(partitions(m, "legacy")[0][4]) == [1, 2], "legacy on 1,2")

    async def gone() -> bool:
        return not await zk.path_exists("/admin/reassign_partitions")
    deadline = time.monotonic() + WAIT
    while not await gone():
        assert time.monotonic() < deadline, "/admin/reassign_partitions still there"
        await asyncio.sleep(0.1)
    data, _ = await zk.get_data_and_stat("/brokers/topics/legacy")
    doc = json.loads(data)
    assert (doc["partitions"], doc["adding_replicas"], doc["removing_replicas"]) == ({"0": [1, 2]}, {}, {}), doc
    await until(lambda: not (cluster.brokers[3].log_dir / "legacy-0").exists(), "broker 3's legacy-0 deleted")
    assert await asyncio.to_thread(read_all, cluster.brokers[1].bootstrap, "legacy", N) == [
        b"l%04d" % i for i in range(N)]


async def test_a_new_controller_resumes_a_reassignment_in_progress(cluster, tmp_path):
    """[c, o] -> [o, p] with p paused (so the move cannot complete) and c the controller; c is
    killed -9: the new controller reads the adding/removing replicas from the topic znode and
    resumes (Kafka's initializePartitionReassignments); once p runs again it catches up, joins
    the ISR and the reassignment completes without c. p then serves every record as leader."""
    await cluster.open()
    c, _ = await cluster.controller()
    o, p = [b for b in (1, 2, 3) if b != c]
    await asyncio.to_thread(create_topic, cluster.brokers[c].bootstrap, "resumed", [c, o])
    await cluster.until_all_agree(lambda m: "resumed" in m["topics"]
                                  and sorted(partitions(m, "resumed")[0][4]) == sorted([c, o]), "resumed in sync")
    values = [b"r%04d" % i for i in range(N)]
    await asyncio.to_thread(produce, cluster.brokers[c].bootstrap, "resumed", values)
    json_file = plan(tmp_path, "resumed", [o, p])
    cluster.brokers[p].proc.send_signal(signal.SIGSTOP)
    try:
        assert await asyncio.to_thread(alter_reassignment, cluster.ports[c], "resumed", [o, p]) == (
            0, [("resumed", [(0, 0)])])
        await asyncio.to_thread(cluster.brokers[c].kill)
        assert await cluster.until_controller_other_than(c, WAIT) == o
        listed = await asyncio.to_thread(tool, cluster.brokers[o].bootstrap, "--list")
        assert f"resumed-0: replicas: {o},{p},{c}. adding: {p}. removing: {c}." in listed, listed
    finally:
        cluster.brokers[p].proc.send_signal(signal.SIGCONT)

    def completed() -> bool:
        return "Reassignment of partition resumed-0 is completed." in tool(
            cluster.brokers[o].bootstrap, "--reassignment-json-file", json_file, "--verify")
    try:
        await until(completed, "--verify says completed", timeout=60)
    except AssertionError as e:  # what the brokers said about the partition, to tell why
        said = {b: [line for line in cluster.brokers[b].log_text().splitlines() if "resumed-0" in line][-15:]
                for b in (o, p)}
        raise AssertionError(f"{e}\n" + "\n".join(f"broker {b}:\n" + "\n".join(ls) for b, ls in said.items())) from e
    await cluster.until_all_agree(lambda m: partitions(m, "resumed")[0][3] == [o, p]
                                  and sorted(partitions(m, "resumed")[0][4]) == sorted([o, p]), "resumed on o,p",
                                  among=[o, p])
    await asyncio.to_thread(cluster.brokers[o].kill)
    await cluster.until_all_agree(lambda m: partitions(m, "resumed")[0][1] == p, "p leads", among=[p])
    assert await asyncio.to_thread(read_all, cluster.brokers[p].bootstrap, "resumed", N) == values


THROTTLE = 60_000  # B/s: Kafka's rate allows ~10 windows of it as a burst, then this rate


# followers fetch at most 32 KiB per partition: a throttle can only act between fetches
small_fetch_cluster = cluster_fixture(f"replica.lag.time.max.ms={LAG_MS}", "replica.fetch.max.bytes=32768")


def broker_configs(broker: BrokerProcess, broker_id: int) -> dict[str, str]:
    """The broker's dynamic configs (source DYNAMIC_BROKER_CONFIG), as DescribeConfigs answers them."""
    return {k: v for k, (v, source, _) in describe(broker, 4, str(broker_id)).items() if source == 2}


async def test_throttle_bounds_the_moving_replica_and_verify_clears_it(small_fetch_cluster, tmp_path):
    """`kafka-reassign-partitions --throttle` (KIP-73): the tool sets leader/follower
    .replication.throttled.rate on brokers 1-3 and the topic's throttled replica lists (0:1,0:2 as
    leaders, 0:3 as the follower); broker 3 copies 1.2 MB no faster than the rate allows after
    its burst (unthrottled it takes well under a second), and `--verify`, once complete, clears
    every throttle. Replication of in-sync followers is not throttled meanwhile: acks=all
    produces to the partition go on."""
    cluster = small_fetch_cluster
    await cluster.open()
    bootstrap = cluster.brokers[1].bootstrap
    await asyncio.to_thread(create_topic, bootstrap, "slow", [1, 2])
    await cluster.until_all_agree(lambda m: "slow" in m["topics"] and partitions(m, "slow")[0][1] == 1
                                  and sorted(partitions(m, "slow")[0][4]) == [1, 2], "slow led by 1, ISR 1,2")
    values = [b"%04d" % i + bytes(6000) for i in range(200)]  # 1.2 MB: 20 bursts of the rate
    await asyncio.to_thread(produce, bootstrap, "slow", values)
    json_file = plan(tmp_path, "slow", [1, 2, 3])

    started = time.monotonic()
    out = await asyncio.to_thread(tool, bootstrap, "--reassignment-json-file", json_file, "--execute",
                                  "--throttle", str(THROTTLE))
    assert f"The inter-broker throttle limit was set to {THROTTLE} B/s" in out, out
    assert "Successfully started partition reassignment for slow-0" in out, out
    for b in IDS:
        configs = await asyncio.to_thread(broker_configs, cluster.brokers[b], b)
        assert {k: configs.get(k) for k in ("leader.replication.throttled.rate",
                                            "follower.replication.throttled.rate")} == {
            "leader.replication.throttled.rate": str(THROTTLE), "follower.replication.throttled.rate": str(THROTTLE)}
        assert "Replication throttle changed" in cluster.brokers[b].log_text()

    # acks=all to the throttled partition meanwhile: 1 and 2 are in the ISR, not throttled
    await asyncio.to_thread(produce_more, bootstrap, "slow", [b"during-%d" % i for i in range(20)], len(values))

    verified: list[str] = []

    def completed() -> bool:
        verified.append(tool(bootstrap, "--reassignment-json-file", json_file, "--verify"))
        return "Reassignment of partition slow-0 is completed." in verified[-1]
    await until(completed, "--verify says completed", timeout=120)
    took = time.monotonic() - started
    # 1.2 MB at 60 kB/s after a burst of at most ~0.6 MB + one fetch: at least ~10 s
    assert took >= 8, f"broker 3 caught up in {took:.1f}s: not throttled"
    assert "Reassignment of partition slow-0 is still in progress." in verified[0], verified[0]
    assert "Clearing broker-level throttles on brokers 1,2,3" in verified[-1], verified[-1]
    assert "Clearing topic-level throttles on topic slow" in verified[-1], verified[-1]
    for b in IDS:
        configs = await asyncio.to_thread(broker_configs, cluster.brokers[b], b)
        assert "leader.replication.throttled.rate" not in configs and "follower.replication.throttled.rate" not in configs
    assert await asyncio.to_thread(read_all, cluster.brokers[3].bootstrap, "slow", len(values) + 20) == [
        *values, *(b"during-%d" % i for i in range(20))]


def produce_more(bootstrap: str, topic: str, values: list[bytes], first: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2, request_timeout_ms=10_000)
    try:
        futures = [producer.send(topic, v, partition=0) for v in values]
        producer.flush(30)
        assert [f.get(10).offset for f in futures] == list(range(first, first + len(values)))
    finally:
        producer.close(5)
