"""Replication between real `odradek serve` processes (issue #15): followers fetch from their
leaders, the leader's high watermark follows the ISR, acks=all waits for it, and what was
acknowledged with acks=all survives the leader's kill -9 (the new leader, from the ISR, has it)."""

from __future__ import annotations

import asyncio
import signal
import time
import warnings
from typing import Any

import pytest

from protocol.messages import FindCoordinatorRequest
from tests.cluster.processes import (
    IDS,
    PROMISE_S,
    RF3,
    WAIT,
    Cluster,
    cluster_fixture,
    partitions,
    running_cluster,
)
from tests.raw_client import RawConnection

with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic
    from kafka.errors import KafkaError

N = 300


LAG_MS = 800  # replica.lag.time.max.ms: well inside the 4 s session, so the leader acts first


cluster = cluster_fixture(f"replica.lag.time.max.ms={LAG_MS}")


def settings(bootstrap: str | dict[str, Any]) -> dict[str, Any]:
    return {"bootstrap_servers": bootstrap} if isinstance(bootstrap, str) else bootstrap


def produce_acks_all(bootstrap: str | dict[str, Any], topic: str, values: list[bytes]) -> dict[bytes, tuple[int, int]]:
    """Send with acks=all; the (partition, offset) each value was acknowledged at. `bootstrap`:
    an address, or kafka-python settings (Cluster.client_settings)."""
    producer = KafkaProducer(**settings(bootstrap), acks="all", linger_ms=2, request_timeout_ms=10_000)
    try:
        futures = [(v, producer.send(topic, v, partition=i % len(RF3))) for i, v in enumerate(values)]
        producer.flush(30)
        return {v: (f.get(10).partition, f.get(10).offset) for v, f in futures}
    finally:
        producer.close(5)


def read_all(bootstrap: str | dict[str, Any], topic: str, expected: int) -> dict[bytes, tuple[int, int]]:
    """Every record of the topic's partitions from the start (assigned, no group), bounded."""
    consumer = KafkaConsumer(**settings(bootstrap), enable_auto_commit=False, consumer_timeout_ms=2000)
    try:
        tps = [TopicPartition(topic, p) for p in RF3]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: dict[bytes, tuple[int, int]] = {}
        deadline = time.monotonic() + WAIT
        while len(out) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for r in records:
                    out[r.value] = (r.partition, r.offset)
        return out
    finally:
        consumer.close()


async def test_acks_all_records_survive_the_leaders_kill(cluster):
    cid, acked = await open_and_produce_rf3(cluster)
    # every partition's high watermark reached its log end: the ISR (all three) has everything
    await kill_a_leader_and_read_back(cluster, cid, acked)


async def open_and_produce_rf3(cluster: Cluster) -> tuple[int, dict[bytes, tuple[int, int]]]:
    """Start the cluster and produce N records to rf3 with acks=all through the controller, every
    one acknowledged: the controller's id and where each value was acknowledged."""
    await cluster.open()
    cid, _ = await cluster.controller()
    values = [b"v%04d" % i for i in range(N)]
    acked = await asyncio.to_thread(produce_acks_all, cluster.client_settings(cid), "rf3", values)
    assert sorted(acked) == values
    return cid, acked


async def kill_a_leader_and_read_back(cluster: Cluster, cid: int, acked: dict[bytes, tuple[int, int]]) -> None:
    """kill -9 a broker other than the controller `cid` (it leads rf3 partitions): new leaders
    from the ISR, and every acks=all record read back at the offset it was acknowledged at."""
    victim = next(i for i in IDS if i != cid)
    cluster.brokers[victim].kill()
    view = await cluster.until_all_agree(
        lambda m: all(s[0] == 0 and s[1] not in (victim, -1) for s in partitions(m, "rf3").values()),
        "new leaders for the victim's partitions", timeout=PROMISE_S + WAIT)
    assert all(victim not in s[4] for s in partitions(view, "rf3").values())
    read = await asyncio.to_thread(read_all, cluster.client_settings(cid), "rf3", N)
    assert read == acked  # same offsets, nothing lost, nothing else


async def test_a_paused_follower_leaves_the_isr_and_rejoins_when_it_catches_up(cluster):
    """SIGSTOP a follower: its leaders drop it from the ISR after replica.lag.time.max.ms
    (AlterPartition to the controller) while its registration still stands, acks=all goes on
    with the two others; SIGCONT: it fetches what it missed and is taken back into the ISR."""
    await cluster.open()
    cid, _ = await cluster.controller()
    paused = next(i for i in IDS if i != cid)
    leader_of = {p: r[0] for p, r in RF3.items()}
    cluster.brokers[paused].proc.send_signal(signal.SIGSTOP)
    try:
        view = await cluster.until_all_agree(
            lambda m: all(sorted(s[4]) == sorted(set(IDS) - {paused}) for p, s in partitions(m, "rf3").items()
                          if leader_of[p] != paused), "the paused follower out of the ISRs", among=[
                i for i in IDS if i != paused], timeout=PROMISE_S)
        assert [b[0] for b in view["brokers"]] == list(IDS)  # not by the controller: still registered
        values = [b"p%04d" % i for i in range(60)]
        live = [p for p in RF3 if leader_of[p] != paused]

        def produce() -> dict[bytes, tuple[int, int]]:
            producer = KafkaProducer(bootstrap_servers=cluster.brokers[cid].bootstrap, acks="all",
                                     request_timeout_ms=10_000)
            try:
                fs = [(v, producer.send("rf3", v, partition=live[i % len(live)])) for i, v in enumerate(values)]
                producer.flush(20)
                return {v: (f.get(10).partition, f.get(10).offset) for v, f in fs}
            finally:
                producer.close(5)

        acked = await asyncio.to_thread(produce)
        assert sorted(acked) == values
    finally:
        cluster.brokers[paused].proc.send_signal(signal.SIGCONT)
    await cluster.until_all_agree(lambda m: all(sorted(s[4]) == sorted(IDS) for s in partitions(m, "rf3").values()),
                                  "the follower back in every ISR")


async def test_followers_fetch_in_sessions_and_stay_in_sync_while_idle(zookeeper, tmp_path):
    """Followers keep one fetch session per fetcher and leader (KIP-227), here with
    num.replica.fetchers=2 (a leader's partitions split over two fetchers, two connections):
    many acks=all sends, each needing the followers' next fetch, open at most two sessions per
    follower on each leader at start (a full fetch each time would open one per fetch;
    sessionless fetches none). Idle for several replica.lag.time.max.ms, their incremental
    fetches name no partition, yet the leaders count them caught up: every ISR stays full."""
    async with running_cluster(zookeeper, tmp_path, (f"replica.lag.time.max.ms={LAG_MS}",
                                                     "num.replica.fetchers=2")) as cluster:
        await _check_sessions(cluster)


async def _check_sessions(cluster: Cluster) -> None:
    await cluster.open()
    sends = 120

    def produce_one_by_one() -> None:
        producer = KafkaProducer(bootstrap_servers=cluster.brokers[1].bootstrap, acks="all", linger_ms=0,
                                 request_timeout_ms=10_000)
        try:
            for i in range(sends):  # each waits for its ack: the followers' fetches move the HW
                producer.send("rf3", b"s%04d" % i, partition=i % len(RF3)).get(10)
        finally:
            producer.close(5)

    await asyncio.to_thread(produce_one_by_one)
    sessions = {(leader, follower): sum(f"replica={follower}" in line for line in b.log_text().splitlines()
                                        if "Created fetch session for a follower" in line)
                for leader, b in cluster.brokers.items() for follower in IDS if follower != leader}
    assert all(1 <= n <= 4 for n in sessions.values()), sessions
    fetchers = {line.split(" fetcher=")[1].split()[0] for b in cluster.brokers.values()
                for line in b.log_text().splitlines() if "Added fetcher" in line and "topic='rf3'" in line}
    assert fetchers == {"0", "1"}, fetchers  # rf3-0..5 hash to both fetcher ids
    said = {i: len(b.log_text()) for i, b in cluster.brokers.items()}
    await asyncio.sleep(4 * LAG_MS / 1000)  # what is tested is that nothing happens meanwhile
    view = await cluster.until_all_agree(lambda m: True, "the ISRs after an idle while")
    assert {p: sorted(s[4]) for p, s in partitions(view, "rf3").items()} == {p: list(IDS) for p in RF3}
    shrinks = [b.log_text()[said[i]:] for i, b in cluster.brokers.items()]
    assert not any("out of sync replicas" in text for text in shrinks), shrinks


async def test_acks_all_below_min_insync_replicas_is_refused(cluster):
    """min.insync.replicas=2: once both followers of a partition are out of its ISR (paused),
    acks=all produces are refused before the append (NOT_ENOUGH_REPLICAS); acks=1 still works;
    back, the followers rejoin and acks=all is accepted again."""

    await cluster.open()
    cid, _ = await cluster.controller()
    followers = [i for i in IDS if i != cid]
    admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[cid].bootstrap, request_timeout_ms=20_000)
    try:
        admin.create_topics([NewTopic("durable", -1, -1, replica_assignments={0: [cid, *followers]},
                                      topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()
    await cluster.until_all_agree(lambda m: "durable" in m["topics"]
                                  and sorted(partitions(m, "durable")[0][4]) == sorted(IDS), "durable, full ISR")

    # both producers know the partition's leader before the followers pause: a metadata request
    # sent to a paused broker (its socket still accepts) would only time out
    producers = {acks: KafkaProducer(bootstrap_servers=cluster.brokers[cid].bootstrap, acks=acks, retries=0,
                                     request_timeout_ms=10_000) for acks in ("all", 1)}
    for producer in producers.values():
        assert await asyncio.to_thread(producer.partitions_for, "durable") == {0}

    def send(acks: int | str) -> Any:
        return producers[acks].send("durable", b"x", partition=0).get(15)

    try:
        await _check_min_insync(cluster, cid, followers, send)
    finally:
        for producer in producers.values():
            producer.close(5)


async def _check_min_insync(cluster: Cluster, cid: int, followers: list[int], send: Any) -> None:
    from kafka.errors import NotEnoughReplicasError

    assert (await asyncio.to_thread(send, "all")).offset == 0
    for f in followers:
        cluster.brokers[f].proc.send_signal(signal.SIGSTOP)
    try:
        await cluster.until_all_agree(lambda m: partitions(m, "durable")[0][4] == [cid], "ISR [leader]",
                                      among=[cid], timeout=PROMISE_S)
        with pytest.raises(NotEnoughReplicasError):
            await asyncio.to_thread(send, "all")
        assert (await asyncio.to_thread(send, 1)).offset == 1
    finally:
        for f in followers:
            cluster.brokers[f].proc.send_signal(signal.SIGCONT)
    await cluster.until_all_agree(lambda m: len(partitions(m, "durable")[0][4]) >= 2, "a follower back in the ISR",
                                  among=[cid])
    assert (await asyncio.to_thread(send, "all")).offset == 2


async def test_committed_offsets_survive_their_coordinators_kill(zookeeper, tmp_path):
    """__consumer_offsets with replication factor 3: a group's commits are replicated (acks=all),
    the coordinator is killed, the new leader of the group's offsets partition loads the group
    (Kafka's onElection) and answers the committed offsets."""
    from kafka.structs import OffsetAndMetadata

    async with running_cluster(zookeeper, tmp_path, ("offsets.topic.replication.factor=3",
                                                     "offsets.topic.num.partitions=3")) as cluster:
        await cluster.open()
        committed = {TopicPartition("rf3", p): 10 + p for p in RF3}

        def commit() -> None:
            consumer = KafkaConsumer(group_id="durable-group", bootstrap_servers=cluster.brokers[1].bootstrap,
                                     enable_auto_commit=False)
            try:
                consumer.assign(list(committed))
                consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in committed.items()})
            finally:
                consumer.close()

        await asyncio.to_thread(commit)
        view = await cluster.until_all_agree(lambda m: "__consumer_offsets" in m["topics"], "the offsets topic")
        assert all(len(s[3]) == 3 for s in partitions(view, "__consumer_offsets").values())
        with RawConnection(cluster.ports[1]) as conn:
            coordinator = conn.call(10, 3, FindCoordinatorRequest(key="durable-group", key_type=0)).node_id
        cluster.brokers[coordinator].kill()
        survivor = next(i for i in IDS if i != coordinator)

        def fetched() -> dict[Any, int] | None:
            admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[survivor].bootstrap, request_timeout_ms=5_000)
            try:
                return {tp: om.offset for tp, om in admin.list_group_offsets("durable-group")["durable-group"].items()}
            except KafkaError:  # COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR until the election
                return None
            finally:
                admin.close()

        deadline = time.monotonic() + PROMISE_S + WAIT
        offsets = await asyncio.to_thread(fetched)
        while offsets != committed and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            offsets = await asyncio.to_thread(fetched)
        assert offsets == committed


async def test_a_returning_leader_truncates_what_it_alone_had(zookeeper, tmp_path):
    """KIP-101/279: a leader that took acks=1 records its follower never fetched is killed, the
    follower becomes leader and takes new records; the old leader comes back as a follower, the
    new leader's DivergingEpoch makes it cut the records only it had, and it then copies the new
    ones: both replicas end up with the same log (checked by reading from it as leader). Kafka's
    default replica.lag.time.max.ms (30 s): the paused follower stays in the ISR."""
    async with running_cluster(zookeeper, tmp_path) as cluster:
        await cluster.open()
        cid, _ = await cluster.controller()
        a, b = (i for i in IDS if i != cid)
        admin = KafkaAdminClient(bootstrap_servers=cluster.brokers[cid].bootstrap, request_timeout_ms=20_000)
        try:
            admin.create_topics([NewTopic("pair", -1, -1, replica_assignments={0: [a, b]})])
        finally:
            admin.close()
        await cluster.until_all_agree(lambda m: "pair" in m["topics"] and sorted(partitions(m, "pair")[0][4]) == sorted(
            (a, b)), "pair with ISR [a, b]")

        def send(values: list[bytes], acks: int | str) -> list[int]:
            producer = KafkaProducer(bootstrap_servers=cluster.brokers[cid].bootstrap, acks=acks, linger_ms=2,
                                     request_timeout_ms=10_000)
            try:
                fs = [producer.send("pair", v, partition=0) for v in values]
                producer.flush(20)
                return [f.get(10).offset for f in fs]
            finally:
                producer.close(5)

        first = [b"first-%d" % i for i in range(20)]
        assert await asyncio.to_thread(send, first, "all") == list(range(20))
        producer = KafkaProducer(bootstrap_servers=cluster.brokers[cid].bootstrap, acks=1, linger_ms=0,
                                 request_timeout_ms=10_000)  # ready before b pauses: the pause is short
        try:
            producer.partitions_for("pair")
            cluster.brokers[b].proc.send_signal(signal.SIGSTOP)  # b stops fetching
            try:
                # b's fetch parked at a is answered (empty) after replica.fetch.wait.max.ms (500 ms);
                # records appended before that would go out in that answer and reach b on SIGCONT.
                # Nothing observable marks the moment from here: wait it out (well inside b's 4 s
                # ZooKeeper session, which must not expire: b stays in the ISR)
                await asyncio.sleep(0.7)
                only_a = [producer.send("pair", b"only-a-%d" % i, partition=0) for i in range(10)]
                producer.flush(5)
                assert [f.get(5).offset for f in only_a] == list(range(20, 30))
                cluster.brokers[a].kill()
            finally:
                cluster.brokers[b].proc.send_signal(signal.SIGCONT)
        finally:
            producer.close(5)
        await cluster.until_all_agree(lambda m: partitions(m, "pair")[0][1] == b, "b leads", timeout=PROMISE_S + WAIT)
        after = [b"after-%d" % i for i in range(15)]
        assert await asyncio.to_thread(send, after, "all") == list(range(20, 35))  # b's offsets 20.. are new ones
        mark = 0
        restarted = await cluster.start(a)
        await asyncio.to_thread(restarted.wait_for_line, "Truncating partition to the end of the diverging epoch",
                                WAIT, mark)
        await cluster.until_all_agree(lambda m: sorted(partitions(m, "pair")[0][4]) == sorted((a, b)),
                                      "a back in the ISR")
        cluster.brokers[b].kill()  # a leads again, with what it copied from b
        await cluster.until_all_agree(lambda m: partitions(m, "pair")[0][1] == a, "a leads", timeout=PROMISE_S + WAIT)

        def read() -> list[tuple[int, bytes]]:
            consumer = KafkaConsumer(bootstrap_servers=cluster.brokers[cid].bootstrap, enable_auto_commit=False)
            try:
                tp = TopicPartition("pair", 0)
                consumer.assign([tp])
                consumer.seek_to_beginning(tp)
                out: list[tuple[int, bytes]] = []
                deadline = time.monotonic() + WAIT
                while len(out) < 35 and time.monotonic() < deadline:
                    for records in consumer.poll(timeout_ms=500).values():
                        out.extend((r.offset, r.value) for r in records)
                return out
            finally:
                consumer.close()

        assert await asyncio.to_thread(read) == list(enumerate(first + after))
