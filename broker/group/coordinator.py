"""GroupCoordinator: Kafka's classic group protocol (GroupCoordinator.scala) and committed
offsets, persisted to `__consumer_offsets` (GroupMetadataManager.scala).

Rebalance protocol, as Kafka:

* JoinGroup with an empty member id (v4+) registers a *pending* member and answers
  MEMBER_ID_REQUIRED with the new id (KIP-394); older versions join directly. A join moves the
  group to PreparingRebalance (from Empty with an InitialDelayedJoin of
  `group.initial.rebalance.delay.ms`, extended while new members arrive, bounded by the
  rebalance timeout; otherwise a DelayedJoin of the rebalance timeout) and parks the request.
  The join completes when every known member has rejoined and no pending member is left, or at
  the timeout, when members that did not rejoin are removed. The next generation starts, the
  protocol is chosen by vote among those every member supports, and each waiting JoinGroup is
  answered; the leader (the first member to join, re-elected if it did not rejoin) gets every
  member's metadata.
* SyncGroup: the leader's assignment is stored (a GroupMetadata record), handed to each member
  and the group becomes Stable. Followers that sync before the leader wait for it.
  Every member must send SyncGroup within the rebalance timeout after the join completed (a
  DelayedSync, KIP-814); the ones that do not are removed and the group rebalances.
* Heartbeat keeps a member's session alive (a DelayedHeartbeat in the heartbeat purgatory,
  rescheduled on every heartbeat, join, sync and commit); during a rebalance it answers
  REBALANCE_IN_PROGRESS. A member whose session expires is removed and the group rebalances.
* LeaveGroup removes members (batched from v3) and rebalances.
* `group.max.size`: a join that would grow the group past it gets GROUP_MAX_SIZE_REACHED (while
  rebalancing, the last members to rejoin are the ones turned away).
* Static members (group.instance.id, KIP-345) keep their place across restarts: a known
  instance joining with an empty member id replaces its old member id (fencing it with
  FENCED_INSTANCE_ID) without a rebalance when the group is Stable and the protocol does not
  change; static members are not dropped for missing a rebalance (only by session expiry or
  LeaveGroup, which can name them by instance id).

Offsets: OffsetCommit checks the member and generation (a commit with generation -1 and no
member id is a "simple" commit, allowed while the group has no members), appends OffsetCommit
records to the group's `__consumer_offsets` partition with acks=all and only then updates the
cache. Which partitions this broker owns, their loading (replayed by shard.py's GroupShard) and
unloading, and the writes are the coordinator runtime's (broker.coordinator.runtime), bounded by
`offsets.commit.timeout.ms`; their errors are answered as Kafka 3.9's ZooKeeper-mode
GroupMetadataManager answers them (write_errors.py: a timed-out group write is
REBALANCE_IN_PROGRESS, a too-large offset commit INVALID_COMMIT_OFFSET_SIZE); this module is the
group protocol on top of it. Every
`offsets.retention.check.interval.ms` expired offsets (KIP-211 rules, `offsets.retention.minutes`)
are tombstoned and Empty groups without offsets are removed.

Transactional offsets (Kafka's handleTxnCommitOffsets, storeOffsets with a producer id,
handleTxnCompletion): TxnOffsetCommit's offsets are pending for their producer id from before
their write -- a transactional batch of the producer's id and epoch -- until the producer's
COMMIT/ABORT marker is written to the group's partition (WriteTxnMarkers calls
`on_transaction_completed`, and a load replays the marker): COMMIT makes each the committed
offset unless a commit written later in the log is there already (Kafka's olderThan on the
batches' offsets, which also orders plain commits against each other), ABORT drops them.
Pending commits are not answered by OffsetFetch (`pending_offset_partitions` names them for
require_stable's UNSTABLE_OFFSET_COMMIT).

Threading: none. All state lives on the event loop and is mutated by plain functions; the only
awaits are appends to `__consumer_offsets`, after which state is re-checked as Kafka does in its
store callbacks.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import structlog

from broker.coordinator import CoordinatorRuntime, InternalTopic
from broker.coordinator.loader import read_records
from broker.coordinator.steps import run_to_the_end, runs_to_the_end
from broker.group import records as grec
from broker.group.metadata import GroupMetadata, GroupState, MemberMetadata, OffsetAndMetadata
from broker.group.shard import GroupShard
from broker.group.write_errors import offset_commit_error, store_group_error
from broker.purgatory import DelayedOperation, DelayedOperationPurgatory
from broker.transaction_verification import (
    FIRST_GENERIC_ERROR_TXN_OFFSET_COMMIT_VERSION,
    verify_partition,
)
from protocol.errors import ErrorCode, KafkaProtocolError

if TYPE_CHECKING:
    from broker.server import BrokerServer

log = structlog.get_logger("odradek.group")

STEP = "group coordinator"

GROUP_METADATA_TOPIC = "__consumer_offsets"
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
UNKNOWN_MEMBER_ID = ""

TopicPartition = tuple[str, int]


@dataclass(slots=True)
class JoinResult:
    member_id: str
    error: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


def _within_metadata_size(
    offsets: dict[TopicPartition, OffsetAndMetadata], max_metadata_size: int
) -> tuple[dict[TopicPartition, int], dict[TopicPartition, OffsetAndMetadata]]:
    """(OFFSET_METADATA_TOO_LARGE for the offsets whose metadata is longer than
    `offset.metadata.max.bytes`, the others to store), as Kafka's storeOffsets filters them."""
    result: dict[TopicPartition, int] = {}
    to_store: dict[TopicPartition, OffsetAndMetadata] = {}
    for tp, om in offsets.items():
        if om.metadata is not None and len(om.metadata) > max_metadata_size:
            result[tp] = ErrorCode.OFFSET_METADATA_TOO_LARGE
        else:
            to_store[tp] = om
    return result, to_store


def _resolve(fut: Any, value: Any) -> None:
    if fut is not None and not fut.done():
        fut.set_result(value)


# -- delayed operations --------------------------------------------------------------------------


class DelayedJoin(DelayedOperation):
    """Waits for every known member to rejoin, up to the rebalance timeout."""

    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        if self.group.has_all_members_joined():
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    """The first rebalance of an empty group waits `group.initial.rebalance.delay.ms`, and again
    while new members keep arriving, until the rebalance timeout is used up."""

    def __init__(
        self,
        coordinator: GroupCoordinator,
        group: GroupMetadata,
        configured_delay_ms: int,
        delay_ms: int,
        remaining_ms: int,
    ) -> None:
        super().__init__(coordinator, group, delay_ms)
        self.configured_delay_ms = configured_delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms != 0 and group.is_(GroupState.PREPARING_REBALANCE):
            group.new_member_added = False
            delay = min(self.configured_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - delay, 0)
            log.info("new members joined: delaying the initial rebalance", group=group.group_id,
                     delay_ms=delay, remaining_ms=remaining)
            self.coordinator.rebalance_purgatory.try_complete_else_watch(
                InitialDelayedJoin(self.coordinator, group, self.configured_delay_ms, delay, remaining),
                [("join", group.group_id)],
            )
        else:
            self.coordinator.on_complete_join(group)


class DelayedSync(DelayedOperation):
    """After a join completes, every member must send SyncGroup within the rebalance timeout
    (KIP-814); those that do not are removed and the group rebalances."""

    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, generation_id: int, delay_ms: int) -> None:
        super().__init__(delay_ms)
        self.coordinator = coordinator
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        if self.group.generation_id != self.generation_id or not self.group.pending_sync_members:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_pending_sync(self.group, self.generation_id)


class DelayedHeartbeat(DelayedOperation):
    """A member's session deadline; completed (harmlessly) by each heartbeat."""

    def __init__(
        self, coordinator: GroupCoordinator, group: GroupMetadata, member_id: str, is_pending: bool, delay_ms: int
    ) -> None:
        super().__init__(delay_ms)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        if self.coordinator.heartbeat_can_complete(self.group, self.member_id, self.is_pending):
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        pass

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)


# -- the coordinator -----------------------------------------------------------------------------


class GroupCoordinator:
    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        cfg = server.config
        # ownership of the __consumer_offsets partitions, their load and unload, and the writes
        self.runtime: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            InternalTopic(GROUP_METADATA_TOPIC, cfg["offsets.topic.num.partitions"],
                          cfg["offsets.topic.replication.factor"],
                          {"cleanup.policy": "compact", "compression.type": "producer",
                           "segment.bytes": str(cfg["offsets.topic.segment.bytes"])}),
            lambda partition: GroupShard(self, partition),
            replica_manager=server.replica_manager, metadata_cache=server.metadata_cache,
            controller=server.controller, spawn=server._spawn, elections=server.zk_mode,
            what="offsets and group metadata", loader=read_records,
            write_timeout_ms=cfg["offsets.commit.timeout.ms"])
        self.initial_rebalance_delay_ms: int = cfg["group.initial.rebalance.delay.ms"]
        self.min_session_timeout_ms: int = cfg["group.min.session.timeout.ms"]
        self.max_session_timeout_ms: int = cfg["group.max.session.timeout.ms"]
        self.offsets_retention_ms: int = cfg["offsets.retention.minutes"] * 60 * 1000
        self.max_group_size: int = cfg["group.max.size"]
        self.retention_check_interval_ms: int = cfg["offsets.retention.check.interval.ms"]
        self.groups: dict[str, GroupMetadata] = {}
        self.heartbeat_purgatory: DelayedOperationPurgatory[DelayedHeartbeat] = DelayedOperationPurgatory("Heartbeat")
        self.rebalance_purgatory: DelayedOperationPurgatory[DelayedJoin | DelayedSync] = DelayedOperationPurgatory(
            "Rebalance"
        )

    # -- lifecycle ------------------------------------------------------------------------------

    async def startup(self) -> None:
        self.heartbeat_purgatory.start()
        self.rebalance_purgatory.start()
        self.runtime.start()
        await self.load()
        if self.server.controller is not None:  # ZooKeeper mode: none until one is wired in
            self.server.controller.add_listener(self.on_metadata_change)
        self.server.replica_manager.leadership_listeners.append(self.runtime.on_leadership_change)
        self.server._spawn(self._expire_periodically())

    async def _expire_periodically(self) -> None:
        """Kafka's delete-expired-group-metadata task (KafkaScheduler), every
        `offsets.retention.check.interval.ms`."""
        while True:
            await asyncio.sleep(self.retention_check_interval_ms / 1000)
            try:
                await self.cleanup_group_metadata()
            except Exception:
                log.exception("offset expiration failed")

    async def cleanup_group_metadata(self, now_ms: int | None = None) -> int:
        """Tombstone expired offsets; an Empty group left without offsets becomes Dead and its
        metadata is tombstoned too. Returns the number of offsets removed."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        removed = 0
        for group_id, group in list(self.groups.items()):
            if group.is_(GroupState.DEAD) or not self.is_coordinator_for(group_id):
                continue
            expired = group.expired_offsets(now, self.offsets_retention_ms)
            tombstones = self._drop_offsets(group, expired)
            if tombstones:
                await self._write_tombstones(group_id, tombstones, "expired group metadata")
            removed += len(expired)
        if removed:
            log.info("removed expired offsets", count=removed)
        return removed

    def _drop_offsets(self, group: GroupMetadata, partitions: list[TopicPartition]) -> list[tuple[bytes, bytes | None]]:
        """Kafka's GroupMetadataManager.cleanupGroupMetadata for one group: forget the offsets of
        `partitions`; an Empty group left without offsets (and without pending members) becomes
        Dead and leaves the cache. Returns the tombstones that make it so in the log."""
        group_id = group.group_id
        group.remove_offsets(partitions)
        tombstones: list[tuple[bytes, bytes | None]] = [(grec.offset_key(group_id, t, p), None) for t, p in partitions]
        if group.is_(GroupState.EMPTY) and not group.has_offsets() and not group.pending_members:
            log.info("group transitioned to Dead", group=group_id, generation=group.generation_id)
            group.transition_to(GroupState.DEAD)
            tombstones.append((grec.group_key(group_id), None))
            if self.groups.get(group_id) is group:
                del self.groups[group_id]
        return tombstones

    def on_metadata_change(self, event: str, topic: Any) -> None:
        """A deleted topic's partitions leave every group (Kafka's
        GroupCoordinator.onPartitionsDeleted): kept, a group would resume a re-created topic of
        the same name at the old offsets and silently skip its records."""
        if event == "deleted":
            self.on_partitions_deleted(topic.name)

    def on_partitions_deleted(self, topic: str) -> int:
        """Drop `topic`'s committed offsets from every group this broker coordinates, at once in
        memory (OffsetFetch answers without them from now on), and write the tombstones to
        `__consumer_offsets` in the background so a restart does not bring them back. Groups
        left Empty without offsets become Dead, as with offset expiry. Returns offsets removed."""
        removed = 0
        for group_id, group in list(self.groups.items()):
            if group.is_(GroupState.DEAD) or not self.is_coordinator_for(group_id):
                continue
            gone = [tp for tp in set(group.offsets) | group.pending_partitions() if tp[0] == topic]
            if not gone:
                continue
            removed += len(gone)
            self._store_tombstones(group_id, self._drop_offsets(group, gone))
        if removed:
            log.info("removed offsets of a deleted topic", topic=topic, count=removed)
        return removed

    def _store_tombstones(self, group_id: str, tombstones: list[tuple[bytes, bytes | None]]) -> None:
        self.server._spawn(self._write_tombstones(group_id, tombstones, "a deleted topic's offsets"))

    def fail_pending_requests(self) -> None:
        """Shutdown: answer every parked JoinGroup / SyncGroup with NOT_COORDINATOR (Kafka's
        onResignation), so draining does not wait for rebalance timeouts."""
        for group in self.groups.values():
            self._fail_pending(group)

    def _fail_pending(self, group: GroupMetadata) -> None:
        for member in group.members.values():
            _resolve(group.take_join_future(member), JoinResult(member.member_id, ErrorCode.NOT_COORDINATOR))
            fut, member.sync_future = member.sync_future, None
            _resolve(fut, SyncResult(ErrorCode.NOT_COORDINATOR))

    async def shutdown(self) -> None:
        self.fail_pending_requests()
        await self.heartbeat_purgatory.shutdown()
        await self.rebalance_purgatory.shutdown()
        await self.runtime.shutdown()

    # -- __consumer_offsets ---------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    def ensure_offsets_topic(self) -> bool:
        """Create `__consumer_offsets` on first use (FindCoordinator), as Kafka does (see
        CoordinatorRuntime.ensure_topic)."""
        return self.runtime.ensure_topic()

    def is_coordinator_for(self, group_id: str) -> bool:
        return self.runtime.is_active(self.partition_for(group_id))

    def validate_group_status(self, group_id: str | None, allow_empty_id: bool = False) -> int | None:
        if group_id is None or (group_id == "" and not allow_empty_id):
            return ErrorCode.INVALID_GROUP_ID
        return self.runtime.error_for(group_id)

    async def _write_tombstones(self, group_id: str, tombstones: list[tuple[bytes, bytes | None]], what: str) -> None:
        """Kafka's cleanupGroupMetadata write (expired offsets, a deleted topic's, OffsetDelete,
        DeleteGroups): appended to this leader's log with acks=0 and a failure only logged (the
        cache has already dropped them; a lost tombstone is written again by the next clean-up,
        as Kafka's comment says), so the request that caused it answers NONE."""
        error = await self.runtime.append(self.partition_for(group_id), tombstones, required_acks=0)
        if error:
            log.error(f"Failed to write {len(tombstones)} tombstones for {what}", group=group_id,
                      error=ErrorCode(error).name)

    def _group_record(self, group: GroupMetadata, assignment: dict[str, bytes]) -> tuple[bytes, bytes]:
        members = []
        if group.protocol_name is not None:
            for m in group.members.values():
                members.append(
                    grec.MemberValue(
                        m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                        m.session_timeout_ms, m.metadata(group.protocol_name), assignment.get(m.member_id, b""),
                    )
                )
        value = grec.GroupValue(
            group.protocol_type or "", group.generation_id, group.protocol_name, group.leader_id,
            group.state_timestamp if group.state_timestamp is not None else -1, members,
        )
        return grec.group_key(group.group_id), grec.group_value(value)

    async def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> int:
        """Write the group's metadata; Kafka's storeGroup error (write_errors.py)."""
        written = await self.runtime.write(self.partition_for(group.group_id),
                                           [self._group_record(group, assignment)])
        return store_group_error(written.error, written.log_error)

    def _store_group_in_background(self, group: GroupMetadata) -> None:
        async def store() -> None:
            err = await self.store_group(group, {})
            if err:
                log.warning("failed to write the empty group's metadata", group=group.group_id, error=err)

        self.server._spawn(store())

    async def load(self) -> None:
        """Start-up: rebuild groups and offsets from every led partition of `__consumer_offsets`."""
        records = await self.runtime.load_led_partitions()
        log.info("loaded groups and offsets", groups=len(self.groups), records=records)

    # -- JoinGroup ------------------------------------------------------------------------------

    async def handle_join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult:
        """Kafka's handleJoinGroup. Its checks and state changes run to their end even when the
        client goes away meanwhile (broker/coordinator/steps.py): a static member's rejoin
        writes the group before it answers; only the wait for the rebalance's end is the
        request's."""
        joined = await run_to_the_end(self._join_group(
            group_id, member_id, group_instance_id, require_known_member_id, client_id, client_host,
            rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols), STEP)
        return joined if isinstance(joined, JoinResult) else await joined

    async def _join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        require_known_member_id: bool,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
    ) -> JoinResult | asyncio.Future[JoinResult]:
        err = self.validate_group_status(group_id)
        if err is not None:
            return JoinResult(member_id, err)
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return JoinResult(member_id, ErrorCode.INVALID_SESSION_TIMEOUT)
        is_unknown = member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                return JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID)
            group = self.groups[group_id] = GroupMetadata(group_id)
        fut: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        names = [n for n, _ in protocols]
        if not self._accept_joining_member(group, member_id):
            member = group.members.get(member_id)
            if member is not None:
                self._remove_member_and_update_group(group, member, "the group is over group.max.size")
            else:
                group.remove(member_id)
            _resolve(fut, JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif group.is_(GroupState.DEAD):
            _resolve(fut, JoinResult(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
        elif not group.supports_protocols(protocol_type, names):
            _resolve(fut, JoinResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        elif is_unknown and group_instance_id is not None:
            new_id = group.generate_member_id(client_id, group_instance_id)
            old_id = group.current_static_member_id(group_instance_id)
            if old_id is None:
                log.info("static member joins", group=group_id, instance_id=group_instance_id, member_id=new_id)
                self._add_member_and_rebalance(
                    group, new_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                    protocol_type, protocols, fut, group_instance_id,
                )
            else:
                await self._update_static_member_and_rebalance(group, group_instance_id, old_id, new_id, protocols, fut)
        elif is_unknown:
            new_id = group.generate_member_id(client_id)
            if require_known_member_id:
                log.info("dynamic member joins, member id required", group=group_id, member_id=new_id)
                group.pending_members.add(new_id)
                self.heartbeat_purgatory.try_complete_else_watch(
                    DelayedHeartbeat(self, group, new_id, True, session_timeout_ms), [("heartbeat", group_id, new_id)]
                )
                _resolve(fut, JoinResult(new_id, ErrorCode.MEMBER_ID_REQUIRED))
            else:
                self._add_member_and_rebalance(
                    group, new_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                    protocol_type, protocols, fut,
                )
        elif group.is_pending_member(member_id):
            self._add_member_and_rebalance(
                group, member_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                protocol_type, protocols, fut,
            )
        elif group.is_static_member_fenced(member_id, group_instance_id):
            _resolve(fut, JoinResult(member_id, ErrorCode.FENCED_INSTANCE_ID))
        elif not group.has(member_id) or (
            group_instance_id is not None and not group.has_static_member(group_instance_id)
        ):
            _resolve(fut, JoinResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        else:
            self._current_member_join(group, group.get(member_id), protocols, fut)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(("join", group_id))
        return fut

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        """Kafka's group.max.size check: while preparing a rebalance count the members that
        have rejoined (so the last to rejoin are the ones turned away when the limit shrank);
        otherwise the group's size. Existing members are always let back in."""
        if group.state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        member = group.members.get(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return (member is not None and member.is_awaiting_join) or (
                group.num_members_awaiting_join < self.max_group_size
            )
        return member is not None or len(group.members) < self.max_group_size

    def _current_member_join(
        self, group: GroupMetadata, member: MemberMetadata, protocols: list[tuple[str, bytes]], fut: Any
    ) -> None:
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, fut, "member joining during PreparingRebalance")
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                _resolve(fut, self._join_result(group, member))
            else:
                self._update_member_and_rebalance(group, member, protocols, fut, "metadata changed")
        elif state is GroupState.STABLE:
            if group.is_leader(member.member_id):
                self._update_member_and_rebalance(group, member, protocols, fut, "leader re-joining")
            elif not member.matches(protocols):
                self._update_member_and_rebalance(group, member, protocols, fut, "metadata changed")
            else:
                _resolve(fut, self._join_result(group, member))
        else:
            _resolve(fut, JoinResult(member.member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _join_result(self, group: GroupMetadata, member: MemberMetadata) -> JoinResult:
        return JoinResult(
            member_id=member.member_id,
            error=ErrorCode.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader_id=group.leader_id or "",
            members=group.current_member_metadata() if group.is_leader(member.member_id) else [],
        )

    def _add_member_and_rebalance(
        self,
        group: GroupMetadata,
        member_id: str,
        client_id: str,
        client_host: str,
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        fut: Any,
        group_instance_id: str | None = None,
    ) -> None:
        member = MemberMetadata(
            member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms, protocol_type,
            list(protocols),
        )
        member.is_new = True
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, fut)
        # A new member cannot heartbeat while its JoinGroup is parked; time out the join instead.
        self._complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"Adding new member {member_id}")

    async def _update_static_member_and_rebalance(
        self,
        group: GroupMetadata,
        instance_id: str,
        old_id: str,
        new_id: str,
        protocols: list[tuple[str, bytes]],
        fut: Any,
    ) -> None:
        """A known static member rejoins with an unknown member id (a restart, KIP-345): it
        takes over its old member's place, fencing the old id. In a Stable group whose protocol
        does not change there is no rebalance: the group is stored and the member gets the
        current generation (with the old leader id, so it does not assign)."""
        current_leader = group.leader_id or ""
        member, old_join, old_sync = group.replace_static_member(instance_id, old_id, new_id)
        _resolve(old_join, JoinResult(old_id, ErrorCode.FENCED_INSTANCE_ID))
        _resolve(old_sync, SyncResult(ErrorCode.FENCED_INSTANCE_ID))
        log.info("static member rejoins with a new member id", group=group.group_id, instance_id=instance_id,
                 old_member_id=old_id, member_id=new_id)
        self._complete_and_schedule_next_heartbeat(group, member)
        old_protocols = list(member.protocols)
        group.update_member(member, protocols, fut)
        if group.is_(GroupState.STABLE):
            if group.protocol_name == group.select_protocol():
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                error = await self.store_group(group, assignment)
                if error:
                    group.update_member(member, old_protocols, None)
                    if group.members.get(new_id) is member:
                        group.replace_static_member(instance_id, new_id, old_id)
                        self._complete_and_schedule_next_heartbeat(group, member)
                    _resolve(fut, JoinResult(UNKNOWN_MEMBER_ID, error))
                else:
                    _resolve(group.take_join_future(member), JoinResult(
                        member_id=new_id, error=ErrorCode.NONE, generation_id=group.generation_id,
                        protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                        leader_id=current_leader,
                    ))
            else:
                self._maybe_prepare_rebalance(group, f"static member {new_id} changed the selected protocol")
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            self.prepare_rebalance(group, f"Updating metadata for static member {new_id}")

    def _update_member_and_rebalance(
        self, group: GroupMetadata, member: MemberMetadata, protocols: list[tuple[str, bytes]], fut: Any, reason: str
    ) -> None:
        group.update_member(member, protocols, fut)
        self._maybe_prepare_rebalance(group, reason)

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason)

    def _rebalance_timeout_ms(self, group: GroupMetadata) -> int:
        return max((m.rebalance_timeout_ms for m in group.members.values()), default=0)

    def prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        rebalance_timeout = self._rebalance_timeout_ms(group)
        op: DelayedJoin
        if group.is_(GroupState.EMPTY):
            delay = self.initial_rebalance_delay_ms
            op = InitialDelayedJoin(self, group, delay, delay, max(rebalance_timeout - delay, 0))
        else:
            op = DelayedJoin(self, group, rebalance_timeout)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info(
            "preparing to rebalance group", group=group.group_id, old_generation=group.generation_id,
            partition=f"{GROUP_METADATA_TOPIC}-{self.partition_for(group.group_id)}", reason=reason,
        )
        self.rebalance_purgatory.try_complete_else_watch(op, [("join", group.group_id)])

    def on_complete_join(self, group: GroupMetadata) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return  # the group died or was deleted meanwhile
        for failed in [m for m in group.not_yet_rejoined_members() if m.group_instance_id is None]:
            log.info("removing member that did not rejoin", group=group.group_id, member_id=failed.member_id)
            self._remove_heartbeat_for_leaving_member(group, failed)
            group.remove(failed.member_id)
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group could not complete rebalance because no members rejoined", group=group.group_id)
            self.rebalance_purgatory.try_complete_else_watch(
                DelayedJoin(self, group, self._rebalance_timeout_ms(group)), [("join", group.group_id)]
            )
            return
        group.init_next_generation()
        if group.is_(GroupState.EMPTY):
            log.info("group with generation is now empty", group=group.group_id, generation=group.generation_id)
            self._store_group_in_background(group)
            return
        log.info(
            "stabilized group", group=group.group_id, generation=group.generation_id,
            protocol=group.protocol_name, members=len(group.members),
        )
        for member in list(group.members.values()):
            fut = group.take_join_future(member)
            _resolve(fut, self._join_result(group, member))
            self._complete_and_schedule_next_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        self.rebalance_purgatory.try_complete_else_watch(
            DelayedSync(self, group, group.generation_id, self._rebalance_timeout_ms(group)),
            [("sync", group.group_id)],
        )

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if not group.pending_sync_members:
            self.rebalance_purgatory.check_and_complete(("sync", group.group_id))

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self.rebalance_purgatory.check_and_complete(("sync", group.group_id))

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        if generation_id != group.generation_id or group.state not in (
            GroupState.COMPLETING_REBALANCE, GroupState.STABLE
        ):
            return
        missing = list(group.pending_sync_members)
        if not missing:
            return
        log.info("removing members who have not sent their SyncGroup", group=group.group_id, members=missing)
        for member_id in missing:
            member = group.members.get(member_id)
            if member is not None:
                self._remove_heartbeat_for_leaving_member(group, member)
                group.remove(member_id)
        group.pending_sync_members.clear()
        self.prepare_rebalance(group, f"Removing {missing} on pending sync request expiration")

    # -- SyncGroup ------------------------------------------------------------------------------

    async def handle_sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        group_instance_id: str | None = None,
    ) -> SyncResult:
        """Kafka's handleSyncGroup. The leader's assignment is written and handed to every
        member even when the leader goes away meanwhile (run to its end:
        broker/coordinator/steps.py), as Kafka's storeGroup callback; cancelled in the middle,
        the other members waited in SyncGroup for an assignment nobody would hand out."""
        synced = await run_to_the_end(self._sync_group(
            group_id, generation_id, member_id, protocol_type, protocol_name, assignments, group_instance_id), STEP)
        return synced if isinstance(synced, SyncResult) else await synced

    async def _sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        group_instance_id: str | None,
    ) -> SyncResult | asyncio.Future[SyncResult]:
        err = self.validate_group_status(group_id)
        if err is not None:
            return SyncResult(err)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.is_(GroupState.DEAD):
            return SyncResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if group.is_static_member_fenced(member_id, group_instance_id):
            return SyncResult(ErrorCode.FENCED_INSTANCE_ID)
        if not group.has(member_id):
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.ILLEGAL_GENERATION)
        if protocol_type is not None and protocol_type != group.protocol_type:
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if protocol_name is not None and protocol_name != group.protocol_name:
            return SyncResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        state = group.state
        if state is GroupState.EMPTY:
            return SyncResult(ErrorCode.UNKNOWN_MEMBER_ID)
        if state is GroupState.PREPARING_REBALANCE:
            return SyncResult(ErrorCode.REBALANCE_IN_PROGRESS)
        member = group.get(member_id)
        self._remove_pending_sync_member(group, member_id)
        if state is GroupState.STABLE:
            self._complete_and_schedule_next_heartbeat(group, member)
            return SyncResult(ErrorCode.NONE, group.protocol_type, group.protocol_name, member.assignment)
        # CompletingRebalance: wait for the leader's assignment.
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        previous, member.sync_future = member.sync_future, fut
        _resolve(previous, SyncResult(ErrorCode.REBALANCE_IN_PROGRESS))
        if group.is_leader(member_id):
            log.info("assignment received from leader", group=group_id, member_id=member_id, generation=generation_id)
            assignment = {m: assignments.get(m, b"") for m in group.members}
            error = await self.store_group(group, assignment)
            if group.is_(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id:
                if error:
                    self._reset_and_propagate_assignment_error(group, error)
                    self._maybe_prepare_rebalance(group, "error when storing group assignment")
                else:
                    self._set_and_propagate_assignment(group, assignment)
                    group.transition_to(GroupState.STABLE)
        return fut

    def _set_and_propagate_assignment(self, group: GroupMetadata, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: int) -> None:
        for member in group.members.values():
            fut, member.sync_future = member.sync_future, None
            if fut is not None:
                if error:
                    _resolve(fut, SyncResult(error))
                else:
                    _resolve(fut, SyncResult(error, group.protocol_type, group.protocol_name, member.assignment))
                self._complete_and_schedule_next_heartbeat(group, member)

    # -- Heartbeat ------------------------------------------------------------------------------

    def handle_heartbeat(
        self, group_id: str, member_id: str, generation_id: int, group_instance_id: str | None = None
    ) -> int:
        err = self.validate_group_status(group_id)
        if err is not None:
            return err
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.is_static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._complete_and_schedule_next_heartbeat(group, group.get(member_id))
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _complete_and_schedule_next_heartbeat(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def _complete_and_schedule_next_expiration(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int) -> None:
        key = ("heartbeat", group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member.member_id, False, timeout_ms), [key]
        )

    def _remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.is_leaving = True
        self.heartbeat_purgatory.check_and_complete(("heartbeat", group.group_id, member.member_id))

    def heartbeat_can_complete(self, group: GroupMetadata, member_id: str, is_pending: bool) -> bool:
        if group.is_(GroupState.DEAD):
            return True
        if is_pending:
            return group.has(member_id)
        member = group.members.get(member_id)
        if member is None:
            return True
        return member.has_satisfied_heartbeat() or member.is_leaving

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        if group.is_(GroupState.DEAD):
            return
        if is_pending:
            if group.is_pending_member(member_id):
                log.info(f"Pending member {member_id} in group {group.group_id} has been removed after session timeout expiration.")
                self._remove_pending_member_and_update_group(group, member_id)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info(f"Member {member_id} in group {group.group_id} has failed, removing it from the group")
        self._remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat expiration")

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(("join", group.group_id))

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A new member may time out with a pending JoinGroup: answer it before removing it.
        _resolve(group.take_join_future(member), JoinResult(UNKNOWN_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        fut, member.sync_future = member.sync_future, None
        _resolve(fut, SyncResult(ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif group.is_(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(("join", group.group_id))

    # -- LeaveGroup -----------------------------------------------------------------------------

    def handle_leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        err = self.validate_group_status(group_id)
        if err is not None:
            return err, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [(m, i, ErrorCode.UNKNOWN_MEMBER_ID) for m, i in leaving]
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        results = []
        for member_id, instance_id in leaving:
            if member_id == UNKNOWN_MEMBER_ID:
                # Administrative removal of a static member by its instance id.
                current = group.current_static_member_id(instance_id)
                if current is None:
                    results.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
                else:
                    self._remove_current_member(group, current)
                    results.append((member_id, instance_id, ErrorCode.NONE))
            elif group.is_pending_member(member_id):
                self._remove_pending_member_and_update_group(group, member_id)
                self.heartbeat_purgatory.check_and_complete(("heartbeat", group_id, member_id))
                results.append((member_id, instance_id, ErrorCode.NONE))
            elif group.is_static_member_fenced(member_id, instance_id):
                results.append((member_id, instance_id, ErrorCode.FENCED_INSTANCE_ID))
            elif group.has(member_id):
                self._remove_current_member(group, member_id)
                results.append((member_id, instance_id, ErrorCode.NONE))
            else:
                results.append((member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
        return ErrorCode.NONE, results

    def _remove_current_member(self, group: GroupMetadata, member_id: str) -> None:
        member = group.get(member_id)
        self._remove_member_and_update_group(group, member, f"Removing member {member_id} on LeaveGroup")
        self._remove_heartbeat_for_leaving_member(group, member)
        log.info("member left the group through LeaveGroup", group=group.group_id, member_id=member_id)

    # -- offsets --------------------------------------------------------------------------------

    def _validate_offset_commit(
        self, group: GroupMetadata, generation_id: int, member_id: str, group_instance_id: str | None,
        transactional: bool = False,
    ) -> int | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id >= 0 or member_id != UNKNOWN_MEMBER_ID or group_instance_id is not None:
            if group.is_static_member_fenced(member_id, group_instance_id):
                return ErrorCode.FENCED_INSTANCE_ID
            if not group.has(member_id):
                return ErrorCode.UNKNOWN_MEMBER_ID
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        if not transactional and not group.is_(GroupState.EMPTY):
            # only members may commit to a non-empty group; not so for transactional commits,
            # whose versions before 3 name no member
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    @runs_to_the_end(STEP)
    async def handle_commit_offsets(
        self, group_id: str, member_id: str, generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata],
        group_instance_id: str | None = None, max_metadata_size: int = 4096,
    ) -> dict[TopicPartition, int]:
        """Kafka's handleCommitOffsets, run to its end even when the committer goes away
        meanwhile (broker/coordinator/steps.py): cancelled after the record was written, its
        offsets stayed pending and OffsetFetch answered the older ones until the partition was
        loaded again."""
        def all_(code: int) -> dict[TopicPartition, int]:
            return {tp: code for tp in offsets}

        err = self.validate_group_status(group_id, allow_empty_id=True)
        if err is not None:
            return all_(err)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return all_(ErrorCode.ILLEGAL_GENERATION)
            group = self.groups[group_id] = GroupMetadata(group_id)
        err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if err is not None:
            return all_(err)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return all_(ErrorCode.REBALANCE_IN_PROGRESS)
        if group.has(member_id):
            self._complete_and_schedule_next_heartbeat(group, group.get(member_id))
        result, to_store = _within_metadata_size(offsets, max_metadata_size)
        if to_store:
            group.prepare_offset_commit(to_store)
            written = await self.runtime.write(self.partition_for(group_id), self._offset_entries(group_id, to_store))
            error = offset_commit_error(written.error, written.log_error)
            if not group.is_(GroupState.DEAD):
                for tp, om in to_store.items():
                    if error:
                        group.fail_pending_offset_write(tp, om)
                    else:
                        group.on_offset_commit_append(tp, replace(om, appended_offset=written.base_offset))
            for tp in to_store:
                result[tp] = error
        return {tp: result[tp] for tp in offsets}

    @staticmethod
    def _offset_entries(group_id: str, offsets: dict[TopicPartition, OffsetAndMetadata]) -> list[tuple[bytes, bytes]]:
        return [
            (grec.offset_key(group_id, tp[0], tp[1]),
             grec.offset_value(grec.OffsetValue(om.offset, om.leader_epoch, om.metadata or "", om.commit_timestamp)))
            for tp, om in offsets.items()
        ]

    # -- transactional offsets (TxnOffsetCommit and the markers) ---------------------------------

    @runs_to_the_end(STEP)
    async def handle_txn_commit_offsets(
        self, group_id: str, producer_id: int, producer_epoch: int, member_id: str, group_instance_id: str | None,
        generation_id: int, offsets: dict[TopicPartition, OffsetAndMetadata], max_metadata_size: int = 4096,
        *, transactional_id: str | None = None, api_version: int = 4,
    ) -> dict[TopicPartition, int]:
        """Kafka's handleTxnCommitOffsets / doTxnCommitOffsets / storeOffsets with a producer id:
        the group is created Empty if unknown; a request naming a member (v3+, KIP-447) is
        checked like a plain commit (FENCED_INSTANCE_ID, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION),
        one naming none is accepted whatever the group's state (older clients send none), and
        no REBALANCE_IN_PROGRESS. The offsets are pending for the producer from before their
        write until its marker (`on_transaction_completed`); the write is a transactional batch
        of the producer's id and epoch. With a `transactional_id` (every TxnOffsetCommit has one)
        and transaction.partition.verification.enable, KIP-890 first: unless the producer's
        transaction already has offsets on the group's partition, the transaction coordinator
        must confirm that partition is in the transaction (added by AddOffsetsToTxn), else its
        error for every offset, mapped as an offset commit's (INVALID_TXN_STATE, or
        TRANSACTION_ABORTABLE for v4; INVALID_PRODUCER_EPOCH for a fenced producer;
        NETWORK_EXCEPTION as COORDINATOR_LOAD_IN_PROGRESS), before the member checks, as Kafka.
        Run to its end even when the producer goes away meanwhile (broker/coordinator/steps.py):
        cancelled after the record was written, its offsets stayed pending without the offset
        they were appended at, and the COMMIT marker could not make them committed -- a
        consume-transform-produce transaction's input offsets lost."""
        def all_(code: int) -> dict[TopicPartition, int]:
            return {tp: code for tp in offsets}

        err = self.validate_group_status(group_id)
        if err is not None:
            return all_(err)
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id)
        partition = self.partition_for(group_id)
        guard = None
        rm = self.server.replica_manager
        if (transactional_id is not None and self.server.config["transaction.partition.verification.enable"]
                and rm.add_partitions_to_txn_manager is not None):
            try:
                leader = rm.get_partition(GROUP_METADATA_TOPIC, partition)
            except KafkaProtocolError as e:
                return all_(offset_commit_error(e.code, e.code))
            err, guard = await verify_partition(
                leader, transactional_id, producer_id, producer_epoch,
                api_version >= FIRST_GENERIC_ERROR_TXN_OFFSET_COMMIT_VERSION, rm.add_partitions_to_txn_manager)
            if err:
                return all_(offset_commit_error(err, err))
        err = self._validate_offset_commit(group, generation_id, member_id, group_instance_id, transactional=True)
        if err is not None:
            return all_(err)
        result, to_store = _within_metadata_size(offsets, max_metadata_size)
        if not to_store:
            return {tp: result[tp] for tp in offsets}
        shard = self.runtime.shard(partition)
        group.prepare_txn_offset_commit(producer_id, to_store)
        if shard is not None:
            shard.add_producer_group(producer_id, group_id)
        written = await self.runtime.write(partition, self._offset_entries(group_id, to_store),
                                           producer_id=producer_id, producer_epoch=producer_epoch,
                                           verification_guard=guard)
        error = offset_commit_error(written.error, written.log_error)
        if not group.is_(GroupState.DEAD):
            for tp, om in to_store.items():
                if error:
                    group.fail_pending_txn_offset_commit(producer_id, tp)
                else:
                    group.on_txn_offset_commit_append(producer_id, tp, replace(om, appended_offset=written.base_offset))
            if shard is not None and not group.has_pending_offset_commits_from(producer_id):
                shard.remove_producer_group(producer_id, group_id)
        for tp in to_store:
            result[tp] = error
        return {tp: result[tp] for tp in offsets}

    def on_transaction_completed(self, producer_id: int, partitions: list[int], is_commit: bool) -> None:
        """A COMMIT/ABORT marker of the producer is written to these `__consumer_offsets`
        partitions (WriteTxnMarkers, after the append succeeded): its pending offsets in their
        groups become committed or are dropped (Kafka's onTransactionCompleted /
        handleTxnCompletion). A partition not active here any more is skipped: its next load
        replays the marker."""
        for partition in partitions:
            shard = self.runtime.shard(partition)
            if shard is not None:
                shard.complete_transaction(producer_id, is_commit)

    def pending_offset_partitions(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions with a commit not yet visible (a transaction's before its
        marker, a plain one while written): OffsetFetch's UNSTABLE_OFFSET_COMMIT with
        require_stable (KIP-447)."""
        group = self.groups.get(group_id)
        return group.pending_partitions() if group is not None and not group.is_(GroupState.DEAD) else set()

    def handle_fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None
    ) -> tuple[int, dict[TopicPartition, OffsetAndMetadata | None]]:
        err = self.validate_group_status(group_id, allow_empty_id=True)
        if err is not None:
            return err, {}
        group = self.groups.get(group_id)
        offsets = group.offsets if group is not None and not group.is_(GroupState.DEAD) else {}
        if partitions is None:
            return ErrorCode.NONE, dict(offsets)
        return ErrorCode.NONE, {tp: offsets.get(tp) for tp in partitions}

    async def handle_delete_offsets(self, group_id: str, partitions: list[TopicPartition]) -> tuple[int, dict[TopicPartition, int]]:
        err = self.validate_group_status(group_id)
        if err is not None:
            return err, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        if group.state not in (GroupState.EMPTY,) and group.protocol_type != "consumer":
            return ErrorCode.NON_EMPTY_GROUP, {}
        subscribed = group.subscribed_topics() if not group.is_(GroupState.EMPTY) else set()
        result: dict[TopicPartition, int] = {}
        deletable = []
        for tp in partitions:
            if subscribed is None or tp[0] in subscribed:
                result[tp] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            else:
                result[tp] = ErrorCode.NONE
                if tp in group.offsets:
                    deletable.append(tp)
        if deletable:
            await self._write_tombstones(group_id, self._drop_offsets(group, deletable), "deleted offsets")
        return ErrorCode.NONE, result

    # -- admin ----------------------------------------------------------------------------------

    def handle_describe_group(self, group_id: str) -> tuple[int, GroupMetadata | None]:
        err = self.validate_group_status(group_id, allow_empty_id=True)
        if err is not None:
            return err, None
        group = self.groups.get(group_id)
        return ErrorCode.NONE, group

    def handle_list_groups(self, states: set[str] | None) -> list[GroupMetadata]:
        out = []
        for group in self.groups.values():
            if group.is_(GroupState.DEAD) or not self.is_coordinator_for(group.group_id):
                continue
            if states and group.state.value.lower() not in states:
                continue
            out.append(group)
        return out

    async def handle_delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        result: dict[str, int] = {}
        for group_id in group_ids:
            # the empty id is a valid group here, as for OffsetCommit/OffsetFetch/DescribeGroups
            # (Kafka's isValidGroupId): simple consumers may have committed under it
            err = self.validate_group_status(group_id, allow_empty_id=True)
            if err is not None:
                result[group_id] = err
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_(GroupState.DEAD):
                result[group_id] = ErrorCode.GROUP_ID_NOT_FOUND
                continue
            if not group.is_(GroupState.EMPTY):
                result[group_id] = ErrorCode.NON_EMPTY_GROUP
                continue
            group.transition_to(GroupState.DEAD)
            tombstones = [(grec.offset_key(group_id, t, p), None) for t, p in group.offsets]
            tombstones.append((grec.group_key(group_id), None))
            if self.groups.get(group_id) is group:
                del self.groups[group_id]
            await self._write_tombstones(group_id, tombstones, "a deleted group")
            result[group_id] = ErrorCode.NONE
            log.info("deleted group", group=group_id, offsets=len(group.offsets))
        return result
