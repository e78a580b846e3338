"""Group and member state of the classic group protocol (Kafka's GroupMetadata.scala and
MemberMetadata.scala).

States and their valid previous states (Kafka's GroupState):

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Stable, CompletingRebalance, Empty
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- any state

Pure data and bookkeeping: no I/O, no purgatories (the coordinator drives those). Mutated only on
the event loop. A member's pending JoinGroup / SyncGroup answer is an asyncio future
(`join_future` / `sync_future`), Kafka's awaitingJoinCallback / awaitingSyncCallback.
"""

from __future__ import annotations

import enum
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


@dataclass(eq=False)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's preference order
    assignment: bytes = b""
    join_future: Any = None  # asyncio.Future[JoinResult] while a JoinGroup waits
    sync_future: Any = None  # asyncio.Future[SyncResult] while a SyncGroup waits
    is_new: bool = False
    is_leaving: bool = False
    heartbeat_satisfied: bool = False

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None

    @property
    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return list(protocols) == list(self.protocols)

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among the candidates."""
        for name in self.protocol_names:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} does not support any of {candidates}")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied


@dataclass(slots=True)
class OffsetAndMetadata:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1
    expire_timestamp: int = -1  # only from OffsetCommitValue v1 (old per-commit retention)
    # The base offset of the __consumer_offsets batch the commit was written in (Kafka's
    # CommitRecordMetadataAndOffset.appendedBatchOffset), -1 until it is written; it orders a
    # transaction's offsets against plain commits when the transaction commits. Not part of the
    # value: two commits of the same offset are equal wherever they were written.
    appended_offset: int = field(default=-1, compare=False)

    def older_than(self, that: OffsetAndMetadata) -> bool:
        """Written before `that` (Kafka's olderThan); a commit not yet written is older."""
        return self.appended_offset < that.appended_offset


@dataclass(eq=False)
class GroupMetadata:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, MemberMetadata] = field(default_factory=dict)  # insertion-ordered
    pending_members: set[str] = field(default_factory=set)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_sync_members: set[str] = field(default_factory=set)  # joined, SyncGroup not yet sent
    supported_protocols: dict[str, int] = field(default_factory=dict)
    num_members_awaiting_join: int = 0
    new_member_added: bool = False
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    # Plain commits whose append is in flight (Kafka's pendingOffsetCommits) and transactional
    # ones by producer id until their marker (pendingTransactionalOffsetCommits): neither is in
    # `offsets` yet; OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them.
    pending_offset_commits: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    pending_txn_offset_commits: dict[int, dict[tuple[str, int], OffsetAndMetadata]] = field(default_factory=dict)
    # When the group entered its state (Kafka's currentStateTimestamp); None for a group known
    # only from offsets loaded from the log.
    state_timestamp: int | None = field(default_factory=lambda: int(time.time() * 1000))

    # -- state ----------------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition_to(self, target: GroupState) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise ValueError(
                f"Group {self.group_id} should be in the {sorted(s.value for s in _VALID_PREVIOUS[target])} "
                f"states before moving to {target.value} state. Instead it is in {self.state.value} state"
            )
        self.state = target
        self.state_timestamp = int(time.time() * 1000)

    # -- members --------------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def generate_member_id(self, client_id: str, group_instance_id: str | None = None) -> str:
        return f"{group_instance_id or client_id}-{uuid.uuid4()}"

    def add(self, member: MemberMetadata, join_future: Any = None) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        for name in member.protocol_names:
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + 1
        member.join_future = join_future
        if member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        self.pending_members.discard(member.member_id)
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            for name in member.protocol_names:
                left = self.supported_protocols.get(name, 0) - 1
                if left > 0:
                    self.supported_protocols[name] = left
                else:
                    self.supported_protocols.pop(name, None)
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            self.pending_sync_members.discard(member_id)
            instance = member.group_instance_id
            if instance is not None and self.static_members.get(instance) == member_id:
                del self.static_members[instance]
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)

    # -- static members (KIP-345) ----------------------------------------------------------------

    def current_static_member_id(self, group_instance_id: str | None) -> str | None:
        return None if group_instance_id is None else self.static_members.get(group_instance_id)

    def has_static_member(self, group_instance_id: str | None) -> bool:
        return group_instance_id is not None and group_instance_id in self.static_members

    def is_static_member_fenced(self, member_id: str, group_instance_id: str | None) -> bool:
        """A request naming an instance id now mapped to another member id comes from a zombie."""
        current = self.current_static_member_id(group_instance_id)
        return current is not None and current != member_id

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> tuple[MemberMetadata, Any, Any]:
        """Give the static member a new member id; returns it and the old id's parked join and
        sync futures, which the caller must answer with FENCED_INSTANCE_ID."""
        member = self.members.pop(old_member_id)
        join_future = self.take_join_future(member)
        sync_future, member.sync_future = member.sync_future, None
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if old_member_id in self.pending_sync_members:
            self.pending_sync_members.discard(old_member_id)
            self.pending_sync_members.add(new_member_id)
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member, join_future, sync_future

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]], join_future: Any) -> None:
        for name in member.protocol_names:
            left = self.supported_protocols.get(name, 0) - 1
            if left > 0:
                self.supported_protocols[name] = left
            else:
                self.supported_protocols.pop(name, None)
        for name, _ in protocols:
            self.supported_protocols[name] = self.supported_protocols.get(name, 0) + 1
        member.protocols = list(protocols)
        if join_future is not None and not member.is_awaiting_join:
            self.num_members_awaiting_join += 1
        elif join_future is None and member.is_awaiting_join:
            self.num_members_awaiting_join -= 1
        member.join_future = join_future

    def take_join_future(self, member: MemberMetadata) -> Any:
        """Detach the member's waiting JoinGroup (Kafka's maybeInvokeJoinCallback bookkeeping)."""
        fut = member.join_future
        if fut is not None:
            member.join_future = None
            self.num_members_awaiting_join -= 1
        return fut

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    def maybe_elect_new_joined_leader(self) -> bool:
        """If the leader has not rejoined, make any member that has the leader. False when no
        member has rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member_id, m in self.members.items():
            if m.is_awaiting_join:
                self.leader_id = member_id
                return True
        return False

    # -- protocols ------------------------------------------------------------------------------

    def supports_protocols(self, member_protocol_type: str, member_protocols: list[str]) -> bool:
        if self.is_(GroupState.EMPTY):
            return bool(member_protocol_type) and bool(member_protocols)
        return self.protocol_type == member_protocol_type and any(
            self.supported_protocols.get(p, 0) == len(self.members) for p in member_protocols
        )

    def select_protocol(self) -> str:
        """Kafka's vote: candidates are the protocols every member supports; each member votes
        for its most preferred candidate; the most votes wins (ties: the candidate voted for
        first, so the outcome is deterministic)."""
        candidates = {p for p, n in self.supported_protocols.items() if n == len(self.members)}
        if not candidates:
            raise ValueError(f"no protocol is supported by every member of group {self.group_id}")
        votes: dict[str, int] = {}
        for m in self.members.values():
            choice = m.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        return max(votes, key=lambda p: votes[p])

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY)

    def current_member_metadata(self) -> list[tuple[str, str | None, bytes]]:
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise ValueError(f"cannot obtain member metadata for group {self.group_id} in state {self.state.value}")
        assert self.protocol_name is not None
        return [(m.member_id, m.group_instance_id, m.metadata(self.protocol_name)) for m in self.members.values()]

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """Offsets past retention (Kafka's removeExpiredOffsets, KIP-211): an Empty group's all
        expire `retention_ms` after it became empty; a Stable consumer group's expire only for
        topics no member subscribes to, counted from their commit; a group that never had
        members (simple commits) counts from each commit. v1 commits carry their own expiry."""

        def expired(base: Any, keep: set[str]) -> list[tuple[str, int]]:
            out = []
            for tp, om in self.offsets.items():
                if tp[0] in keep or tp in self.pending_offset_commits:
                    continue
                if om.expire_timestamp >= 0:
                    if now_ms >= om.expire_timestamp:
                        out.append(tp)
                elif now_ms - base(om) >= retention_ms:
                    out.append(tp)
            return out

        if self.protocol_type is None:
            return expired(lambda om: om.commit_timestamp, set())
        if self.is_(GroupState.EMPTY):
            ts = self.state_timestamp
            return expired(lambda om: ts if ts is not None else om.commit_timestamp, set())
        if self.protocol_type == "consumer" and self.is_(GroupState.STABLE):
            topics = self.subscribed_topics()
            if topics is not None:
                return expired(lambda om: om.commit_timestamp, topics)
        return []

    def subscribed_topics(self) -> set[str] | None:
        """Topics the consumer-protocol members subscribe to; None when unknown (not the
        "consumer" protocol type, or metadata that does not parse)."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None if self.members else set()
        topics: set[str] = set()
        try:
            for m in self.members.values():
                topics |= parse_subscription_topics(m.metadata(self.protocol_name))
        except (ValueError, KeyError, struct.error):
            return None
        return topics

    # -- offsets: plain and transactional commits (Kafka's GroupMetadata offset bookkeeping) ------

    def has_offsets(self) -> bool:
        """Committed or pending offsets (Kafka's hasOffsets): a group with any is not removed."""
        return bool(self.offsets or self.pending_offset_commits or self.pending_txn_offset_commits)

    def has_pending_offset_commits_for(self, tp: tuple[str, int]) -> bool:
        return tp in self.pending_offset_commits or any(
            tp in offsets for offsets in self.pending_txn_offset_commits.values())

    def pending_partitions(self) -> set[tuple[str, int]]:
        """Every partition with a commit not yet visible (OffsetFetch's UNSTABLE_OFFSET_COMMIT)."""
        out = set(self.pending_offset_commits)
        for offsets in self.pending_txn_offset_commits.values():
            out.update(offsets)
        return out

    def prepare_offset_commit(self, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> None:
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: tuple[str, int], om: OffsetAndMetadata) -> None:
        """A plain commit is written at `om.appended_offset`: it becomes the committed offset
        unless a newer one was written meanwhile (a transaction's, committed while this write
        waited), or the partition's offsets were removed (its topic deleted) while it waited."""
        staged = self.pending_offset_commits.get(tp)
        if staged is None:
            return
        current = self.offsets.get(tp)
        if current is None or current.older_than(om):
            self.offsets[tp] = om
        if staged == om:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: tuple[str, int], om: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == om:
            del self.pending_offset_commits[tp]

    def prepare_txn_offset_commit(self, producer_id: int, offsets: dict[tuple[str, int], OffsetAndMetadata]) -> None:
        """A TxnOffsetCommit's offsets, pending for the producer from before their write."""
        self.pending_txn_offset_commits.setdefault(producer_id, {}).update(offsets)

    def on_txn_offset_commit_append(self, producer_id: int, tp: tuple[str, int], om: OffsetAndMetadata) -> None:
        """Record where the pending offset was written (its marker may already have dropped it)."""
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is not None and tp in pending and pending[tp] == om:
            pending[tp] = om

    def fail_pending_txn_offset_commit(self, producer_id: int, tp: tuple[str, int]) -> None:
        pending = self.pending_txn_offset_commits.get(producer_id)
        if pending is not None:
            pending.pop(tp, None)
            if not pending:
                del self.pending_txn_offset_commits[producer_id]

    def has_pending_offset_commits_from(self, producer_id: int) -> bool:
        return producer_id in self.pending_txn_offset_commits

    def complete_pending_txn_offset_commit(self, producer_id: int, is_commit: bool) -> list[tuple[str, int]]:
        """The producer's transaction ended (Kafka's completePendingTxnOffsetCommit): on COMMIT
        its offsets become the committed ones, each unless a plain commit written after it is
        already there; on ABORT they are dropped. Returns the partitions it committed; a pending
        offset whose write has not completed (none on a COMMIT the client sent in order) is
        dropped, as it cannot be ordered."""
        pending = self.pending_txn_offset_commits.pop(producer_id, {})
        committed = []
        if is_commit:
            for tp, om in pending.items():
                if om.appended_offset < 0:
                    continue
                current = self.offsets.get(tp)
                if current is None or current.older_than(om):
                    self.offsets[tp] = om
                    committed.append(tp)
        return committed

    def remove_offsets(self, partitions: list[tuple[str, int]]) -> None:
        """Forget the partitions' committed and pending offsets (Kafka's removeOffsets)."""
        for tp in partitions:
            self.offsets.pop(tp, None)
            self.pending_offset_commits.pop(tp, None)
            for producer_id, pending in list(self.pending_txn_offset_commits.items()):
                pending.pop(tp, None)
                if not pending:
                    del self.pending_txn_offset_commits[producer_id]


def parse_subscription_topics(buf: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (version int16, topics [string], ...)."""
    (version,) = struct.unpack_from(">h", buf, 0)
    if version < 0:
        raise ValueError("bad subscription version")
    (n,) = struct.unpack_from(">i", buf, 2)
    pos = 6
    topics = set()
    for _ in range(max(n, 0)):
        (ln,) = struct.unpack_from(">h", buf, pos)
        pos += 2
        if ln < 0 or pos + ln > len(buf):
            raise ValueError("bad subscription topic")
        topics.add(buf[pos : pos + ln].decode())
        pos += ln
    return topics
