"""Consumer groups end to end: kafka-python consumers and admin client, plus raw requests for the
error paths a well-behaved client never takes (stale generations, expired sessions)."""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from broker.coordinator import partition_for
from protocol.errors import ErrorCode
from protocol.messages import (
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    ProduceRequest,
    SyncGroupRequest,
)
from protocol.messages import join_group_request as jgr
from protocol.messages import leave_group_request as lgr
from protocol.messages import offset_commit_request as ocr
from protocol.messages import offset_fetch_request as ofr
from protocol.messages import produce_request as pr
from protocol.messages import sync_group_request as sgr
from protocol.records import Record, build_batch
from tests.broker_process import FAST_GROUPS, BrokerProcess
from tests.client_waits import poll_until_assigned
from tests.raw_client import RawConnection

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka import errors as kafka_errors
    from kafka.admin import NewTopic
    from kafka.structs import OffsetAndMetadata



def consumer(broker: BrokerProcess, group: str, **kw: Any) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        heartbeat_interval_ms=100,
        session_timeout_ms=10000,
        **kw,
    )


# -- raw protocol helpers ---------------------------------------------------------------------------

def join(c: RawConnection, group: str, member_id: str = "", protocols: tuple[str, ...] = ("range",), session_ms: int = 10000,
         instance: str | None = None, rebalance_ms: int = 10000) -> Any:
    return c.call(11, 5, JoinGroupRequest(
        group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms, member_id=member_id,
        group_instance_id=instance,
        protocol_type="consumer", protocols=[jgr.JoinGroupRequestProtocol(name=p, metadata=p.encode()) for p in protocols],
    ))


def join_with_id(c: RawConnection, group: str, **kw: Any) -> Any:
    first = join(c, group, **kw)
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id  # KIP-394
    return join(c, group, member_id=first.member_id, **kw)


def sync(c: RawConnection, group: str, gen: int, member: str, assignments: dict[str, bytes] | None = None,
         instance: str | None = None) -> Any:
    return c.call(14, 3, SyncGroupRequest(
        group_id=group, generation_id=gen, member_id=member, group_instance_id=instance,
        assignments=[sgr.SyncGroupRequestAssignment(member_id=m, assignment=a) for m, a in (assignments or {}).items()],
    ))


def commit(c: RawConnection, group: str, gen: int, member: str, offset: int, topic: str = "t", instance: str | None = None) -> int:
    resp = c.call(8, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=gen, member_id=member, group_instance_id=instance,
        topics=[ocr.OffsetCommitRequestTopic(name=topic, partitions=[
            ocr.OffsetCommitRequestPartition(partition_index=0, committed_offset=offset, committed_metadata="m")])],
    ))
    return resp.topics[0].partitions[0].error_code


def heartbeat(c: RawConnection, group: str, gen: int, member: str, instance: str | None = None) -> int:
    req = HeartbeatRequest(group_id=group, generation_id=gen, member_id=member, group_instance_id=instance)
    return c.call(12, 4, req).error_code


def fetch_offset(c: RawConnection, group: str, topic: str = "t") -> tuple[int, str]:
    resp = c.call(9, 7, OffsetFetchRequest(group_id=group, topics=[ofr.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])]))
    p = resp.topics[0].partitions[0]
    return p.committed_offset, p.metadata


# -- tests ------------------------------------------------------------------------------------------

def test_three_consumers_split_six_partitions_and_consume_exactly_once(gbroker: BrokerProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("six", 6, 1)])
    cond = threading.Condition()
    stop = threading.Event()
    assignments: dict[int, set[int]] = {}
    seen: dict[int, list[tuple[int, int]]] = {0: [], 1: [], 2: []}
    errors: list[BaseException] = []

    def run(idx: int) -> None:
        c = consumer(gbroker, "three")
        try:
            # Subscribe, then fetch metadata before the first poll (see group_consumer_proc.py:
            # metadata fetched before subscribe() leaves kafka-python's subscribed partitions
            # unknown, its leader rejoins once, and 3.0.12 can lose that join's result).
            c.subscribe(["six"])
            assert "six" in c.topics()
            while not stop.is_set():
                batches = c.poll(timeout_ms=100)
                got = [(r.partition, r.offset) for recs in batches.values() for r in recs]
                if got:
                    c.commit()  # synchronous, before the records count as processed
                with cond:
                    seen[idx].extend(got)
                    assignments[idx] = {tp.partition for tp in c.assignment()}
                    cond.notify_all()
        except BaseException as e:  # surfaced by the main thread
            errors.append(e)
            with cond:
                cond.notify_all()
        finally:
            c.close()

    def balanced() -> bool:
        parts = [assignments.get(i, set()) for i in range(3)]
        return bool(errors) or (all(len(p) == 2 for p in parts) and set().union(*parts) == set(range(6)))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    try:
        with cond:
            assert cond.wait_for(balanced, 60), f"never balanced: {assignments}"
        assert not errors
        producer = KafkaProducer(bootstrap_servers=gbroker.bootstrap)
        for i in range(600):
            producer.send("six", str(i).encode(), partition=i % 6)
        producer.flush()
        producer.close()
        with cond:
            assert cond.wait_for(lambda: errors or sum(len(s) for s in seen.values()) >= 600, 60)
        assert not errors
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    everything = sorted(x for s in seen.values() for x in s)
    assert everything == sorted((p, o) for p in range(6) for o in range(100))  # each record exactly once
    for i in range(3):
        assert {p for p, _ in seen[i]} <= assignments[i]
    committed = admin.list_group_offsets({"three": None})["three"]
    assert {tp.partition: om.offset for tp, om in committed.items() if tp.topic == "six"} == {p: 100 for p in range(6)}


def test_committed_offsets_and_group_survive_restart(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", overrides=FAST_GROUPS).start()
    try:
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        a.create_topics([NewTopic("keep", 2, 1)])
        a.close()
        p = KafkaProducer(bootstrap_servers=b.bootstrap)
        for i in range(10):
            p.send("keep", str(i).encode(), partition=i % 2)
        p.flush()
        p.close()
        c = consumer(b, "persist")
        tp0, tp1 = TopicPartition("keep", 0), TopicPartition("keep", 1)
        c.assign([tp0, tp1])
        c.commit({tp0: OffsetAndMetadata(3, "three", -1), tp1: OffsetAndMetadata(5, "five", -1)})
        c.close()
        m = consumer(b, "members")  # a managed group: its GroupMetadata record must reload too
        m.subscribe(["keep"])
        poll_until_assigned(m, 2)
        m.close()  # leaves: generation 2, Empty
        assert b.stop() == 0

        b.start()
        a = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            offsets = a.list_group_offsets({"persist": None})["persist"]
            assert {tp: (om.offset, om.metadata) for tp, om in offsets.items()} == {tp0: (3, "three"), tp1: (5, "five")}
            assert sorted(g["group_id"] for g in a.list_groups()) == ["members", "persist"]
            g = a.describe_groups(["members"])["members"]
            assert (g["group_state"], g["protocol_type"], g["members"]) == ("Empty", "consumer", [])
            raw = RawConnection(b.port, "raw-group-test")
            try:  # generations continue from the reloaded one (>= 1 join + 1 leave); a new group starts at 1
                assert join_with_id(raw, "members").generation_id >= 3
                assert raw.call(13, 0, LeaveGroupRequest(group_id="members", member_id="x")).error_code == ErrorCode.UNKNOWN_MEMBER_ID
            finally:
                raw.close()
        finally:
            a.close()
        c = consumer(b, "persist")
        c.assign([tp0, tp1])
        assert c.committed(tp0) == 3 and c.committed(tp1) == 5
        got: list[tuple[int, int]] = []
        for _ in range(100):  # records 3 and 4 of partition 0; partition 1 is fully committed
            got += [(r.partition, r.offset) for rs in c.poll(timeout_ms=100).values() for r in rs]
            if len(got) >= 2:
                break
        assert sorted(got) == [(0, 3), (0, 4)]
        assert c.position(tp1) == 5
        c.close()
    finally:
        b.stop()


def test_generations_members_and_stale_commits(gbroker: BrokerProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("t", 1, 1)])
    c1, c2 = RawConnection(gbroker.port, "raw-group-test"), RawConnection(gbroker.port, "raw-group-test")
    pool = ThreadPoolExecutor(2)
    try:
        fc = c1.call(10, 3, FindCoordinatorRequest(key="g", key_type=0))
        assert (fc.error_code, fc.node_id, fc.port) == (0, 0, gbroker.port)
        tc = c1.call(10, 3, FindCoordinatorRequest(key="tx", key_type=1))  # the transaction coordinator
        assert (tc.error_code, tc.node_id, tc.port) == (0, 0, gbroker.port)

        r1 = join_with_id(c1, "g")
        m1 = r1.member_id
        assert (r1.error_code, r1.generation_id, r1.leader, r1.protocol_name) == (0, 1, m1, "range")
        assert [m.member_id for m in r1.members] == [m1]
        s1 = sync(c1, "g", 1, m1, {m1: b"assign-1"})
        assert (s1.error_code, s1.assignment) == (0, b"assign-1")

        assert commit(c1, "g", 1, m1, 7) == 0
        assert fetch_offset(c1, "g") == (7, "m")
        assert commit(c1, "g", 2, m1, 8) == ErrorCode.ILLEGAL_GENERATION
        assert commit(c1, "g", 1, "nobody", 8) == ErrorCode.UNKNOWN_MEMBER_ID
        assert commit(c1, "g", -1, "", 8) == ErrorCode.UNKNOWN_MEMBER_ID  # simple commit, group not empty
        assert heartbeat(c1, "g", 1, m1) == 0
        assert heartbeat(c1, "g", 0, m1) == ErrorCode.ILLEGAL_GENERATION
        assert heartbeat(c1, "g", 1, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID

        # A second member: its join parks until the first rejoins.
        first = join(c2, "g")
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
        m2 = first.member_id
        parked = pool.submit(join, c2, "g", m2)
        for _ in range(10000):  # until the coordinator has seen the parked join
            if (code := heartbeat(c1, "g", 1, m1)) != 0:
                break
        assert code == ErrorCode.REBALANCE_IN_PROGRESS
        assert commit(c1, "g", 1, m1, 9) == 0  # still allowed while preparing the rebalance
        r1b = join(c1, "g", member_id=m1)
        r2 = parked.result(30)
        assert r1b.error_code == r2.error_code == 0
        assert r1b.generation_id == r2.generation_id == 2
        assert r1b.leader == r2.leader == m1
        assert sorted(m.member_id for m in r1b.members) == sorted([m1, m2]) and r2.members == []

        # The follower's SyncGroup waits for the leader's assignment.
        follower = pool.submit(sync, c2, "g", 2, m2)
        assert commit(c1, "g", 2, m1, 10) == ErrorCode.REBALANCE_IN_PROGRESS  # CompletingRebalance
        leader = sync(c1, "g", 2, m1, {m1: b"a1", m2: b"a2"})
        assert (leader.error_code, leader.assignment) == (0, b"a1")
        assert follower.result(30).assignment == b"a2"

        assert commit(c1, "g", 1, m1, 11) == ErrorCode.ILLEGAL_GENERATION  # the stale generation
        assert commit(c2, "g", 2, m2, 12) == 0
        assert fetch_offset(c1, "g") == (12, "m")

        # Batched LeaveGroup (v3+) with one unknown member, then the other member rejoins alone.
        leave = c2.call(13, 4, LeaveGroupRequest(group_id="g", members=[
            lgr.MemberIdentity(member_id=m2), lgr.MemberIdentity(member_id="ghost")]))
        assert leave.error_code == 0
        assert [(m.member_id, m.error_code) for m in leave.members] == [(m2, 0), ("ghost", ErrorCode.UNKNOWN_MEMBER_ID)]
        assert heartbeat(c1, "g", 2, m1) == ErrorCode.REBALANCE_IN_PROGRESS
        r = join(c1, "g", member_id=m1)
        assert (r.error_code, r.generation_id) == (0, 3)
    finally:
        pool.shutdown(wait=True)
        c1.close()
        c2.close()


def test_inconsistent_protocols_and_unknown_member(gbroker: BrokerProcess) -> None:
    c = RawConnection(gbroker.port, "raw-group-test")
    try:
        c.call(10, 3, FindCoordinatorRequest(key="p", key_type=0))
        r = join_with_id(c, "p", protocols=("range",))
        assert r.error_code == 0
        other = join(c, "p", protocols=("roundrobin",))
        assert other.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert join(c, "p", member_id="made-up").error_code == ErrorCode.UNKNOWN_MEMBER_ID
        assert join(c, "p", session_ms=10).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    finally:
        c.close()


def test_expired_session_removes_member(gbroker: BrokerProcess) -> None:
    c = RawConnection(gbroker.port, "raw-group-test")
    try:
        c.call(10, 3, FindCoordinatorRequest(key="e", key_type=0))
        r = join_with_id(c, "e", session_ms=300)
        assert sync(c, "e", 1, r.member_id, {r.member_id: b"x"}).error_code == 0
        gbroker.wait_for_line(f"Member {r.member_id} in group e has failed, removing it from the group", 30)
        assert heartbeat(c, "e", 1, r.member_id) == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        c.close()


def test_admin_list_describe_delete_groups(gbroker: BrokerProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("adm", 2, 1)])
    c = consumer(gbroker, "admin-group")
    c.subscribe(["adm"])
    # metadata before the first poll: kafka-python 3.0.12 can lose the rejoin that a topic unknown
    # at the first join triggers (see test_three_consumers_split_six_partitions_...)
    assert "adm" in c.topics()
    poll_until_assigned(c, 2)
    c.commit({TopicPartition("adm", 0): OffsetAndMetadata(0, "", -1)})
    listed = admin.list_groups()
    assert [(g["group_id"], g["protocol_type"], g["group_state"]) for g in listed] == [("admin-group", "consumer", "Stable")]
    assert admin.list_groups(states_filter=["Empty"]) == []
    desc = admin.describe_groups(["admin-group", "never-existed"])
    g = desc["admin-group"]
    assert (g["group_state"], g["protocol_type"], g["protocol_data"]) == ("Stable", "consumer", "range")
    [member] = g["members"]
    assert member["client_host"] == "/127.0.0.1"
    assert member["member_metadata"]["topics"] == ["adm"]
    assert sorted(member["member_assignment"]["assigned_partitions"][0]["partitions"]) == [0, 1]
    assert desc["never-existed"]["group_state"] == "Dead"
    assert admin.delete_groups(["admin-group"]) == {"admin-group": "NonEmptyGroupError"}
    tp0, tp1 = TopicPartition("adm", 0), TopicPartition("adm", 1)
    assert admin.delete_group_offsets("admin-group", [tp0]) == {tp0: kafka_errors.GroupSubscribedToTopicError}
    c.commit({tp1: OffsetAndMetadata(1, "", -1)})
    c.close()  # LeaveGroup: the group becomes Empty
    assert admin.describe_groups(["admin-group"])["admin-group"]["group_state"] == "Empty"
    assert admin.delete_group_offsets("admin-group", [tp1]) == {tp1: kafka_errors.NoError}
    assert admin.list_group_offsets({"admin-group": None})["admin-group"] == {TopicPartition("adm", 0): OffsetAndMetadata(0, "", -1)}
    assert admin.delete_groups(["admin-group", "nope"]) == {"admin-group": "OK", "nope": "GroupIdNotFoundError"}
    assert admin.list_groups() == []
    assert admin.list_group_offsets({"admin-group": None})["admin-group"] == {}


def test_static_member_rejoins_without_rebalance_and_fences_its_old_id(gbroker: BrokerProcess, admin: KafkaAdminClient) -> None:
    admin.create_topics([NewTopic("t", 1, 1)])
    c = RawConnection(gbroker.port, "raw-group-test")
    try:
        c.call(10, 3, FindCoordinatorRequest(key="s", key_type=0))
        first = join(c, "s", instance="i1")  # static members need no MEMBER_ID_REQUIRED round trip
        old = first.member_id
        assert (first.error_code, first.generation_id, first.leader) == (0, 1, old)
        assert sync(c, "s", 1, old, {old: b"mine"}, instance="i1").assignment == b"mine"

        again = join(c, "s", instance="i1")  # the instance restarted: same generation, no rebalance
        new = again.member_id
        assert (again.error_code, again.generation_id, again.leader, again.members) == (0, 1, old, [])
        assert new != old
        assert heartbeat(c, "s", 1, old, instance="i1") == ErrorCode.FENCED_INSTANCE_ID
        assert commit(c, "s", 1, old, 1, instance="i1") == ErrorCode.FENCED_INSTANCE_ID
        assert heartbeat(c, "s", 1, new, instance="i1") == 0
        assert sync(c, "s", 1, new, instance="i1").assignment == b"mine"  # Stable: the current assignment
        assert commit(c, "s", 1, new, 2, instance="i1") == 0

        # Administrative removal by instance id (empty member id).
        leave = c.call(13, 4, LeaveGroupRequest(group_id="s", members=[lgr.MemberIdentity(member_id="", group_instance_id="i1")]))
        assert [(m.group_instance_id, m.error_code) for m in leave.members] == [("i1", 0)]
        assert heartbeat(c, "s", 1, new, instance="i1") == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        c.close()


def test_confluent_kafka_and_aiokafka_consumer_groups(gbroker: BrokerProcess, admin: KafkaAdminClient) -> None:
    import asyncio

    import aiokafka
    import confluent_kafka

    admin.create_topics([NewTopic("compat", 2, 1)])
    producer = KafkaProducer(bootstrap_servers=gbroker.bootstrap)
    for i in range(20):
        producer.send("compat", str(i).encode(), partition=i % 2)
    producer.flush()
    producer.close()

    c = confluent_kafka.Consumer({
        "bootstrap.servers": gbroker.bootstrap, "group.id": "rdkafka", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "group.instance.id": "rd-1",
    })
    try:
        c.subscribe(["compat"])
        got = 0
        for _ in range(200):
            m = c.poll(0.1)
            if m is not None:
                assert m.error() is None
                got += 1
            if got == 20:
                break
        assert got == 20
        c.commit(asynchronous=False)
        committed = c.committed([confluent_kafka.TopicPartition("compat", p) for p in range(2)], timeout=10)
        assert [tp.offset for tp in committed] == [10, 10]
    finally:
        c.close()

    async def aio() -> dict[int, int]:
        ac = aiokafka.AIOKafkaConsumer(
            "compat", bootstrap_servers=gbroker.bootstrap, group_id="aio", auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await ac.start()
        try:
            n = 0
            while n < 20:
                n += sum(len(v) for v in (await ac.getmany(timeout_ms=1000)).values())
            await ac.commit()
            return {p: await ac.committed(aiokafka.TopicPartition("compat", p)) for p in range(2)}
        finally:
            await ac.stop()

    assert asyncio.run(aio()) == {0: 10, 1: 10}
    groups = {g["group_id"]: g["group_state"] for g in admin.list_groups()}
    # A static member does not leave on close (KIP-345): its group stays Stable until it expires.
    assert groups == {"rdkafka": "Stable", "aio": "Empty"}


def test_initial_rebalance_delay_gathers_members_into_the_first_generation(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", overrides=["group.initial.rebalance.delay.ms=1000"]).start()
    conns = [RawConnection(b.port, "raw-group-test") for _ in range(3)]
    pool = ThreadPoolExecutor(3)
    try:
        conns[0].call(10, 3, FindCoordinatorRequest(key="d", key_type=0))
        ids = [join(c, "d").member_id for c in conns]  # MEMBER_ID_REQUIRED round trips
        parked = [pool.submit(join, c, "d", m) for c, m in zip(conns, ids, strict=True)]
        results = [f.result(30) for f in parked]
        assert {r.generation_id for r in results} == {1}  # one generation, not three rebalances
        [leader] = [r for r in results if r.members]
        assert sorted(m.member_id for m in leader.members) == sorted(ids)
    finally:
        pool.shutdown(wait=True)
        for c in conns:
            c.close()
        b.stop()


def test_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout(gbroker: BrokerProcess) -> None:
    a, s, n = RawConnection(gbroker.port, "raw-group-test"), RawConnection(gbroker.port, "raw-group-test"), RawConnection(gbroker.port, "raw-group-test")
    pool = ThreadPoolExecutor(2)
    try:
        a.call(10, 3, FindCoordinatorRequest(key="r", key_type=0))
        ra = join_with_id(a, "r", rebalance_ms=1000)
        ma = ra.member_id
        assert sync(a, "r", 1, ma, {ma: b"all"}).error_code == 0
        sa = join(s, "r", rebalance_ms=1000)
        slow = pool.submit(join, s, "r", sa.member_id, rebalance_ms=1000)
        for _ in range(10000):
            if heartbeat(a, "r", 1, ma) == ErrorCode.REBALANCE_IN_PROGRESS:
                break
        join(a, "r", member_id=ma, rebalance_ms=1000)  # completes generation 2 with both
        ms = slow.result(30).member_id
        assert sync(a, "r", 2, ma, {ma: b"a", ms: b"s"}).error_code == 0
        # A third member arrives; the "slow" one never rejoins (but its session is still alive).
        mn = join(n, "r", rebalance_ms=1000).member_id
        newcomer = pool.submit(join, n, "r", mn, rebalance_ms=1000)
        for _ in range(10000):
            if heartbeat(a, "r", 2, ma) == ErrorCode.REBALANCE_IN_PROGRESS:
                break
        rejoined = join(a, "r", member_id=ma, rebalance_ms=1000)  # parks until the rebalance timeout
        assert (rejoined.error_code, rejoined.generation_id) == (0, 3)
        assert sorted(m.member_id for m in rejoined.members) == sorted([ma, mn])
        assert newcomer.result(30).generation_id == 3
        assert heartbeat(s, "r", 2, ms) == ErrorCode.UNKNOWN_MEMBER_ID
    finally:
        pool.shutdown(wait=True)
        for c in (a, s, n):
            c.close()


def test_cooperative_sticky_rebalance_with_librdkafka(gbroker: BrokerProcess, admin: KafkaAdminClient) -> None:
    """KIP-429 runs in the clients over the classic protocol: the second member takes half the
    partitions while the first keeps the rest (it is not asked to give up everything)."""
    import confluent_kafka

    admin.create_topics([NewTopic("coop", 4, 1)])
    cfg = {"bootstrap.servers": gbroker.bootstrap, "group.id": "coop",
           "partition.assignment.strategy": "cooperative-sticky", "heartbeat.interval.ms": 100}
    c1 = confluent_kafka.Consumer(cfg)
    c2 = confluent_kafka.Consumer(cfg)
    try:
        c1.subscribe(["coop"])
        for _ in range(300):
            if len(c1.assignment()) == 4:
                break
            c1.poll(0.1)
        before = {tp.partition for tp in c1.assignment()}
        assert before == {0, 1, 2, 3}
        c2.subscribe(["coop"])
        for _ in range(300):
            if len(c1.assignment()) == 2 and len(c2.assignment()) == 2:
                break
            c1.poll(0.05)
            c2.poll(0.05)
        kept, taken = {tp.partition for tp in c1.assignment()}, {tp.partition for tp in c2.assignment()}
        assert len(kept) == len(taken) == 2 and kept | taken == before
        assert admin.describe_groups(["coop"])["coop"]["protocol_data"] == "cooperative-sticky"
    finally:
        c1.close()
        c2.close()


def test_sigterm_answers_parked_joins_instead_of_waiting_for_them(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", overrides=FAST_GROUPS).start()
    a, n = RawConnection(b.port, "raw-group-test"), RawConnection(b.port, "raw-group-test")
    pool = ThreadPoolExecutor(1)
    try:
        a.call(10, 3, FindCoordinatorRequest(key="q", key_type=0))
        ma = join_with_id(a, "q", rebalance_ms=600000).member_id
        assert sync(a, "q", 1, ma, {ma: b""}).error_code == 0
        mn = join(n, "q", rebalance_ms=600000).member_id
        parked = pool.submit(join, n, "q", mn, rebalance_ms=600000)  # waits for A to rejoin
        for _ in range(10000):
            if heartbeat(a, "q", 1, ma) == ErrorCode.REBALANCE_IN_PROGRESS:
                break
        assert not parked.done()
        assert b.stop(timeout=8) == 0  # well under the 10 s drain bound
        assert parked.result(10).error_code == ErrorCode.NOT_COORDINATOR
    finally:
        pool.shutdown(wait=True)
        a.close()
        n.close()
        b.stop()


def test_a_client_produce_to_the_offsets_topic_is_refused_while_commits_work(
        gbroker: BrokerProcess, admin: KafkaAdminClient) -> None:
    """`__consumer_offsets` is written by the group coordinator only: a producer's append is
    INVALID_TOPIC_EXCEPTION with no message and offsets -1, as Kafka 3.9's appendToLocalLog
    answers; Kafka's admin client id may append (internalTopicsAllowed). The coordinator's own
    writes (origin COORDINATOR) go on: commits are stored and read back."""
    admin.create_topics([NewTopic("plain", 1, 1)])
    tp = TopicPartition("plain", 0)
    c = consumer(gbroker, "refused")
    try:
        c.assign([tp])
        c.commit({tp: OffsetAndMetadata(4, "four", -1)})  # creates __consumer_offsets on the way
        group_partition = partition_for("refused", 50)  # offsets.topic.num.partitions' default
        import confluent_kafka

        reports: list[Any] = []
        p = confluent_kafka.Producer({"bootstrap.servers": gbroker.bootstrap, "message.timeout.ms": 30000})
        p.produce("__consumer_offsets", b"v", key=b"k", partition=group_partition,
                  on_delivery=lambda err, _msg: reports.append(err))
        assert p.flush(30) == 0
        del p  # librdkafka's threads stop with its last reference
        assert [e.code() for e in reports] == [confluent_kafka.KafkaError.TOPIC_EXCEPTION]  # librdkafka: not retried
        batch = build_batch([Record(offset_delta=0, key=b"k", value=b"v")])
        request = ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[pr.TopicProduceData(
            name="__consumer_offsets", partition_data=[pr.PartitionProduceData(index=group_partition, records=batch)])])
        with RawConnection(gbroker.port, "raw-producer") as raw:
            refused = raw.call(0, 9, request).responses[0].partition_responses[0]
        assert (refused.error_code, refused.error_message, refused.base_offset, refused.log_start_offset) == (
            ErrorCode.INVALID_TOPIC_EXCEPTION, None, -1, -1)
        with RawConnection(gbroker.port, "__admin_client") as raw:
            assert raw.call(0, 9, request).responses[0].partition_responses[0].error_code == ErrorCode.NONE

        assert c.committed(tp) == 4
        c.commit({tp: OffsetAndMetadata(6, "six", -1)})
        assert c.committed(tp) == 6
        offsets = admin.list_group_offsets({"refused": None})["refused"]
        assert {t: (om.offset, om.metadata) for t, om in offsets.items()} == {tp: (6, "six")}
    finally:
        c.close()
