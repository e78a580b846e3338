"""Transactional offsets in the group's state, without a broker: GroupMetadata's pending
commits and their completion (Kafka's GroupMetadata prepareTxnOffsetCommit /
completePendingTxnOffsetCommit / onOffsetCommitAppend), and GroupShard's replay of a
`__consumer_offsets` partition holding transactional batches and their markers, in the order
Kafka's doLoadGroupsAndOffsets applies them."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.coordinator.loader import LoadedMarker, LoadedRecord
from broker.group import records as grec
from broker.group.metadata import GroupMetadata, OffsetAndMetadata
from broker.group.shard import GroupShard

T0, T1 = ("t", 0), ("t", 1)


def om(offset: int, at: int = -1) -> OffsetAndMetadata:
    return OffsetAndMetadata(offset, appended_offset=at)


def test_commit_makes_pending_offsets_committed_unless_a_later_write_is_there() -> None:
    g = GroupMetadata("g")
    g.prepare_txn_offset_commit(7, {T0: om(10), T1: om(20)})
    assert g.offsets == {} and g.pending_partitions() == {T0, T1}
    g.on_txn_offset_commit_append(7, T0, om(10, at=100))
    g.on_txn_offset_commit_append(7, T1, om(20, at=100))
    # a plain commit of T0 written after the transaction's batch (offset 150)
    g.prepare_offset_commit({T0: om(50)})
    assert g.pending_partitions() == {T0, T1}
    g.on_offset_commit_append(T0, om(50, at=150))
    assert g.offsets == {T0: om(50)} and g.pending_partitions() == {T0, T1}
    assert g.complete_pending_txn_offset_commit(7, is_commit=True) == [T1]
    assert g.offsets == {T0: om(50), T1: om(20)} and g.offsets[T1].appended_offset == 100
    assert not g.has_pending_offset_commits_from(7) and g.pending_partitions() == set()


def test_abort_drops_and_a_plain_commit_older_than_the_committed_transaction_loses() -> None:
    g = GroupMetadata("g")
    g.prepare_txn_offset_commit(7, {T0: om(30)})
    g.on_txn_offset_commit_append(7, T0, om(30, at=10))
    g.complete_pending_txn_offset_commit(7, is_commit=False)
    assert g.offsets == {} and not g.has_offsets()
    # a plain commit whose write was at 5 completes after a transaction written at 10 committed
    g.prepare_offset_commit({T0: om(1)})
    g.prepare_txn_offset_commit(8, {T0: om(2)})
    g.on_txn_offset_commit_append(8, T0, om(2, at=10))
    g.complete_pending_txn_offset_commit(8, is_commit=True)
    g.on_offset_commit_append(T0, om(1, at=5))
    assert g.offsets == {T0: om(2)} and g.pending_partitions() == set()


def test_failed_and_removed_pending_offsets_are_forgotten() -> None:
    g = GroupMetadata("g")
    g.prepare_txn_offset_commit(7, {T0: om(1), T1: om(2)})
    g.fail_pending_txn_offset_commit(7, T0)
    assert g.pending_partitions() == {T1}
    g.remove_offsets([T1])  # its topic was deleted
    assert not g.has_pending_offset_commits_from(7) and not g.has_offsets()
    # a COMMIT of an offset whose write never completed cannot be ordered: dropped
    g.prepare_txn_offset_commit(9, {T0: om(3)})
    assert g.complete_pending_txn_offset_commit(9, is_commit=True) == [] and g.offsets == {}


@dataclass
class Groups:
    """What GroupShard reads of its coordinator while replaying: the groups map."""

    groups: dict[str, GroupMetadata] = field(default_factory=dict)


def offset_record(group: str, tp: tuple[str, int], offset: int, batch: int, producer: int = -1) -> LoadedRecord:
    value = grec.offset_value(grec.OffsetValue(offset, -1, "", 0))
    return LoadedRecord(grec.offset_key(group, *tp), value, batch, producer)


def test_replay_keeps_transactional_offsets_pending_until_their_marker() -> None:
    holder = Groups()
    shard = GroupShard(holder, 0)  # type: ignore[arg-type]
    entries = [
        offset_record("g", T0, 5, batch=0),
        offset_record("g", T0, 10, batch=1, producer=7),  # committed below
        offset_record("h", T0, 11, batch=1, producer=7),  # another group, same transaction
        offset_record("g", T1, 30, batch=2, producer=8),  # aborted below
        offset_record("g", T0, 40, batch=3, producer=9),  # older than the plain 50: loses
        offset_record("g", T0, 50, batch=4),
        LoadedMarker(5, 7, commit=True),
        LoadedMarker(6, 8, commit=False),
        LoadedMarker(7, 9, commit=True),
        offset_record("g", T1, 70, batch=8, producer=10),  # still open at the end of the log
        LoadedRecord(grec.group_key("g"), grec.group_value(grec.GroupValue("consumer", 3, "range", None)), 9, -1),
    ]
    for e in entries:
        if isinstance(e, LoadedMarker):
            shard.replay_end_transaction_marker(e)
        else:
            shard.replay_record(e)
    g, h = holder.groups["g"], holder.groups["h"]
    assert committed(g) == {T0: (50, 4)} and committed(h) == {T0: (11, 1)}
    assert g.generation_id == 3  # the group record kept the offsets and the open transaction
    assert g.pending_partitions() == {T1} and list(g.pending_txn_offset_commits) == [10]
    assert shard.open_groups_for_producer == {10: {"g"}}
    shard.complete_transaction(10, is_commit=True)
    assert committed(g) == {T0: (50, 4), T1: (70, 8)} and shard.open_groups_for_producer == {}


def committed(g: GroupMetadata) -> dict[tuple[str, int], tuple[int, int]]:
    """(offset, offset of the batch it was written in) per partition."""
    return {tp: (o.offset, o.appended_offset) for tp, o in g.offsets.items()}
