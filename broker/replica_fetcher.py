"""Followers copy their leaders' logs (Kafka's ReplicaFetcherManager / ReplicaFetcherThread).

One asyncio task per leader broker fetches every partition this broker follows from it, with
Fetch requests that name this broker as `replica_id` (the leader reads past its high watermark
for us and records our log end offset, which moves its high watermark). The leader's batches are
appended as they are (offsets, leader epochs, producer ids kept: Log.append_as_follower, on the
loop as the leader's appends are; a segment roll first runs in an executor), and our high
watermark follows the leader's, capped by what we have. Each fetcher keeps a fetch session with
its leader (KIP-227, broker.fetch_session_handler): after the first full fetch, a request names
only the partitions whose position moved and the leader answers only those with news. A partition
under the follower replication throttle (broker.replication_quota) is left out of the fetches while
the throttled rate is over its bound and we are not caught up.

Truncation is by leader epoch, never by the high watermark alone: each fetch carries the epoch
of our last batch (Fetch v12's last_fetched_epoch); a leader whose log diverged from ours there
answers with DivergingEpoch, the end of that epoch in its log, and we truncate to it (KIP-595,
the path Kafka 3.9 brokers take). A partition whose leader says it is not (any more) the leader,
or fences our epoch, waits `replica.fetch.backoff.ms` and tries again until the controller's
next LeaderAndIsr moves it elsewhere."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from broker.fetch_session_handler import FetchPosition, FetchRequestData, FetchSessionHandler
from broker.network_client import NetworkClient, NetworkClientConfig, NetworkError
from broker.replication_quota import UNLIMITED
from protocol.errors import ErrorCode, error_name
from protocol.messages import FetchRequest, FetchResponse, ListOffsetsRequest
from protocol.messages.fetch_request import FetchPartition, FetchTopic, ForgottenTopic
from protocol.messages.list_offsets_request import ListOffsetsPartition, ListOffsetsTopic
from storage.errors import KafkaStorageError

log = structlog.get_logger("odradek.replica_fetcher")

TopicPartition = tuple[str, int]
FETCH_VERSION = 12  # last_fetched_epoch / DivergingEpoch; the highest Fetch this broker serves
LIST_OFFSETS_VERSION = 4  # current_leader_epoch (Kafka's follower asks at its inter-broker version)
EARLIEST, LATEST = -2, -1  # ListOffsets' timestamps for the log start / end offset
SESSION_ERRORS = (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)


@dataclass
class PartitionFetchState:
    """Where a followed partition fetches from next (Kafka's PartitionFetchState)."""

    fetch_offset: int
    leader_epoch: int
    last_fetched_epoch: int
    delayed_until: float = 0.0  # loop time: after an error, not fetched before this
    lag: int | None = None  # the leader's high watermark minus our log end, as of the last fetch

    @property
    def in_sync(self) -> bool:
        """Caught up with the leader's high watermark (Kafka's isReplicaInSync): never throttled."""
        return self.lag is not None and self.lag <= 0


@dataclass(frozen=True)
class FetcherConfig:
    broker_id: int
    max_wait_ms: int = 500  # replica.fetch.wait.max.ms
    min_bytes: int = 1  # replica.fetch.min.bytes
    max_bytes: int = 10 * 1024 * 1024  # replica.fetch.response.max.bytes
    partition_max_bytes: int = 1024 * 1024  # replica.fetch.max.bytes
    backoff_ms: int = 1000  # replica.fetch.backoff.ms
    request_timeout_ms: int = 30_000  # replica.socket.timeout.ms
    num_fetchers: int = 1  # num.replica.fetchers: fetchers (and connections) per leader


class ReplicaFetcherManager:
    """The fetchers of this broker: num.replica.fetchers per leader broker, each with its own
    connection, a partition going to one of them by a hash of its name (Kafka's getFetcherId), so
    a leader's partitions are fetched by that many requests in flight at once."""

    def __init__(self, config: FetcherConfig, replica_manager: Any,
                 leader_address: Callable[[int], tuple[str, int] | None],
                 client_factory: Callable[[NetworkClientConfig], Any] = NetworkClient) -> None:
        self.config = config
        self.replica_manager = replica_manager
        self.leader_address = leader_address
        self.client_factory = client_factory  # the simulation (tests/sim) passes its network
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}  # (leader, fetcher id) -> fetcher

    def add_partitions(self, partitions: dict[TopicPartition, tuple[int, PartitionFetchState]]) -> None:
        """Fetch each partition from its leader (partition -> (leader id, initial state)); a
        partition fetched from another leader before moves."""
        self.remove_partitions(list(partitions))
        for tp, (leader, state) in partitions.items():
            key = (leader, fetcher_id(tp, self.config.num_fetchers))
            fetcher = self.fetchers.get(key)
            if fetcher is None:
                fetcher = self.fetchers[key] = ReplicaFetcher(leader, self, key[1])
            fetcher.add(tp, state)
            log.info("Added fetcher", topic=tp[0], partition=tp[1], leader=leader, fetcher=key[1],
                     fetch_offset=state.fetch_offset, leader_epoch=state.leader_epoch)

    def remove_partitions(self, partitions: list[TopicPartition]) -> None:
        for key, fetcher in list(self.fetchers.items()):
            for tp in partitions:
                fetcher.remove(tp)
            if not fetcher.partitions:
                del self.fetchers[key]
                fetcher.stop()

    def fetch_state(self, tp: TopicPartition) -> tuple[int, PartitionFetchState] | None:
        for (leader, _), fetcher in self.fetchers.items():
            st = fetcher.partitions.get(tp)
            if st is not None:
                return leader, st
        return None

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        for f in fetchers:
            f.stop()
        await asyncio.gather(*(f.closed() for f in fetchers), return_exceptions=True)


class ReplicaFetcher:
    """Fetches the partitions led by one broker (Kafka's ReplicaFetcherThread)."""

    def __init__(self, leader: int, manager: ReplicaFetcherManager, fetcher_id: int = 0) -> None:
        self.leader = leader
        self.manager = manager
        cfg = manager.config
        self.client = manager.client_factory(NetworkClientConfig(
            client_id=f"broker-{cfg.broker_id}-fetcher-{fetcher_id}", request_timeout_ms=cfg.request_timeout_ms))
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self.session = FetchSessionHandler()
        self._changed = asyncio.Event()
        self._task = asyncio.ensure_future(self._run())
        self._closing: asyncio.Future[None] | None = None

    def add(self, tp: TopicPartition, state: PartitionFetchState) -> None:
        self.partitions[tp] = state
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    def stop(self) -> None:
        """Stop fetching and close the connection to the leader (in the background: a fetcher
        whose partitions all moved elsewhere must not keep its socket)."""
        self._task.cancel()
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._close())

    async def _close(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self.client.close()

    async def closed(self) -> None:
        self.stop()
        assert self._closing is not None
        await asyncio.shield(self._closing)

    async def _run(self) -> None:
        cfg = self.manager.config
        loop = asyncio.get_running_loop()
        try:
            while True:
                now = loop.time()
                throttled = self._throttled()
                ready = {tp: st for tp, st in self.partitions.items() if st.delayed_until <= now and tp not in throttled}
                if not ready:
                    self._changed.clear()
                    # a throttled partition is looked at again after replica.fetch.backoff.ms (Kafka's
                    # fetcher waits that long when its fetch is empty), at most after a quota window
                    delays = [st.delayed_until - now if tp not in throttled else min(cfg.backoff_ms, 1000) / 1000
                              for tp, st in self.partitions.items()]
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), min(delays) if delays else None)
                    continue
                address = self.manager.leader_address(self.leader)
                if address is None:  # not in our metadata (yet): wait for it
                    await asyncio.sleep(cfg.backoff_ms / 1000)
                    continue
                self.client.update_node(self.leader, *address)
                request = self._fetch_request(ready)
                try:
                    response = await self.client.send(self.leader, request, version=FETCH_VERSION,
                                                      timeout_ms=cfg.request_timeout_ms + cfg.max_wait_ms)
                except NetworkError as e:
                    self.session.handle_error()
                    log.info("Error sending fetch request to the leader: backing off", leader=self.leader,
                             error=str(e), backoff_ms=cfg.backoff_ms)
                    await asyncio.sleep(cfg.backoff_ms / 1000)
                    continue
                assert isinstance(response, FetchResponse)
                if not self._accept(response):
                    if response.error_code in SESSION_ERRORS:
                        # the leader restarted or lost our session: a full fetch at once, as Kafka's
                        log.info("Fetch session lost: the next fetch is full", leader=self.leader,
                                 error=error_name(response.error_code))
                        continue
                    log.warning("Fetch request failed", leader=self.leader, error=error_name(response.error_code))
                    await asyncio.sleep(cfg.backoff_ms / 1000)
                    continue
                await self._process(ready, response)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the replica fetcher failed", leader=self.leader)
            raise

    def _accept(self, response: FetchResponse) -> bool:
        """Advance the fetch session by `response`; False: its data must not be used."""
        answered = {(t.topic, p.partition_index) for t in response.responses for p in t.partitions}
        return self.session.handle_response(response.error_code, response.session_id, answered)

    def _throttled(self) -> set[TopicPartition]:
        """Partitions left out of the next fetch by the follower throttle (Kafka's
        shouldFollowerThrottle): not caught up, named in their topic's
        follower.replication.throttled.replicas for this broker, while the rate is over the bound."""
        quota = self.manager.replica_manager.follower_quota
        if quota.bound == UNLIMITED or not quota.is_quota_exceeded():
            return set()
        rm = self.manager.replica_manager
        out = set()
        for tp, st in self.partitions.items():
            p = rm.partitions.get(tp)
            if p is not None and not st.in_sync and quota.is_throttled(
                    tp[1], p.log.config.follower_replication_throttled_replicas):
                out.add(tp)
        return out

    def _fetch_request(self, ready: dict[TopicPartition, PartitionFetchState]) -> FetchRequest:
        """The next fetch of `ready`, full or incremental as the session says (only the
        partitions whose position moved are named in an incremental one)."""
        cfg = self.manager.config
        rm = self.manager.replica_manager
        wanted: dict[TopicPartition, FetchPosition] = {}
        for tp, st in ready.items():
            p = rm.partitions.get(tp)
            wanted[tp] = FetchPosition(fetch_offset=st.fetch_offset,
                                       log_start_offset=p.log.log_start_offset if p is not None else -1,
                                       current_leader_epoch=st.leader_epoch, last_fetched_epoch=st.last_fetched_epoch,
                                       max_bytes=cfg.partition_max_bytes)
        data = self.session.build(wanted)
        return FetchRequest(replica_id=cfg.broker_id, max_wait_ms=cfg.max_wait_ms, min_bytes=cfg.min_bytes,
                            max_bytes=cfg.max_bytes, isolation_level=0, session_id=data.session_id,
                            session_epoch=data.epoch, topics=_fetch_topics(data),
                            forgotten_topics_data=_forgotten_topics(data), rack_id="")

    async def _process(self, sent: dict[TopicPartition, PartitionFetchState], response: FetchResponse) -> None:
        cfg = self.manager.config
        rm = self.manager.replica_manager
        loop = asyncio.get_running_loop()
        for t in response.responses:
            for pd in t.partitions:
                tp = (t.topic, pd.partition_index)
                st = self.partitions.get(tp)
                if st is None or st is not sent.get(tp):
                    continue  # removed or re-added (a new leadership) while the fetch was out
                p = rm.partitions.get(tp)
                if p is None or p.is_leader:
                    continue
                try:
                    if pd.error_code == ErrorCode.NONE:
                        await self._append(tp, st, p, pd)
                    elif pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                        await self._reset_out_of_range(tp, st, p)
                    else:
                        log.info("Partition has an error from the leader: backing off", topic=tp[0],
                                 partition=tp[1], leader=self.leader, error=error_name(pd.error_code))
                        st.delayed_until = loop.time() + cfg.backoff_ms / 1000
                except Exception as e:
                    if isinstance(e, KafkaStorageError):
                        # its log dir failed (the LogDirFailureChannel said so, once): no retry
                        # on a broken disk, the partition is no longer fetched (Kafka's
                        # markPartitionFailed); the log-dir failure handler takes it offline
                        self.remove(tp)
                        log.warning("Error while processing data for partition: its log dir failed, it is no "
                                    "longer fetched", topic=tp[0], partition=tp[1], fetch_offset=st.fetch_offset,
                                    error=str(e))
                        continue
                    log.exception("Unexpected error while processing data for partition", topic=tp[0],
                                  partition=tp[1], fetch_offset=st.fetch_offset)
                    st.delayed_until = loop.time() + cfg.backoff_ms / 1000

    async def _leader_offset(self, tp: TopicPartition, leader_epoch: int, timestamp: int) -> int:
        """The leader's log start (EARLIEST) or log end (LATEST) offset, asked as a replica
        (ListOffsets with our broker id: no isolation, the log end rather than the high
        watermark). Raises NetworkError, or LookupError with the leader's error."""
        cfg = self.manager.config
        request = ListOffsetsRequest(replica_id=cfg.broker_id, isolation_level=0, topics=[ListOffsetsTopic(
            name=tp[0], partitions=[ListOffsetsPartition(partition_index=tp[1], current_leader_epoch=leader_epoch,
                                                         timestamp=timestamp)])])
        response = await self.client.send(self.leader, request, version=LIST_OFFSETS_VERSION)
        answer = response.topics[0].partitions[0]
        if answer.error_code != ErrorCode.NONE:
            raise LookupError(error_name(answer.error_code))
        return int(answer.offset)

    async def _reset_out_of_range(self, tp: TopicPartition, st: PartitionFetchState, p: Any) -> None:
        """The leader has no records at our fetch offset (Kafka's fetchOffsetAndTruncate): its
        log ends before ours -- truncate to its end -- or starts after our end -- retention
        deleted what we were to fetch next: empty our log and start at its log start. The answer
        to our fetch carries neither offset (-1, as Kafka's), so they are asked for with
        ListOffsets. Without this a follower that was down longer than the leader's retention
        never caught up again (found by tests/sim with retention.bytes)."""
        loop = asyncio.get_running_loop()
        try:
            leader_end = await self._leader_offset(tp, st.leader_epoch, LATEST)
            ours = p.log.log_end_offset
            if leader_end < ours:
                log.warning("Truncating to the leader's log end offset: ours is past it", topic=tp[0],
                            partition=tp[1], leader_end_offset=leader_end, log_end_offset=ours)
                await p.truncate_to(leader_end, st.leader_epoch)
            else:
                leader_start = await self._leader_offset(tp, st.leader_epoch, EARLIEST)
                if leader_start > ours:
                    log.info("Truncating fully: the leader's log starts after our log end offset", topic=tp[0],
                             partition=tp[1], log_end_offset=ours, leader_log_start=leader_start)
                    await p.truncate_fully_and_start_at(leader_start, st.leader_epoch)
        except (NetworkError, LookupError) as e:
            log.info("Could not ask the leader for its offsets: backing off", topic=tp[0], partition=tp[1],
                     leader=self.leader, error=str(e))
            st.delayed_until = loop.time() + self.manager.config.backoff_ms / 1000
            return
        if p.follows(st.leader_epoch):
            _resume_at_log_end(st, p.log)

    async def _append(self, tp: TopicPartition, st: PartitionFetchState, p: Any, pd: Any) -> None:
        log_ = p.log
        diverging = pd.diverging_epoch
        if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
            target = truncation_offset(log_, diverging.epoch, diverging.end_offset)
            log.info("Truncating partition to the end of the diverging epoch", topic=tp[0], partition=tp[1],
                     epoch=diverging.epoch, leader_end_offset=diverging.end_offset, offset=target,
                     log_end_offset=log_.log_end_offset)
            await p.truncate_to(target, st.leader_epoch)
            if p.follows(st.leader_epoch):  # (else a new leadership has its own fetch state)
                _resume_at_log_end(st, log_)
            return
        records = pd.records
        if records:
            if not await p.append_as_follower(records, int(time.time() * 1000), st.leader_epoch):
                return  # no longer following at this epoch: the fetch state is another's now
            _resume_at_log_end(st, log_)
            quota = self.manager.replica_manager.follower_quota
            if quota.bound != UNLIMITED and quota.is_throttled(tp[1], log_.config.follower_replication_throttled_replicas):
                quota.record(len(records))
        st.lag = max(0, pd.high_watermark - log_.log_end_offset)
        if p.update_follower_high_watermark(pd.high_watermark, st.leader_epoch):
            self.manager.replica_manager.fetch_purgatory.check_and_complete(tp)
        if pd.log_start_offset > log_.log_start_offset:
            await p.follow_log_start_offset(pd.log_start_offset, st.leader_epoch)


def fetcher_id(tp: TopicPartition, num_fetchers: int) -> int:
    """Kafka's AbstractFetcherManager.getFetcherId: abs(31 * topic.hashCode + partition) % n, with
    Java's String.hashCode, so a partition goes to the same fetcher id as on a Kafka broker."""
    if num_fetchers <= 1:
        return 0
    h = 0
    for ch in tp[0]:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    v = (31 * h + tp[1]) & 0xFFFFFFFF
    v = v - (1 << 32) if v >= 1 << 31 else v
    return (0 if v == -(1 << 31) else abs(v)) % num_fetchers  # Kafka's Utils.abs


def truncation_offset(log_: Any, leader_epoch: int, leader_end_offset: int) -> int:
    """Where a follower truncates when its leader answers that our logs diverge: the leader's
    `leader_epoch` ends at `leader_end_offset` in its log (Kafka's
    AbstractFetcherThread.getOffsetTruncationState). Our own end of that epoch bounds it too:
    a batch we wrote in a later epoch below the leader's end offset (we led that epoch, briefly)
    is not the leader's. When we do not know the leader's epoch, we truncate to the end of our
    largest epoch below it and the next fetch (naming our new last epoch) goes on from there.
    An undefined answer (no epoch) truncates to the high watermark."""
    leo = log_.log_end_offset
    if leader_end_offset < 0:
        return min(log_.high_watermark, leo)
    cache = log_.leader_epoch_cache
    ours = cache.end_offset_for(leader_epoch, leo) if cache is not None else None
    if ours is None or ours[1] < 0:  # no epochs of ours there: the leader's word
        return min(leader_end_offset, leo)
    our_epoch, our_end = ours
    if our_epoch != leader_epoch:
        return min(our_end, leo)
    return min(our_end, leader_end_offset, leo)


def _resume_at_log_end(st: PartitionFetchState, log_: Any) -> None:
    """After an append or a truncation: the next fetch asks from our log end, naming the epoch
    of our last batch."""
    st.fetch_offset = log_.log_end_offset
    st.last_fetched_epoch = log_.latest_epoch


def _fetch_topics(data: FetchRequestData) -> list[FetchTopic]:
    topics: dict[str, FetchTopic] = {}
    for (topic, partition), pos in data.to_send.items():
        t = topics.get(topic)
        if t is None:
            t = topics[topic] = FetchTopic(topic=topic, partitions=[])
        t.partitions.append(FetchPartition(
            partition=partition, current_leader_epoch=pos.current_leader_epoch, fetch_offset=pos.fetch_offset,
            last_fetched_epoch=pos.last_fetched_epoch, log_start_offset=pos.log_start_offset,
            partition_max_bytes=pos.max_bytes))
    return list(topics.values())


def _forgotten_topics(data: FetchRequestData) -> list[ForgottenTopic]:
    topics: dict[str, ForgottenTopic] = {}
    for topic, partition in data.to_forget:
        topics.setdefault(topic, ForgottenTopic(topic=topic, partitions=[])).partitions.append(partition)
    return list(topics.values())
