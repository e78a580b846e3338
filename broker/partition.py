"""One hosted partition as a replication state machine (Kafka's Partition): leadership and epoch,
the appends (as leader, with min.insync.replicas; as follower, the leader's batches as they are),
the followers' fetch state, the high watermark as the lowest log end offset of the ISR, and which
replicas are out of sync or may join the ISR. The ReplicaManager decides (LeaderAndIsr, ISR
changes through the controller); a Partition keeps the state those decisions read and change.

One serialisation point per partition (Partition._exclusive, Kafka's leaderIsrUpdateLock for what
must not interleave): becoming leader or follower, a truncation, a follower append and a leader
append that wait for a roll, DeleteRecords -- FIFO, so appends keep their arrival order, and
uncontended it costs no await. Under it, file work runs in an executor (_in_executor) while the
loop goes on; nothing on the loop then takes the log's lock for this partition (appends queue
behind, high-watermark moves are deferred until the work ends), so the loop never waits on disk
work through that lock. What changes outside it is owned by the loop and happens without an await
in between: the followers' fetch state, the high watermark, the pending ISR change. The fetcher's
appends and truncations name the leader epoch they were fetched at and are dropped when the
partition stopped following at it while they waited. tests/sim checks all of this by simulation.

ISR changes (Kafka's PartitionState: CommittedPartitionState, PendingExpandIsr, PendingShrinkIsr):
a leader proposes an ISR change to the controller and, until the controller answers, its
partition is *pending* that change. Meanwhile the high watermark and acks=all count the maximal
ISR (the committed ISR plus a replica being added; the committed ISR while one is being removed),
because the controller may already have committed the change: a replica it lists in the ISR must
hold every record acknowledged with acks=all, or electing it loses them. No other ISR change is
proposed while one is pending; the pending state ends with the controller's answer, with a
refusal that says nothing was applied (the committed state again), or with a LeaderAndIsr.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import structlog

from controller.image import PartitionState, TopicState
from protocol.errors import ErrorCode, KafkaProtocolError, error_name
from storage.producer_state import AppendOrigin, ProducerStateEntry
from storage.verification_guard import VerificationGuard

if TYPE_CHECKING:
    from broker.alter_partition_manager import IsrChange
    from storage.log import Log

log = structlog.get_logger("odradek.partition")

TopicPartition = tuple[str, int]
_T = TypeVar("_T")


class FollowerState:
    """What a leader knows of one follower (Kafka's Replica): the log end offset its last fetch
    asked from (-1 until it fetched under this leadership), the log start offset that fetch
    named (-1: not known), and when it was last caught up."""

    __slots__ = ("last_caught_up_ms", "last_fetch_leader_log_end_offset", "last_fetch_ms", "log_end_offset",
                 "log_start_offset")

    def __init__(self, last_caught_up_ms: int = 0) -> None:
        self.log_end_offset = -1
        self.log_start_offset = -1
        self.last_caught_up_ms = last_caught_up_ms
        self.last_fetch_leader_log_end_offset = -1
        self.last_fetch_ms = 0


@dataclass(frozen=True, eq=False)
class PendingIsrChange:
    """An ISR change sent to the controller and not answered yet (Kafka's PendingExpandIsr /
    PendingShrinkIsr). Compared by identity: an answer applies only to the proposal it answers."""

    expand: bool  # a replica joins (else: replicas leave)
    isr: tuple[int, ...]  # the proposed ISR
    committed_isr: tuple[int, ...]  # the ISR when it was proposed (the last committed one)
    leader_epoch: int
    partition_epoch: int

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """What the high watermark and acks=all must count until the answer: a joining replica
        already (the controller may have committed it), a leaving one still (it may not have)."""
        return tuple(sorted({*self.committed_isr, *self.isr})) if self.expand else self.committed_isr


# Kafka's handleAlterPartitionError: the controller said nothing was applied (back to the
# committed state), or the partition's state is stale and the next LeaderAndIsr will replace it
# (stay pending until then). Any other error is retried.
_ALTER_REFUSED = frozenset({ErrorCode.OPERATION_NOT_ATTEMPTED, ErrorCode.INELIGIBLE_REPLICA})
_ALTER_AWAIT_METADATA = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INVALID_UPDATE_VERSION,
    ErrorCode.INVALID_REQUEST, ErrorCode.NEW_LEADER_ELECTED,
})


def alter_partition_retriable(code: int) -> bool:
    """Whether an AlterPartition error for one partition is retried (Kafka's default case)."""
    return code not in _ALTER_REFUSED and code not in _ALTER_AWAIT_METADATA


class Partition:
    """One hosted partition. On a single node the ISR is {this broker} and the high watermark
    follows the log end offset after every append; a leader with followers moves it to the
    lowest log end offset of the ISR as their fetches report them (Kafka's Partition)."""

    def __init__(self, topic: TopicState, state: PartitionState, log_: Log, broker_id: int) -> None:
        self.topic = topic.name
        self.topic_id = topic.topic_id
        self.index = state.partition
        self.state = state
        self.log = log_
        self.broker_id = broker_id
        # Appends that wait for a roll running in an executor, and those queued behind them:
        # while any wait, every append to this partition takes the lock, in arrival order.
        self._append_lock = asyncio.Lock()
        self._appends_waiting = 0
        self.followers: dict[int, FollowerState] = {}  # as leader: by broker id
        self.pending_isr: PendingIsrChange | None = None  # as leader: an ISR change in flight
        self._executor_busy = 0  # executor work on the log in flight (under _exclusive)
        self._hw_deferred = False  # a high-watermark move waits for that work to end
        # told when a deferred high-watermark move happens (the ReplicaManager completes the
        # produce and fetch requests waiting on it)
        self.on_high_watermark_moved: Callable[[TopicPartition], None] | None = None

    def set_state(self, state: PartitionState) -> None:
        """The controller's state (LeaderAndIsr, a metadata image): it replaces any pending ISR
        change, whose answer is then ignored (Kafka's makeLeader / makeFollower)."""
        self.state = state
        self.pending_isr = None

    @property
    def isr(self) -> list[int]:
        """The committed ISR: what min.insync.replicas is checked against before an append."""
        return self.state.isr

    @property
    def maximal_isr(self) -> list[int] | tuple[int, ...]:
        """The committed ISR, widened by a pending expansion (see the module docstring)."""
        pending = self.pending_isr
        return self.state.isr if pending is None else pending.maximal_isr

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.index)

    @property
    def is_leader(self) -> bool:
        return self.state.leader == self.broker_id

    @property
    def leader_epoch(self) -> int:
        return self.state.leader_epoch

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def append_records_to_leader(self, buf: Any, required_acks: int, now_ms: int,
                                 origin: AppendOrigin = AppendOrigin.CLIENT,
                                 verification_guard: VerificationGuard | None = None) -> Any:
        """Append as leader (Kafka's appendRecordsToLeader): NOT_LEADER_OR_FOLLOWER off the
        leader, NOT_ENOUGH_REPLICAS for acks=all under min.insync.replicas; ``origin`` says how
        the log validates (a client's batches as a producer's; COORDINATOR: the coordinators'
        records and transaction markers, see storage.producer_state)."""
        if not self.is_leader:
            raise KafkaProtocolError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        min_isr = self.log.config.min_insync_replicas
        if required_acks == -1 and len(self.isr) < min_isr:
            raise KafkaProtocolError(
                ErrorCode.NOT_ENOUGH_REPLICAS,
                f"The size of the current ISR {set(self.state.isr)} is insufficient to satisfy the "
                f"min.isr requirement of {min_isr} for partition {self.topic}-{self.index}",
            )
        info = self.log.append_as_leader(buf, self.leader_epoch, now_ms, origin=origin,
                                         verification_guard=verification_guard)
        self.maybe_increment_high_watermark()
        return info

    async def maybe_start_transaction_verification(self, producer_id: int, sequence: int,
                                                   epoch: int) -> VerificationGuard:
        """Kafka's Partition.maybeStartTransactionVerification: the guard a transactional produce
        carries to its append (SENTINEL: the producer's transaction is ongoing here already);
        NOT_LEADER_OR_FOLLOWER off the leader. It reads and changes the log's producer state, so,
        as an append, inline when nothing is exclusive, else behind it."""
        if self._appends_waiting:
            async with self._exclusive():
                return self._start_transaction_verification(producer_id, sequence, epoch)
        return self._start_transaction_verification(producer_id, sequence, epoch)

    def _start_transaction_verification(self, producer_id: int, sequence: int, epoch: int) -> VerificationGuard:
        if not self.is_leader:
            raise KafkaProtocolError(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        return self.log.maybe_start_transaction_verification(producer_id, sequence, epoch)

    @contextlib.asynccontextmanager
    async def _exclusive(self) -> AsyncIterator[None]:
        """The partition's serialisation point (Kafka's leaderIsrUpdateLock, for what must not
        interleave): appends that wait for a roll, truncations, DeleteRecords, becoming leader.
        FIFO, so appends keep their arrival order; while anything holds or waits for it, appends
        queue behind it. Uncontended, it does not yield."""
        self._appends_waiting += 1
        try:
            async with self._append_lock:
                yield
        finally:
            self._appends_waiting -= 1

    async def _in_executor(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Blocking log work in an executor (only ever under :meth:`_exclusive`). Meanwhile it
        may change the log under the log's lock, so high-watermark moves wait for its end. A
        cancelled caller (a fetcher stopped by a LeaderAndIsr) still waits for the work: the
        thread goes on holding the log's lock, and the partition stays exclusive until then, or
        the next append on the loop would block on that lock (found by tests/sim, seed 1087)."""
        self._executor_busy += 1
        fut = asyncio.get_running_loop().run_in_executor(None, fn, *args)
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            while not fut.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait({fut})
            raise
        finally:
            self._executor_busy -= 1
            if not self._executor_busy and self._hw_deferred:
                self._hw_deferred = False
                if self.maybe_increment_high_watermark() and self.on_high_watermark_moved is not None:
                    self.on_high_watermark_moved(self.tp)

    async def append_records(self, buf: Any, required_acks: int, now_ms: int,
                             origin: AppendOrigin = AppendOrigin.CLIENT,
                             verification_guard: VerificationGuard | None = None) -> Any:
        """Append as leader; when the append would roll the segment (Log.roll_due), roll first
        in an executor so the event loop never does the roll's file work. The common case (no
        roll due, nothing exclusive pending) appends without an await; otherwise in arrival
        order behind what is pending (:meth:`_exclusive`)."""
        if not self._appends_waiting and not self.log.roll_due(buf, now_ms):
            return self.append_records_to_leader(buf, required_acks, now_ms, origin, verification_guard)
        async with self._exclusive():
            if self.is_leader and self.log.roll_due(buf, now_ms):
                await self._in_executor(self.log.roll)
            return self.append_records_to_leader(buf, required_acks, now_ms, origin, verification_guard)

    def follows(self, leader_epoch: int | None) -> bool:
        """Still a follower at ``leader_epoch`` (None: any): the fetcher's data is for it."""
        return not self.is_leader and (leader_epoch is None or self.leader_epoch == leader_epoch)

    async def append_as_follower(self, buf: Any, now_ms: int, leader_epoch: int | None = None) -> bool:
        """Append the leader's batches as they are, unless this broker stopped following at
        ``leader_epoch`` meanwhile (False: dropped). As the leader's appends: inline when no roll
        is due (a hop to an executor per fetch cost six times the append it carried: 44 % of a
        follower's CPU, py-spy), in order behind anything exclusive pending otherwise."""
        if not self._appends_waiting and not self.log.roll_due(buf, now_ms):
            if not self.follows(leader_epoch):
                return False
            self.log.append_as_follower(buf)
            return True
        async with self._exclusive():
            if not self.follows(leader_epoch):
                return False  # became leader, or another leader's follower, while it waited
            if self.log.roll_due(buf, now_ms):
                await self._in_executor(self.log.roll)
                if not self.follows(leader_epoch):
                    return False
            self.log.append_as_follower(buf)
            return True

    async def active_producers(self) -> list[ProducerStateEntry]:
        """The producer state of every producer id the log knows (Kafka's
        UnifiedLog.activeProducers, for DescribeProducers), read at the serialisation point: no
        truncation or other executor work changes the producer state while it is read. Inline
        when nothing is pending, as the appends."""
        if not self._appends_waiting:
            return list(self.log.producer_state.active_producers.values())
        async with self._exclusive():
            return list(self.log.producer_state.active_producers.values())

    async def run_exclusive(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run blocking log work ``fn(*args)`` (it takes the log's lock and writes files) in an
        executor, with appends to this partition queued behind it (in order) rather than the
        event loop blocking on the log's lock meanwhile. DeleteRecords uses it."""
        async with self._exclusive():
            return await self._in_executor(fn, *args)

    async def truncate_to(self, offset: int, leader_epoch: int | None = None) -> bool:
        """Truncate the log to ``offset`` (a follower diverging from its leader at
        ``leader_epoch``; not if it stopped following at it meanwhile). Truncation cuts and
        renames files and writes leader-epoch-checkpoint synchronously (storage.log), so it runs
        in an executor, with appends to the partition queued behind it."""
        async with self._exclusive():
            if not self.follows(leader_epoch):
                return False
            return await self._in_executor(self.log.truncate_to, offset)

    async def truncate_fully_and_start_at(self, offset: int, leader_epoch: int | None = None) -> bool:
        """Empty the log and start it at ``offset`` (a follower behind its leader's log start),
        in an executor as :meth:`truncate_to`; False when it stopped following meanwhile."""
        async with self._exclusive():
            if not self.follows(leader_epoch):
                return False
            await self._in_executor(self.log.truncate_fully_and_start_at, offset)
            return True

    async def follow_log_start_offset(self, leader_log_start_offset: int, leader_epoch: int) -> bool:
        """A follower's log start follows its leader's (Kafka's processPartitionData:
        maybeIncrementLogStartOffset, LeaderOffsetIncremented), up to its own high watermark: what
        the leader's retention or DeleteRecords removed is gone here too -- our copies of offsets
        below the leader's log start may be an old leader's records the leader's epochs no longer
        tell us to truncate (tests/sim seed 743). The epoch cache's checkpoint is written, so in an
        executor, under the partition's serialisation point."""
        new_start = min(leader_log_start_offset, self.log.high_watermark)
        if new_start <= self.log.log_start_offset:
            return False
        async with self._exclusive():
            if not self.follows(leader_epoch):
                return False
            return await self._in_executor(self.log.maybe_increment_log_start_offset, new_start,
                                           "leader offset incremented")

    async def make_leader(self, state: PartitionState, now_ms: int) -> bool | None:
        """Become leader at ``state`` (Kafka's Partition.makeLeader), serialised with appends and
        truncations (:meth:`_exclusive`): the epoch starts at the log end offset once no
        truncation or roll is in flight, so it is never recorded at a pre-truncation offset and
        the loop never waits on the log's lock for such work. The ISR members count as caught
        up now; True when the high watermark moved, None when skipped (:meth:`has_newer_partition_epoch`)."""
        async with self._exclusive():
            if self.has_newer_partition_epoch(state.partition_epoch):
                return None
            self.set_state(state)
            self.reset_followers(now_ms)
            self.log.maybe_assign_epoch_start_offset(state.leader_epoch, self.log.log_end_offset)
            return self.maybe_increment_high_watermark()

    def has_newer_partition_epoch(self, partition_epoch: int) -> bool:
        """Our state is newer than a controller state at ``partition_epoch`` (Kafka's makeLeader /
        makeFollower guard): e.g. an ISR change the controller accepted while that state waited
        for this partition; applying it would bring an old ISR back."""
        return partition_epoch < self.state.partition_epoch

    async def make_follower(self, state: PartitionState) -> tuple[int, int] | None:
        """Follow at ``state`` (Kafka's Partition.makeFollower), serialised as :meth:`make_leader`:
        returns where the fetcher starts -- our log end offset and the epoch of our last batch --
        read once no truncation or roll of the previous leadership is in flight; None when
        skipped (:meth:`has_newer_partition_epoch`)."""
        async with self._exclusive():
            if self.has_newer_partition_epoch(state.partition_epoch):
                return None
            self.set_state(state)
            return self.log.log_end_offset, self.log.latest_epoch

    def update_follower_high_watermark(self, leader_high_watermark: int, leader_epoch: int) -> bool:
        """A follower's high watermark follows its leader's, capped by what it has; not while
        executor work may change the log (a truncation sets it under the log's lock): the next
        fetch brings it again."""
        if self._executor_busy or not self.follows(leader_epoch):
            return False
        hw = min(leader_high_watermark, self.log.log_end_offset)
        if hw > self.log.high_watermark:
            self.log.update_high_watermark(hw)
            return True
        return False

    def maybe_increment_high_watermark(self) -> bool:
        """The high watermark is the lowest log end offset of the maximal ISR (ours included):
        it only moves forward. Alone in the ISR (a single node), that is our log end offset.
        While executor work may change the log under its lock, the move is deferred to that
        work's end (:meth:`_in_executor`), as Kafka's waits for the log's lock."""
        if self._executor_busy:
            self._hw_deferred = True
            return False
        isr = self.maximal_isr
        leo = self.log.log_end_offset
        if len(isr) == 1 and isr[0] == self.broker_id:
            hw = leo
        elif not self.is_leader:
            return False
        else:
            hw = leo
            for r in isr:
                if r != self.broker_id:
                    f = self.followers.get(r)
                    hw = min(hw, f.log_end_offset if f is not None else -1)
        if hw > self.log.high_watermark:
            self.log.update_high_watermark(hw)
            return True
        return False

    def follower_fetch(self, replica_id: int, fetch_offset: int, current_leader_epoch: int, last_fetched_epoch: int,
                       diverging_check: bool, now_ms: int,
                       log_start_offset: int = -1) -> tuple[bool, bool, tuple[int, int] | None]:
        """A follower's fetch as this partition's leader (Kafka's Partition.fetchRecords, in its
        order): the leader epoch first -- a fetch at another epoch is not counted (its read
        answers the error) -- then whether the follower's log diverged from ours (not counted
        either: it truncates to the returned (epoch, end offset) first), then its fetch offset as
        its log end offset. Returns (recorded, high watermark moved, diverging epoch)."""
        if not self.is_leader or replica_id not in self.state.replicas:
            return False, False, None
        if current_leader_epoch >= 0 and current_leader_epoch != self.leader_epoch:
            return False, False, None
        epoch_end = self.diverging_epoch(last_fetched_epoch, fetch_offset) if diverging_check else None
        if epoch_end is not None:
            return False, False, epoch_end
        return True, self.update_follower_fetch_state(replica_id, fetch_offset, now_ms, log_start_offset), None

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """Kafka's Partition.fetchRecords check for a follower: its last fetched epoch ends here
        at an offset below its fetch offset, or we have no such epoch: (our epoch, its end offset)
        to truncate to; None when its log is a prefix of ours."""
        cache = self.log.leader_epoch_cache
        if last_fetched_epoch < 0 or cache is None:
            return None
        epoch, end = cache.end_offset_for(last_fetched_epoch, self.log.log_end_offset)
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, now_ms: int,
                                    log_start_offset: int = -1) -> bool:
        """A follower fetched from `fetch_offset`: it has everything before it, from the
        `log_start_offset` its fetch names (Kafka's updateFollowerFetchState). True when that
        moved the high watermark."""
        f = self.followers.get(replica_id)
        if f is None:
            f = self.followers[replica_id] = FollowerState()
        leo = self.log.log_end_offset
        # Kafka's Replica.updateFetchState: caught up when it asked for our log end, or for what
        # was our log end at its previous fetch (appends keep arriving while it fetches)
        if fetch_offset >= leo:
            f.last_caught_up_ms = now_ms
        elif fetch_offset >= f.last_fetch_leader_log_end_offset:
            f.last_caught_up_ms = max(f.last_caught_up_ms, f.last_fetch_ms)
        f.last_fetch_leader_log_end_offset = leo
        f.last_fetch_ms = now_ms
        f.log_end_offset = fetch_offset
        f.log_start_offset = log_start_offset
        return self.maybe_increment_high_watermark()

    def read_replica_candidates(self, fetch_offset: int, now_ms: int) -> list[tuple[int, int, int]]:
        """The followers a leader may send a consumer at `fetch_offset` to (Kafka's
        findPreferredReadReplica): in the committed ISR and holding that offset by their last
        fetch, as (broker id, log end offset, ms since last caught up). Empty unless leader."""
        if not self.is_leader:
            return []
        out = []
        for r in self.state.isr:
            f = self.followers.get(r)
            if r != self.broker_id and f is not None and f.log_start_offset <= fetch_offset <= f.log_end_offset:
                out.append((r, f.log_end_offset, now_ms - f.last_caught_up_ms))
        return out

    def reset_followers(self, now_ms: int) -> None:
        """Becoming leader: the ISR members count as caught up now (Kafka's makeLeader), so they
        are not dropped before their first fetch; their log end offsets are unknown (-1)."""
        self.followers = {r: FollowerState(now_ms) for r in self.state.replicas if r != self.broker_id}

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR members not caught up within `max_lag_ms` (Kafka's getOutOfSyncReplicas)."""
        return [r for r in self.state.isr if r != self.broker_id
                and now_ms - self.followers.get(r, FollowerState()).last_caught_up_ms > max_lag_ms]

    # -- ISR changes: proposed here, sent by the ReplicaManager, answered here ---------------------

    def _propose(self, expand: bool, isr: list[int]) -> PendingIsrChange:
        st = self.state
        pending = self.pending_isr = PendingIsrChange(expand, tuple(sorted(isr)), tuple(st.isr), st.leader_epoch,
                                                      st.partition_epoch)
        return pending

    def prepare_isr_expand(self, replica_id: int) -> PendingIsrChange | None:
        """A follower that caught up joins the ISR: the pending expansion to send, or None (not
        leader, not eligible, or another change in flight: Kafka's maybeExpandIsr)."""
        if self.pending_isr is not None or not self.is_leader or not self.can_join_isr(replica_id):
            return None
        return self._propose(True, [*self.state.isr, replica_id])

    def prepare_isr_shrink(self, now_ms: int, max_lag_ms: int) -> tuple[PendingIsrChange, list[int]] | None:
        """ISR members that have not caught up for ``max_lag_ms`` leave it: the pending shrink to
        send and who leaves, or None (Kafka's maybeShrinkIsr)."""
        if self.pending_isr is not None or not self.is_leader or len(self.state.isr) < 2:
            return None
        out = self.out_of_sync_replicas(now_ms, max_lag_ms)
        if not out:
            return None
        return self._propose(False, [r for r in self.state.isr if r not in out]), out

    def complete_isr_change(self, pending: PendingIsrChange, result: IsrChange | int) -> bool:
        """The controller's answer to ``pending`` (Kafka's handleAlterPartitionUpdate / Error):
        the new committed state, or the error's rule (module docstring). An answer to a proposal
        that is no longer the pending one (a LeaderAndIsr replaced it) is ignored. True when the
        high watermark moved (the ISR may have shrunk to replicas that have everything)."""
        where = f"[Partition {self.topic}-{self.index} broker={self.broker_id}]"
        if self.pending_isr is not pending:
            log.debug(f"{where} Ignoring the answer to ISR change {list(pending.isr)}: the state changed meanwhile")
            return False
        if isinstance(result, int):
            if result in _ALTER_REFUSED:
                self.pending_isr = None
                log.info(f"{where} Failed to alter the ISR to {list(pending.isr)}: the controller refused it with "
                         f"{error_name(result)}; back to the committed ISR {self.state.isr}")
            else:  # stale state: the pending state stays until the controller's next LeaderAndIsr
                log.info(f"{where} Failed to alter the ISR to {list(pending.isr)} with {error_name(result)}: "
                         "awaiting the controller's metadata")
            return False
        st = self.state
        if result.leader_epoch != st.leader_epoch or result.partition_epoch < st.partition_epoch:
            log.info(f"{where} Ignoring new ISR {result.isr} at leader epoch {result.leader_epoch} and partition "
                     f"epoch {result.partition_epoch}: ours are {st.leader_epoch} and {st.partition_epoch}")
            return False
        self.state = PartitionState(st.partition, list(st.replicas), st.leader, st.leader_epoch, list(result.isr),
                                    result.partition_epoch)
        self.pending_isr = None
        under = " (under-min-isr)" if len(result.isr) < self.log.config.min_insync_replicas else ""
        log.info(f"{where} ISR updated to {','.join(map(str, result.isr))}{under} and version updated to "
                 f"{result.partition_epoch}")
        return self.maybe_increment_high_watermark()

    def can_join_isr(self, replica_id: int) -> bool:
        """A replica outside the ISR that has caught up to the high watermark, and to the start
        of our leader epoch, may join it (Kafka's isFollowerInSync)."""
        if replica_id in self.maximal_isr or replica_id not in self.state.replicas:
            return False
        f = self.followers.get(replica_id)
        if f is None or f.log_end_offset < self.log.high_watermark:
            return False
        cache = self.log.leader_epoch_cache
        entry = cache.latest_entry if cache is not None else None
        return entry is None or entry.epoch != self.leader_epoch or f.log_end_offset >= entry.start_offset
