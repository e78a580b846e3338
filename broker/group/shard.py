"""GroupShard: the group coordinator's state of one `__consumer_offsets` partition as the
coordinator runtime loads and unloads it (Kafka's GroupCoordinatorShard; in its ZooKeeper-mode
GroupMetadataManager, doLoadGroupsAndOffsets and removeGroupsForPartition).

The groups themselves stay in the GroupCoordinator's one `groups` map (keyed by group id, as its
handlers look them up); a shard replays its partition's records into that map, starts the
loaded members' session timers, and on unload takes its partition's groups out again.

Replay, record by record in offset order: an offset commit sets the group's committed offset (a
group known only by its offsets is an Empty group), an offset tombstone removes it; a group
record replaces the group's metadata and members (Stable with members, else Empty) and keeps the
offsets already loaded; a group tombstone leaves only the offsets (the group goes when it has
none). An unreadable record is skipped with a warning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from broker.group import records as grec
from broker.group.metadata import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata

if TYPE_CHECKING:
    from broker.group.coordinator import GroupCoordinator

log = structlog.get_logger("odradek.group")


class GroupShard:
    def __init__(self, coordinator: GroupCoordinator, partition: int) -> None:
        self.coordinator = coordinator
        self.partition = partition

    def _own_groups(self) -> list[GroupMetadata]:
        gc = self.coordinator
        return [g for gid, g in gc.groups.items() if gc.partition_for(gid) == self.partition]

    def replay(self, key: bytes, value: bytes | None) -> None:
        try:
            replay_record(self.coordinator.groups, key, value)
        except (ValueError, UnicodeDecodeError) as e:
            log.warning("skipping an unreadable __consumer_offsets record", error=str(e))

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


def replay_record(groups: dict[str, GroupMetadata], key_bytes: bytes, value: bytes | None) -> None:
    """Apply one `__consumer_offsets` record to `groups` (see the module docstring); raises
    ValueError / UnicodeDecodeError for an unreadable one."""
    key = grec.decode_key(key_bytes)
    if isinstance(key, grec.OffsetKey):
        tp = (key.topic, key.partition)
        if value is None:
            group = groups.get(key.group)
            if group is not None:
                group.offsets.pop(tp, None)
            return
        v = grec.decode_offset_value(value)
        if key.group not in groups:
            groups[key.group] = GroupMetadata(key.group, state_timestamp=None)
        groups[key.group].offsets[tp] = OffsetAndMetadata(
            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
        )
    elif isinstance(key, grec.GroupKey):
        if value is None:
            group = groups.get(key.group)
            if group is not None:
                offsets = group.offsets
                groups[key.group] = GroupMetadata(key.group, offsets=offsets, state_timestamp=None)
                if not offsets:
                    del groups[key.group]
            return
        gv = grec.decode_group_value(value)
        old = groups.get(key.group)
        group = GroupMetadata(key.group, offsets=old.offsets if old else {})
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
