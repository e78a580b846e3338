"""TxnOffsetCommit and the group side of transaction markers on one broker, with raw requests
(tests/txn_raw.py: the test plays the transactional producer and the transaction coordinator's
markers) and real consumers reading the committed offsets: a transaction's offsets are pending
-- invisible to OffsetFetch, UNSTABLE_OFFSET_COMMIT with require_stable -- until the COMMIT
marker reaches the group's `__consumer_offsets` partition, dropped by an ABORT, ordered against
plain commits by their place in the log, reloaded from the log with their markers after a kill,
and refused to fenced members as Kafka refuses them."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.messages import (
    FindCoordinatorRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)
from protocol.messages import join_group_request as jgr
from protocol.messages import offset_commit_request as ocr
from protocol.messages import sync_group_request as sgr
from tests.broker_process import FAST_GROUPS, BrokerProcess
from tests.raw_client import RawConnection
from tests.txn_raw import (
    NO_VERIFICATION,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    create_topic,
    fetch_offsets,
    init_producer_id,
    list_offset,
    txn_offset_commit,
    write_markers,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import confluent_kafka
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

OVERRIDES = [*FAST_GROUPS, "offsets.topic.num.partitions=1", NO_VERIFICATION]
OFFSETS_TP = ("__consumer_offsets", 0)  # every group's partition: one partition
UNSTABLE = ErrorCode.UNSTABLE_OFFSET_COMMIT


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path_factory.mktemp("txn-offsets") / "data", overrides=OVERRIDES).start()
    try:
        yield b
    finally:
        b.stop()


def coordinator_ready(conn: RawConnection, group: str, timeout: float = 30.0) -> None:
    """FindCoordinator (creating `__consumer_offsets`), then OffsetFetch until the group's
    partition is loaded: bounded, on the broker's answers."""
    deadline = time.monotonic() + timeout
    while True:
        found = conn.call(10, 3, FindCoordinatorRequest(key=group, key_type=0))
        if found.error_code == 0 and conn.call(9, 7, OffsetFetchRequest(group_id=group, topics=[])).error_code == 0:
            return
        assert time.monotonic() < deadline, f"the coordinator of {group} is not ready"
        time.sleep(0.05)


def plain_commit(conn: RawConnection, group: str, tp: tuple[str, int], offset: int, *, member_id: str = "",
                 generation_id: int = -1) -> int:
    resp = conn.call(8, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=generation_id, member_id=member_id, group_instance_id=None,
        topics=[ocr.OffsetCommitRequestTopic(name=tp[0], partitions=[
            ocr.OffsetCommitRequestPartition(partition_index=tp[1], committed_offset=offset, committed_metadata="")])]))
    return resp.topics[0].partitions[0].error_code


def test_offsets_pending_until_commit_dropped_on_abort_and_reloaded_with_their_markers(tmp_path: Path) -> None:
    in0, in1 = ("in", 0), ("in", 1)
    b = BrokerProcess(tmp_path / "data", overrides=OVERRIDES).start()
    try:
        with RawConnection(b.port, "txn-offsets") as conn:
            create_topic(conn, "in", 2)
            coordinator_ready(conn, "g")
            assert plain_commit(conn, "g", in0, 5) == 0
            a = init_producer_id(conn)
            assert txn_offset_commit(conn, "g", a, 0, {in0: 10, in1: 20}) == {in0: 0, in1: 0}
            # pending: OffsetFetch answers what was committed before; require_stable refuses both
            assert fetch_offsets(conn, "g", [in0, in1]) == {in0: (5, 0), in1: (-1, 0)}
            assert fetch_offsets(conn, "g", None) == {in0: (5, 0)}
            assert fetch_offsets(conn, "g", [in0, in1], require_stable=True) == {in0: (-1, UNSTABLE), in1: (-1, UNSTABLE)}
            assert fetch_offsets(conn, "g", None, require_stable=True, version=8) == {in0: (-1, UNSTABLE)}
            # the offsets are a transactional batch: it holds __consumer_offsets' last stable offset
            assert list_offset(conn, OFFSETS_TP, READ_COMMITTED) < list_offset(conn, OFFSETS_TP, READ_UNCOMMITTED)

            assert write_markers(conn, a, 0, True, 0, [OFFSETS_TP]) == {OFFSETS_TP: 0}
            assert fetch_offsets(conn, "g", [in0, in1], require_stable=True) == {in0: (10, 0), in1: (20, 0)}
            assert list_offset(conn, OFFSETS_TP, READ_COMMITTED) == list_offset(conn, OFFSETS_TP, READ_UNCOMMITTED)

            # ABORT drops the transaction's offsets
            assert txn_offset_commit(conn, "g", a, 0, {in0: 30}) == {in0: 0}
            assert write_markers(conn, a, 0, False, 0, [OFFSETS_TP]) == {OFFSETS_TP: 0}
            assert fetch_offsets(conn, "g", [in0, in1], require_stable=True) == {in0: (10, 0), in1: (20, 0)}

            # a plain commit written after a transaction's offset stays when that one commits
            p = init_producer_id(conn)
            assert txn_offset_commit(conn, "g", p, 0, {in0: 40, in1: 60}) == {in0: 0, in1: 0}
            assert plain_commit(conn, "g", in0, 50) == 0
            assert fetch_offsets(conn, "g", [in0, in1]) == {in0: (50, 0), in1: (20, 0)}
            assert write_markers(conn, p, 0, True, 0, [OFFSETS_TP]) == {OFFSETS_TP: 0}
            assert fetch_offsets(conn, "g", [in0, in1], require_stable=True) == {in0: (50, 0), in1: (60, 0)}

            # one transaction left open across the kill
            c = init_producer_id(conn)
            assert txn_offset_commit(conn, "g", c, 0, {in1: 70}) == {in1: 0}
        b.kill()
        b.start()
        with RawConnection(b.port, "txn-offsets") as conn:
            coordinator_ready(conn, "g")
            # replayed: 10/20 committed, 30 aborted, 40 older than the plain 50, 60 committed, 70 open
            assert fetch_offsets(conn, "g", [in0, in1]) == {in0: (50, 0), in1: (60, 0)}
            assert fetch_offsets(conn, "g", [in0, in1], require_stable=True) == {in0: (50, 0), in1: (-1, UNSTABLE)}
            assert write_markers(conn, c, 0, True, 0, [OFFSETS_TP]) == {OFFSETS_TP: 0}
            assert fetch_offsets(conn, "g", [in0, in1], require_stable=True) == {in0: (50, 0), in1: (70, 0)}
        b.kill()
        b.start()
        with RawConnection(b.port, "txn-offsets") as conn:
            coordinator_ready(conn, "g")
            assert fetch_offsets(conn, "g", [in0, in1], require_stable=True) == {in0: (50, 0), in1: (70, 0)}
    finally:
        b.stop()


def test_fenced_members_and_invalid_requests(broker: BrokerProcess) -> None:
    f0 = ("fence", 0)
    with RawConnection(broker.port, "txn-offsets") as conn:
        create_topic(conn, "fence", 1)
        coordinator_ready(conn, "fg")

        def join() -> tuple[str, int]:
            resp = conn.call(11, 5, JoinGroupRequest(
                group_id="fg", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                group_instance_id="i1", protocol_type="consumer",
                protocols=[jgr.JoinGroupRequestProtocol(name="range", metadata=b"")]))
            assert resp.error_code == 0, resp
            return resp.member_id, resp.generation_id

        old, gen = join()  # a static member: no MEMBER_ID_REQUIRED round trip
        sync = conn.call(14, 3, SyncGroupRequest(group_id="fg", generation_id=gen, member_id=old, group_instance_id="i1",
                                                 assignments=[sgr.SyncGroupRequestAssignment(member_id=old, assignment=b"")]))
        assert sync.error_code == 0
        pid = init_producer_id(conn)

        def commit(offset: int, **member: object) -> int:
            return txn_offset_commit(conn, "fg", pid, 0, {f0: offset}, **member)[f0]  # type: ignore[arg-type]

        assert commit(1, member_id=old, generation_id=gen, instance="i1") == 0
        assert commit(2, member_id=old, generation_id=gen + 1, instance="i1") == ErrorCode.ILLEGAL_GENERATION
        assert commit(3, member_id="nobody", generation_id=gen) == ErrorCode.UNKNOWN_MEMBER_ID
        new, again = join()  # the instance restarted: its old member id is fenced
        assert (again, new != old) == (gen, True)
        assert commit(4, member_id=old, generation_id=gen, instance="i1") == ErrorCode.FENCED_INSTANCE_ID
        assert commit(5, member_id=new, generation_id=gen, instance="i1") == 0
        # no member named (v2, or v3 with none): accepted in a Stable group, unlike OffsetCommit
        assert commit(6, version=2) == 0
        assert plain_commit(conn, "fg", f0, 7) == ErrorCode.UNKNOWN_MEMBER_ID
        assert fetch_offsets(conn, "fg", [f0]) == {f0: (-1, 0)}
        assert write_markers(conn, pid, 0, True, 0, [OFFSETS_TP]) == {OFFSETS_TP: 0}
        assert fetch_offsets(conn, "fg", [f0], require_stable=True) == {f0: (6, 0)}

        # request errors: an empty group id, an unknown topic next to a known one
        assert txn_offset_commit(conn, "", pid, 0, {f0: 8}) == {f0: ErrorCode.INVALID_GROUP_ID}
        assert txn_offset_commit(conn, "fg", pid, 0, {f0: 8, ("nope", 0): 1}) == {
            ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f0: 0}
        assert write_markers(conn, pid, 0, False, 0, [OFFSETS_TP]) == {OFFSETS_TP: 0}
        # a producer epoch older than the partition's last (a marker of the bumped epoch 1):
        # refused by the log, nothing left pending
        assert write_markers(conn, pid, 1, False, 0, [OFFSETS_TP]) == {OFFSETS_TP: 0}
        assert txn_offset_commit(conn, "fg", pid, 0, {f0: 9}) == {f0: ErrorCode.INVALID_PRODUCER_EPOCH}
        assert fetch_offsets(conn, "fg", [f0], require_stable=True) == {f0: (6, 0)}


def test_real_consumers_read_committed_offsets_and_wait_for_stable_ones(broker: BrokerProcess) -> None:
    """kafka-python's committed() (no require_stable) answers the offset committed before the
    transaction; librdkafka's read_committed consumer (require_stable) gets no answer until the
    COMMIT marker, then the transaction's offset; its read_uncommitted one answers at once."""
    tp = ("real", 0)
    with RawConnection(broker.port, "txn-offsets") as conn:
        create_topic(conn, "real", 1)
        coordinator_ready(conn, "rg")
        assert plain_commit(conn, "rg", tp, 3) == 0
        pid = init_producer_id(conn)
        assert txn_offset_commit(conn, "rg", pid, 0, {tp: 8}) == {tp: 0}

        kp = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="rg", enable_auto_commit=False)
        stable = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rg",
                                           "enable.auto.commit": False, "isolation.level": "read_committed"})
        loose = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "rg",
                                          "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
        try:
            ctp = confluent_kafka.TopicPartition("real", 0)
            assert kp.committed(KafkaTopicPartition("real", 0)) == 3
            assert loose.committed([ctp], timeout=10)[0].offset == 3
            with pytest.raises(confluent_kafka.KafkaException) as waited:
                stable.committed([ctp], timeout=2)
            assert waited.value.args[0].code() == confluent_kafka.KafkaError._TIMED_OUT
            assert write_markers(conn, pid, 0, True, 0, [OFFSETS_TP]) == {OFFSETS_TP: 0}
            assert stable.committed([ctp], timeout=10)[0].offset == 8
            assert kp.committed(KafkaTopicPartition("real", 0)) == 8
        finally:
            kp.close()
            stable.close()
            loose.close()
