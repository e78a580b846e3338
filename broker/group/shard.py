"""GroupShard: the group coordinator's state of one `__consumer_offsets` partition as the
coordinator runtime loads and unloads it (Kafka's GroupCoordinatorShard; in its ZooKeeper-mode
GroupMetadataManager, doLoadGroupsAndOffsets and removeGroupsForPartition).

The groups themselves stay in the GroupCoordinator's one `groups` map (keyed by group id, as its
handlers look them up); a shard replays its partition's records into that map, starts the
loaded members' session timers, and on unload takes its partition's groups out again.

Replay, record by record in offset order (the runtime reads the partition with
loader.read_records: every record with its batch's offset and producer, and the markers), as
Kafka's doLoadGroupsAndOffsets: an offset commit sets the group's committed offset (a group known
only by its offsets is an Empty group), an offset tombstone removes it; a group record replaces
the group's metadata and members (Stable with members, else Empty) and keeps the offsets already
loaded; a group tombstone leaves only the offsets (the group goes when it has none). An offset
commit in a transactional batch (TxnOffsetCommit) is pending for its producer, not committed,
until that producer's marker: COMMIT makes it the committed offset unless a commit written after
it is there already, ABORT drops it; one with no marker yet stays pending after the load (its
transaction is still open: the transaction coordinator's marker completes it). An unreadable
record is skipped with a warning.

The shard also knows which of its groups have pending transactional offsets of a producer
(Kafka's openGroupsForProducer, kept per partition here), so a marker written to this partition
completes them without looking at every group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from broker.coordinator.loader import LoadedMarker, LoadedRecord
from broker.group import records as grec
from broker.group.metadata import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata

if TYPE_CHECKING:
    from broker.group.coordinator import GroupCoordinator

log = structlog.get_logger("odradek.group")


class GroupShard:
    def __init__(self, coordinator: GroupCoordinator, partition: int) -> None:
        self.coordinator = coordinator
        self.partition = partition
        self.open_groups_for_producer: dict[int, set[str]] = {}

    def _own_groups(self) -> list[GroupMetadata]:
        gc = self.coordinator
        return [g for gid, g in gc.groups.items() if gc.partition_for(gid) == self.partition]

    def replay(self, key: bytes, value: bytes | None) -> None:
        """A record with no batch context (read_key_values): as a plain commit of unknown offset."""
        self.replay_record(LoadedRecord(key, value, -1, -1))

    def replay_record(self, record: LoadedRecord) -> None:
        try:
            group_id = replay_record(self.coordinator.groups, record.key, record.value,
                                     batch_offset=record.batch_offset, producer_id=record.producer_id)
        except (ValueError, UnicodeDecodeError) as e:
            log.warning("skipping an unreadable __consumer_offsets record", error=str(e))
            return
        if group_id is not None and record.producer_id >= 0:
            self.add_producer_group(record.producer_id, group_id)

    def replay_end_transaction_marker(self, marker: LoadedMarker) -> None:
        self.complete_transaction(marker.producer_id, marker.commit)

    def add_producer_group(self, producer_id: int, group_id: str) -> None:
        self.open_groups_for_producer.setdefault(producer_id, set()).add(group_id)

    def remove_producer_group(self, producer_id: int, group_id: str) -> None:
        groups = self.open_groups_for_producer.get(producer_id)
        if groups is not None:
            groups.discard(group_id)
            if not groups:
                del self.open_groups_for_producer[producer_id]

    def complete_transaction(self, producer_id: int, is_commit: bool) -> None:
        """The producer's marker is written to (or replayed from) this partition: complete its
        pending offsets in every group of the partition that has some (Kafka's
        handleTxnCompletion)."""
        groups = self.coordinator.groups
        for group_id in self.open_groups_for_producer.pop(producer_id, set()):
            group = groups.get(group_id)
            if group is not None and not group.is_(GroupState.DEAD):
                group.complete_pending_txn_offset_commit(producer_id, is_commit)

    def on_loaded(self) -> None:
        """The loaded members' sessions start now (Kafka's onGroupLoaded)."""
        gc = self.coordinator
        for group in self._own_groups():
            for member in group.members.values():
                gc._complete_and_schedule_next_heartbeat(group, member)

    def on_unloaded(self) -> None:
        """Kafka's GroupCoordinator.onResignation: drop the partition's groups from memory (its
        parked joins and syncs answered NOT_COORDINATOR, so members find the new coordinator)."""
        gc = self.coordinator
        unloaded = 0
        for group in self._own_groups():
            group_id = group.group_id
            log.info(f"Unloading group metadata for {group_id} with generation {group.generation_id}")
            gc._fail_pending(group)
            group.transition_to(GroupState.DEAD)
            for member_id in list(group.members):
                gc.heartbeat_purgatory.check_and_complete(("heartbeat", group_id, member_id))
            del gc.groups[group_id]
            unloaded += 1
        if unloaded:
            log.info(f"Finished unloading {gc.runtime.topic.name}-{self.partition}. Removed {unloaded} cached groups.")


def replay_record(groups: dict[str, GroupMetadata], key_bytes: bytes, value: bytes | None, *,
                  batch_offset: int = -1, producer_id: int = -1) -> str | None:
    """Apply one `__consumer_offsets` record, of the batch at `batch_offset` (transactional for
    `producer_id` >= 0), to `groups` (see the module docstring). Returns the group of an offset
    record (None for others); raises ValueError / UnicodeDecodeError for an unreadable one."""
    key = grec.decode_key(key_bytes)
    if isinstance(key, grec.OffsetKey):
        tp = (key.topic, key.partition)
        transactional = producer_id >= 0
        if value is None:
            group = groups.get(key.group)
            if group is not None:
                if transactional:
                    group.fail_pending_txn_offset_commit(producer_id, tp)
                else:
                    group.offsets.pop(tp, None)
            return key.group
        v = grec.decode_offset_value(value)
        if key.group not in groups:
            groups[key.group] = GroupMetadata(key.group, state_timestamp=None)
        om = OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp,
                               appended_offset=batch_offset)
        if transactional:
            groups[key.group].prepare_txn_offset_commit(producer_id, {tp: om})
        else:
            groups[key.group].offsets[tp] = om
        return key.group
    if isinstance(key, grec.GroupKey):
        if value is None:
            group = groups.get(key.group)
            if group is not None:
                groups[key.group] = _carry_offsets(group, GroupMetadata(key.group, state_timestamp=None))
                if not group.has_offsets():
                    del groups[key.group]
            return None
        gv = grec.decode_group_value(value)
        old = groups.get(key.group)
        group = GroupMetadata(key.group)
        if old is not None:
            _carry_offsets(old, group)
        group.generation_id = gv.generation
        group.protocol_type = gv.protocol_type or None
        group.protocol_name = gv.protocol
        group.leader_id = gv.leader
        group.state_timestamp = gv.current_state_timestamp if gv.current_state_timestamp >= 0 else None
        for mv in gv.members:
            member = MemberMetadata(
                mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host, mv.rebalance_timeout,
                mv.session_timeout, gv.protocol_type, [(gv.protocol or "", mv.subscription)],
                assignment=mv.assignment,
            )
            group.add(member)
        group.leader_id = gv.leader if gv.leader in group.members else group.leader_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        groups[key.group] = group
    return None


def _carry_offsets(old: GroupMetadata, new: GroupMetadata) -> GroupMetadata:
    """`new` (a group record's replacement of `old`) keeps the offsets loaded so far, committed
    and pending."""
    new.offsets = old.offsets
    new.pending_txn_offset_commits = old.pending_txn_offset_commits
    return new
