"""The replication simulation (issue #20 §2): three brokers running the real replication code --
ReplicaManager (LeaderAndIsr, acks=all appends, the ISR checks), Partition, the ReplicaFetcher,
the AlterPartitionManager, the Fetch API handler, real Logs in a tmpfs directory -- with a
controller stand-in applying Kafka's election rules (controller.election), a producer sending
acks=all, on a virtual clock (tests/sim/loop.py) over a simulated network (tests/sim/network.py),
all from one seed.

Faults, from the seed: message delays and losses, links cut for a while, a broker crashed
(kill -9: its tasks and pending executor work die, its files stay as written) and restarted once
the controller saw its session expire.

Invariants, checked as the run goes (each check names the moment it fails):
* no acknowledged acks=all record is missing from a replica the controller may elect (its ISR:
  checked at every ack and every controller state change);
* replicas never diverge below the high watermark (checked periodically and at the end);
* a broker's high watermark never goes back within one incarnation;
* a leader acknowledges only records it appended in its current leader epoch;
* at the end, with the faults healed, every acknowledged record is in every ISR member's log.

What the stand-in leaves out (said so in docs/architecture.md): controller failover, preferred
leader election, reassignment, more than one partition, power loss (unflushed writes lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import random
import shutil
import sys
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from broker.apis import fetch as fetch_api
from broker.apis import list_offsets as list_offsets_api
from broker.background import BackgroundTasks
from broker.config import KafkaConfig
from broker.context import RequestContext
from broker.loop_audit import wrap_log_locks
from broker.metadata_cache import MetadataCache
from broker.network_client import NetworkClientConfig, NetworkError
from broker.quota.quotas import ClientQuotas
from broker.replica_manager import ReplicaManager
from controller.election import LeaderAndIsr, leader_for_offline, remove_replica_from_isr
from controller.image import BrokerInfo, MetadataImage
from controller.topic_partition import TopicPartition
from protocol.errors import ErrorCode, error_name
from protocol.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    FetchRequest,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
)
from protocol.messages import alter_partition_response as apr
from protocol.messages.leader_and_isr_request import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrTopicState,
)
from protocol.messages.request_header import RequestHeader
from protocol.records import Record, build_batch, iter_batches, read_header
from storage.log_manager import LogManager
from tests.sim.loop import WALL_ORIGIN_S, SimLock, VirtualClockLoop, virtual_time
from tests.sim.network import CURRENT_NODE, NetworkFaults, SimClient, SimNetwork

TOPIC = "sim"
TP = (TOPIC, 0)
TOPIC_ID = uuid.UUID(int=20)
CONTROLLER = 100
PRODUCER = 200
BROKERS = (1, 2, 3)
ORIGIN_MS = int(WALL_ORIGIN_S * 1000)


@dataclass
class Scenario:
    """What one seed runs (the defaults: what `make test` and `make fault` run)."""

    duration_s: float = 4.0
    settle_s: float = 20.0
    produce_every_ms: float = 15.0
    crash_every_s: float = 1.5  # mean time between broker crashes
    cut_every_s: float = 2.0  # mean time between link cuts
    session_timeout_ms: int = 1000
    # retention.bytes, run every 250 ms through ReplicaManager.cleanup_logs (-1: no retention);
    # records it deletes below a replica's log start are not required of that replica any more
    retention_bytes: int = -1
    faults: NetworkFaults = field(default_factory=NetworkFaults)
    broker_props: dict[str, Any] = field(default_factory=lambda: {
        "min.insync.replicas": 2,
        "replica.lag.time.max.ms": 1000,
        "replica.fetch.wait.max.ms": 50,
        "replica.fetch.backoff.ms": 100,
        "request.timeout.ms": 500,
        "log.segment.bytes": 4096,  # rolls (in an executor) every ~50 records
        "log.index.size.max.bytes": 4096,
    })


    @classmethod
    def for_seed(cls, seed: int) -> Scenario:
        """The scenario a seed runs when none is given: sizes and rates vary with the seed, so a
        sweep meets rolls every dozen records and rare ones, busy and quiet producers, quick and slow
        ISR shrinks."""
        rng = random.Random(seed * 7 + 3)
        sc = cls(produce_every_ms=rng.choice((10.0, 20.0, 40.0)))
        sc.broker_props["log.segment.bytes"] = rng.choice((1024, 4096, 16384))
        sc.broker_props["replica.lag.time.max.ms"] = rng.choice((500, 1000, 3000))
        sc.retention_bytes = rng.choice((-1, -1, 4096))
        return sc


class Violation(AssertionError):
    pass


def executor_delay_ms(rng: random.Random) -> float:
    """How long executor work takes: mostly short, sometimes a slow disk (hundreds of ms)."""
    return rng.choice((0.05, 0.2, 1.0, rng.expovariate(1 / 5), rng.uniform(20, 300)))


class SimBroker:
    """One incarnation of a broker: what ReplicaManager reads of a BrokerServer."""

    def __init__(self, sim: Simulation, broker_id: int, epoch: int) -> None:
        self.sim = sim
        self.broker_id = broker_id
        self.broker_epoch = epoch
        self.alive = True
        self.zk_mode = True
        self.controller = None
        self.authorizer = None  # no ACLs in the simulation: handlers that ask for one are allowed everything
        self.quotas = ClientQuotas(11, 1, 11, 1)  # none set: nothing is recorded or throttled
        self.inter_broker_listener_name = "PLAINTEXT"
        self.tasks = BackgroundTasks()
        self.all_tasks: set[asyncio.Task[Any]] = set()
        self.context = contextvars.copy_context()
        self.context.run(CURRENT_NODE.set, self)
        retention = sim.scenario.retention_bytes
        self.config = KafkaConfig({"broker.id": broker_id, "log.dirs": str(sim.root / f"broker-{broker_id}"),
                                   "zookeeper.connect": "sim:2181", **sim.scenario.broker_props,
                                   **({"log.retention.bytes": retention} if retention >= 0 else {})})
        # the brokers' endpoints and the controller; partitions are hosted by LeaderAndIsr only
        brokers = {b: BrokerInfo(b, "sim", 9000 + b) for b in (*BROKERS, CONTROLLER)}
        self.metadata_cache = MetadataCache(MetadataImage("sim", CONTROLLER, brokers))
        self.log_manager = LogManager.open(self.config)  # a restart loads (and recovers) the logs
        self.replica_manager = ReplicaManager(
            self, client_factory=lambda cfg: SimClient(sim.network, broker_id, cfg))
        # fetch session ids are drawn from a generator of their own: from the seed here too
        self.replica_manager.fetch_sessions._rng = random.Random(sim.seed * 1009 + broker_id * 31 + epoch)
        self.hw_seen = -1

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        return self.tasks.spawn(coro)

    async def start(self) -> None:
        await self.replica_manager.startup()
        if self.sim.scenario.retention_bytes >= 0:
            self._spawn(self.tasks.every(250, self.replica_manager.cleanup_logs, "retention"))

    def crash(self) -> None:
        """kill -9: every task of this incarnation cancelled, nothing flushed or closed; the files
        stay as written (the page cache survives a process crash)."""
        self.alive = False
        for task in list(self.all_tasks):
            task.cancel()
        for fd in self.log_manager._locks.values():  # the process's locks go with it
            os.close(fd)
        self.log_manager._locks.clear()

    async def serve(self, request: Any, version: int | None) -> Any:
        rm = self.replica_manager
        if isinstance(request, FetchRequest):
            ctx = RequestContext(self, None, RequestHeader(request_api_key=1, request_api_version=version or 12))
            response = await fetch_api.handle(ctx, request)
            for t in response.responses:  # the bytes go on the wire now, as the connection sends them
                for p in t.partitions:
                    if p.records is not None and not isinstance(p.records, (bytes, bytearray)):
                        p.records = p.records.read()
            return response
        if isinstance(request, ListOffsetsRequest):
            ctx = RequestContext(self, None, RequestHeader(request_api_key=2, request_api_version=version or 4))
            return await list_offsets_api.handle(ctx, request)
        if isinstance(request, LeaderAndIsrRequest):
            return await rm.become_leader_or_follower(0, request, version or 7)
        if isinstance(request, ProduceCall):
            return await self._produce(request)
        raise AssertionError(f"unexpected request {request!r}")

    async def _produce(self, call: ProduceCall) -> Any:
        rm = self.replica_manager
        p = rm.partitions.get(TP)
        epoch = p.leader_epoch if p is not None else None
        results = await rm.append_records([(TP, call.batch)], -1, timeout_ms=call.timeout_ms)
        result = results[TP]
        if result.error == ErrorCode.NONE:
            self.sim.on_ack(self, call.record_id, result.base_offset, epoch)
        return result


@dataclass
class ProduceCall:
    record_id: int
    batch: bytearray
    timeout_ms: int = 1000


class SimController:
    """The active controller, as far as one partition needs it (Kafka's ZooKeeper-mode
    KafkaController): elections when a leader's session expires (controller.election's
    leader_for_offline, clean only), the OfflineReplica ISR shrink (remove_replica_from_isr),
    AlterPartition validated as tryProcessAlterPartition does, LeaderAndIsr sent to each broker
    in order and retried until it is answered."""

    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.epoch = 1
        self.assignment = list(BROKERS)
        self.state = LeaderAndIsr(BROKERS[0], 0, BROKERS, partition_epoch=0)
        self.live: dict[int, int] = {}  # broker id -> broker epoch
        self._queues: dict[int, asyncio.Queue[LeaderAndIsr]] = {}
        self._senders: dict[int, asyncio.Task[None]] = {}
        self.client = SimClient(sim.network, CONTROLLER, _client_config(1000))

    def _set(self, new: LeaderAndIsr, why: str) -> None:
        self.state = new
        self.sim.log(f"controller: {why}: leader {new.leader} epoch {new.leader_epoch} isr {list(new.isr)} "
                     f"partition epoch {new.partition_epoch}")
        self.sim.check_electable(f"after the controller's {why}")

    def _send_state(self, brokers: list[int]) -> None:
        for b in brokers:
            if b in self.live:
                self._queues[b].put_nowait(self.state)

    def broker_up(self, broker_id: int, epoch: int) -> None:
        self.live[broker_id] = epoch
        self._queues[broker_id] = asyncio.Queue()
        self._senders[broker_id] = asyncio.ensure_future(self._sender(broker_id, epoch))
        self._send_state([broker_id])  # onBrokerStartup: the new replica learns the state
        if self.state.leader == -1:
            self._elect(f"the election after broker {broker_id} started")

    def broker_down(self, broker_id: int) -> None:
        """Its ZooKeeper session expired (onBrokerFailure)."""
        self.live.pop(broker_id, None)
        self._senders.pop(broker_id).cancel()
        self._queues.pop(broker_id)
        if self.state.leader == broker_id:
            self._elect(f"the election after broker {broker_id} failed")
        if broker_id in self.state.isr:
            new = remove_replica_from_isr(self.state, broker_id)
            if new != self.state:
                self._set(new.with_partition_epoch(self.state.partition_epoch + 1),
                          f"removal of broker {broker_id} from the ISR")
                self._send_state(self.assignment)

    def _elect(self, why: str) -> None:
        result = leader_for_offline(TopicPartition(*TP), self.state, self.assignment, set(self.live), False)
        if result.leader_and_isr is None:
            return
        self._set(result.leader_and_isr.with_partition_epoch(self.state.partition_epoch + 1), why)
        self._send_state(self.assignment)

    async def _sender(self, broker_id: int, broker_epoch: int) -> None:
        queue = self._queues[broker_id]
        while True:
            st = await queue.get()
            request = LeaderAndIsrRequest(
                controller_id=CONTROLLER, controller_epoch=self.epoch, broker_epoch=broker_epoch,
                topic_states=[LeaderAndIsrTopicState(topic_name=TOPIC, topic_id=TOPIC_ID, partition_states=[
                    LeaderAndIsrPartitionState(topic_name=TOPIC, partition_index=0, controller_epoch=self.epoch,
                                               leader=st.leader, leader_epoch=st.leader_epoch, isr=list(st.isr),
                                               partition_epoch=st.partition_epoch, replicas=self.assignment)])],
                live_leaders=[])
            while True:  # the controller channel retries until the broker answers
                try:
                    answer = await self.client.send(broker_id, request, version=7)
                    self.sim.log(f"controller: LeaderAndIsr (leader {st.leader} epoch {st.leader_epoch}) to broker "
                                 f"{broker_id}: {answer}")
                    break
                except NetworkError as e:
                    self.sim.log(f"controller: LeaderAndIsr to broker {broker_id} failed ({e}): retrying")
                    await asyncio.sleep(0.1)

    async def serve(self, request: Any, version: int | None) -> Any:
        assert isinstance(request, AlterPartitionRequest)
        if self.live.get(request.broker_id) != request.broker_epoch:
            return AlterPartitionResponse(error_code=ErrorCode.STALE_BROKER_EPOCH)
        pd = request.topics[0].partitions[0]
        new = LeaderAndIsr(request.broker_id, pd.leader_epoch, tuple(pd.new_isr), partition_epoch=pd.partition_epoch)
        cur = self.state
        if new.partition_epoch > cur.partition_epoch or new.leader_epoch > cur.leader_epoch:
            code = ErrorCode.NOT_CONTROLLER
        elif new.leader_epoch < cur.leader_epoch:
            code = ErrorCode.FENCED_LEADER_EPOCH
        elif new.equals_allow_stale_partition_epoch(cur):
            code = ErrorCode.NONE
        elif new.partition_epoch < cur.partition_epoch:
            code = ErrorCode.INVALID_UPDATE_VERSION
        elif set(new.isr) - set(self.live):
            code = ErrorCode.OPERATION_NOT_ATTEMPTED
        else:
            code = ErrorCode.NONE
            self._set(new.with_partition_epoch(cur.partition_epoch + 1),
                      f"AlterPartition from broker {request.broker_id}")
        st = self.state
        self.sim.log(f"controller: AlterPartition from broker {request.broker_id} (leader epoch {pd.leader_epoch}, "
                     f"ISR {list(pd.new_isr)}, partition epoch {pd.partition_epoch}): {error_name(code)}")
        partition = apr.PartitionData(partition_index=0, error_code=code)
        if code == ErrorCode.NONE:
            partition = apr.PartitionData(partition_index=0, leader_id=st.leader, leader_epoch=st.leader_epoch,
                                          isr=list(st.isr), partition_epoch=st.partition_epoch)
        return AlterPartitionResponse(topics=[apr.TopicData(topic_name=TOPIC, partitions=[partition])])


def _job_alive() -> Any:
    """Executor work submitted now dies with the node that submitted it."""
    node = CURRENT_NODE.get()
    return lambda: not isinstance(node, SimBroker) or node.alive


def _client_config(timeout_ms: int) -> NetworkClientConfig:
    return NetworkClientConfig(client_id="sim", request_timeout_ms=timeout_ms)


class Simulation:
    def __init__(self, seed: int, root: Path, scenario: Scenario | None = None, trace: bool = False) -> None:
        self.seed = seed
        self.root = root
        self.scenario = scenario or Scenario.for_seed(seed)
        self.rng = random.Random(seed)
        self.tracing = trace
        self.trace: list[str] = []
        self.loop = VirtualClockLoop(random.Random(seed ^ 0x5EED), executor_delay_ms)
        self.loop.set_task_factory(self._task_factory)
        self.loop.job_alive = _job_alive
        self.loop.on_lock_wait = self._on_lock_wait
        self.network = SimNetwork(self.loop, random.Random(seed ^ 0xC0FFEE), self.scenario.faults, self.log)
        self.network.on_handler_error = self._on_handler_error
        self.loop.set_exception_handler(self._on_loop_error)
        self.brokers: dict[int, SimBroker] = {}
        self.incarnations: list[SimBroker] = []
        self.epochs = {b: 0 for b in BROKERS}
        self.controller: SimController | None = None
        self.acked: dict[int, int] = {}  # record id -> offset
        self.committed: dict[int, int] = {}  # offset -> record id, as first seen below a high watermark
        self.floor = 0  # see _retention_floor
        self._failed: asyncio.Future[None] | None = None  # the first violation (see _main)
        self.stats = {"acked": 0, "crashes": 0, "cuts": 0}
        self._background: set[asyncio.Future[Any]] = set()  # the producer's sends, the restarts

    # -- plumbing ---------------------------------------------------------------------------------

    def _task_factory(self, loop: asyncio.AbstractEventLoop, coro: Any, context: Any = None) -> asyncio.Task[Any]:
        task = asyncio.Task(coro, loop=loop, context=context)
        node = (context.get(CURRENT_NODE) if context is not None else CURRENT_NODE.get())
        if isinstance(node, SimBroker):
            if not node.alive:
                task.cancel()
            node.all_tasks.add(task)
            task.add_done_callback(node.all_tasks.discard)
        return task

    def _on_loop_error(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """An exception nobody handled (a callback's, a task's never retrieved): a bug, in the
        code under test or in the harness, ends the run -- except a Violation already raised."""
        error = context.get("exception")
        if isinstance(error, Violation) or (self._failed is not None and self._failed.done()):
            return
        with contextlib.suppress(Violation):
            self.violation(f"unhandled: {context.get('message')}: {type(error).__name__}: {error}")

    def _on_handler_error(self, node: int, request: Any, error: BaseException) -> None:
        where = "".join(traceback.format_exception(error)[-3:]).strip().replace("\n", " | ")
        self.violation(f"node {node} failed serving {type(request).__name__}: {type(error).__name__}: {error} ({where})")

    def _on_lock_wait(self, lock: SimLock) -> None:
        node = CURRENT_NODE.get()
        who = f"broker {node.broker_id}" if isinstance(node, SimBroker) else "the simulation"
        self.violation(f"the event loop of {who} waited on {lock.name}, held by executor work {lock.held_by}")

    def log(self, line: str) -> None:
        if self.tracing:
            self.trace.append(f"{self.loop.time():9.4f} {line}")

    def _log_processor(self, _logger: Any, method: str, event: dict[str, Any]) -> Any:
        if self.tracing:
            node = CURRENT_NODE.get()
            who = f"broker {node.broker_id}" if isinstance(node, SimBroker) else "sim"
            what = event.pop("event", "")
            exc = event.pop("exc_info", None)
            self.trace.append(f"{self.loop.time():9.4f}   [{who}] {method}: {what} {event or ''}")
            if exc:
                error = exc if isinstance(exc, BaseException) else sys.exc_info()[1]
                if error is not None:
                    self.trace.extend("             " + line for line in "".join(
                        traceback.format_exception(error)).rstrip().splitlines())
        raise structlog.DropEvent

    # -- the scenario -----------------------------------------------------------------------------

    def run(self) -> dict[str, int]:
        saved = structlog.get_config()
        structlog.configure(processors=[self._log_processor], logger_factory=structlog.ReturnLoggerFactory(),
                            wrapper_class=structlog.BoundLogger, cache_logger_on_first_use=False)
        logging.disable(logging.CRITICAL)
        random_state = random.getstate()
        random.seed(self.seed)  # code under test that draws (session ids, jitter) draws the same
        loop = self.loop
        unwatch_log_locks = wrap_log_locks(lambda lock, name: SimLock(lock, name, loop))
        try:
            with virtual_time(self.loop):
                self.loop.run_until_complete(self._main())
        finally:
            try:
                self._close()
            finally:
                unwatch_log_locks()
                random.setstate(random_state)
                logging.disable(logging.NOTSET)
                structlog.configure(**saved)
        return self.stats

    def _close(self) -> None:
        for b in self.brokers.values():
            if b.alive:
                b.crash()
        for b in self.incarnations:  # their descriptors and maps (a worker runs many seeds),
            for lg in list(b.log_manager.logs.values()):  # written nothing: a later one owns the files
                for seg in [*lg._segments, *(seg for _due, seg in lg._pending_deletes)]:
                    with contextlib.suppress(Exception):
                        seg.close_handlers()
        pending = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            with virtual_time(self.loop):
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()
        shutil.rmtree(self.root, ignore_errors=True)

    async def _main(self) -> None:
        """The scenario, ended early by the first violation (raised wherever it was found: a
        broker's task, the controller's handler, a check)."""
        self._failed = self.loop.create_future()
        body = asyncio.ensure_future(self._scenario())
        await asyncio.wait([body, self._failed], return_when=asyncio.FIRST_COMPLETED)
        if self._failed.done():
            body.cancel()
            raise self._failed.exception()  # type: ignore[misc]
        body.result()

    async def _scenario(self) -> None:
        self.controller = SimController(self)
        self.network.up(CONTROLLER, self.controller.serve, contextvars.copy_context())
        for b in BROKERS:
            await self._start(b)
        sc = self.scenario
        end = self.loop.time() + sc.duration_s
        producer = asyncio.ensure_future(self._produce(end))
        faults = asyncio.ensure_future(self._faults(end))
        checks = asyncio.ensure_future(self._periodic_checks())
        await asyncio.gather(producer, faults)
        # heal: every link back, every broker up, then the ISR must fill again
        self.network.cut.clear()
        for b in BROKERS:
            if b not in self.brokers or not self.brokers[b].alive:
                await self._restart(b)
        await self._until_full_isr(sc.settle_s)
        checks.cancel()
        self.check_no_divergence("at the end")
        self.check_all_acked_in_isr()

    async def _start(self, b: int) -> None:
        self.epochs[b] += 1
        broker = SimBroker(self, b, self.epochs[b])
        self.brokers[b] = broker
        self.incarnations.append(broker)
        self.network.up(b, broker.serve, broker.context)
        task = self.loop.create_task(broker.start(), context=broker.context.copy())
        await task
        assert self.controller is not None
        self.controller.broker_up(b, self.epochs[b])

    async def _restart(self, b: int) -> None:
        """As the broker's startup registration does: wait until the controller saw the old
        session expire (its registration gone), then start and register anew."""
        assert self.controller is not None
        while b in self.controller.live:
            await asyncio.sleep(0.05)
        self.log(f"restart broker {b}")
        await self._start(b)

    def _crash(self, b: int) -> None:
        broker = self.brokers[b]
        self.log(f"crash broker {b}")
        self.stats["crashes"] += 1
        broker.crash()
        self.network.down(b)
        assert self.controller is not None
        controller = self.controller
        self.loop.call_later(self.scenario.session_timeout_ms / 1000, controller.broker_down, b)

    async def _faults(self, end: float) -> None:
        sc = self.scenario
        rng = self.rng
        next_crash = self.loop.time() + rng.expovariate(1 / sc.crash_every_s)
        next_cut = self.loop.time() + rng.expovariate(1 / sc.cut_every_s)
        while True:
            now = self.loop.time()
            at = min(next_crash, next_cut)
            if at >= end:
                return
            await asyncio.sleep(at - now)
            if at == next_crash:
                next_crash = at + rng.expovariate(1 / sc.crash_every_s)
                alive = [b for b in BROKERS if self.brokers[b].alive]
                if len(alive) >= 2:
                    victim = rng.choice(alive)
                    self._crash(victim)
                    back = sc.session_timeout_ms / 1000 + rng.uniform(0.05, 2.0)
                    self._background.add(asyncio.ensure_future(self._restart_after(victim, back)))
            else:
                next_cut = at + rng.expovariate(1 / sc.cut_every_s)
                a, b = rng.sample([*BROKERS, CONTROLLER], 2)
                pair = frozenset((a, b))
                self.network.cut.add(pair)
                self.stats["cuts"] += 1
                span = rng.uniform(0.05, 3.0)
                self.log(f"cut the link {a}-{b} for {span:.3f} s")
                self.loop.call_later(span, self._heal, pair)

    def _heal(self, pair: frozenset[int]) -> None:
        self.log(f"heal the link {'-'.join(map(str, sorted(pair)))}")
        self.network.cut.discard(pair)

    async def _restart_after(self, b: int, delay: float) -> None:
        await asyncio.sleep(delay)
        if not self.brokers[b].alive:
            await self._restart(b)

    async def _produce(self, end: float) -> None:
        record_id = 0
        client = SimClient(self.network, PRODUCER, _client_config(1000))
        while self.loop.time() < end:
            await asyncio.sleep(self.scenario.produce_every_ms / 1000)
            assert self.controller is not None
            leader = self.controller.state.leader  # the client's metadata
            if leader < 0:
                continue
            record_id += 1
            batch = bytearray(build_batch([Record(0, 0, 0, None, b"v", [])], base_timestamp=ORIGIN_MS + record_id))
            self._background.add(asyncio.ensure_future(self._send(client, leader, ProduceCall(record_id, batch))))

    async def _send(self, client: SimClient, leader: int, call: ProduceCall) -> None:
        try:
            await client.send(leader, call, timeout_ms=2000)
        except NetworkError:
            pass

    async def _periodic_checks(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.check_no_divergence("periodically")

    async def _until_full_isr(self, timeout_s: float) -> None:
        deadline = self.loop.time() + timeout_s
        assert self.controller is not None
        while set(self.controller.state.isr) != set(BROKERS) or self.controller.state.leader < 0:
            if self.loop.time() > deadline:
                self.violation(f"the ISR did not fill again within {timeout_s} s after healing: "
                                f"{self.controller.state}")
            await asyncio.sleep(0.1)

    # -- invariants -------------------------------------------------------------------------------

    @staticmethod
    def _log_of(broker: SimBroker) -> Any:
        p = broker.replica_manager.partitions.get(TP)
        return p.log if p is not None else broker.log_manager.get_log(*TP)

    def record_at(self, broker: SimBroker, offset: int) -> int | None:
        """The id of the record at `offset` in the broker's log (one record per batch), or None."""
        lg = self._log_of(broker)
        if lg is None or not lg.log_start_offset <= offset < lg.log_end_offset:
            return None
        info = lg.read(offset, 1, None, True)
        buf = info.records.read() if info.records is not None else b""
        for pos, _size in iter_batches(buf):
            h = read_header(buf, pos)
            if h.base_offset == offset:
                return h.base_timestamp - ORIGIN_MS
        return None

    def records_of(self, broker: SimBroker) -> dict[int, int]:
        """offset -> record id of every record in the broker's log."""
        lg = self._log_of(broker)
        if lg is None:
            return {}
        out: dict[int, int] = {}
        offset, end = lg.log_start_offset, lg.log_end_offset
        while offset < end:  # a read stays within one segment
            info = lg.read(offset, 1 << 30, None, True)
            buf = info.records.read() if info.records is not None else b""
            nxt = offset
            for pos, _size in iter_batches(buf):
                h = read_header(buf, pos)
                out[h.base_offset] = h.base_timestamp - ORIGIN_MS
                nxt = h.base_offset + h.last_offset_delta + 1
            if nxt == offset:
                break
            offset = nxt
        return out

    def on_ack(self, broker: SimBroker, record_id: int, offset: int, epoch_at_append: int | None) -> None:
        p = broker.replica_manager.partitions.get(TP)
        if not broker.alive:
            return
        if p is None or not p.is_leader:  # (a leader whose epoch moved on may ack: its log is the same)
            self.violation(f"broker {broker.broker_id} acknowledged record {record_id} at offset {offset} appended "
                           f"at leader epoch {epoch_at_append}, but it is not the leader (epoch "
                           f"{p.leader_epoch if p is not None else None})")
        self.log(f"ack record {record_id} at offset {offset} by broker {broker.broker_id}")
        self.acked[record_id] = offset
        self.stats["acked"] += 1
        self.check_electable(f"when broker {broker.broker_id} acknowledged record {record_id}", only=record_id)

    def check_electable(self, when: str, only: int | None = None) -> None:
        """Every acknowledged record (or just `only`) is in the log of every ISR member the
        controller could elect now (a live one; a dead one is checked when it is back)."""
        assert self.controller is not None
        for b in self.controller.state.isr:
            broker = self.brokers.get(b)
            if broker is None or not broker.alive:
                continue
            if only is not None:
                offset = self.acked[only]
                found = {offset: self.record_at(broker, offset)}
                wanted = [(only, offset)]
            else:
                found = self.records_of(broker)
                wanted = list(self.acked.items())
            lg = self._log_of(broker)
            if lg is None:  # restarted, its LeaderAndIsr not applied yet: an empty replica
                if wanted:
                    self.violation(f"{when}: broker {b}, in the controller's ISR, has no log")
                continue
            start = max(lg.log_start_offset, self._retention_floor())
            for rid, offset in wanted:
                if offset >= start and found.get(offset) != rid:
                    self.violation(f"{when}: record {rid}, acknowledged at offset {offset}, is not in the log of "
                                   f"broker {b}, which the controller's ISR {list(self.controller.state.isr)} lists "
                                   f"(it has {found.get(offset)} there, log end {self._log_of(broker).log_end_offset})")

    def _retention_floor(self) -> int:
        """The highest log start offset a leader has had: below it retention deleted records,
        and what a replica still holds there (an old leader's records, perhaps, until its own
        log start follows the leader's) is no longer anyone's to read."""
        assert self.controller is not None
        leader = self.brokers.get(self.controller.state.leader)
        if leader is not None and leader.alive and (lg := self._log_of(leader)) is not None:
            self.floor = max(self.floor, lg.log_start_offset)
        return self.floor

    def check_no_divergence(self, when: str) -> None:
        for broker in self.brokers.values():
            if not broker.alive:
                continue
            p = broker.replica_manager.partitions.get(TP)
            if p is None:
                continue
            hw = p.high_watermark
            if hw < broker.hw_seen:
                self.violation(f"{when}: broker {broker.broker_id}'s high watermark went back from "
                               f"{broker.hw_seen} to {hw}")
            broker.hw_seen = hw
            floor = self._retention_floor()
            for offset, rid in self.records_of(broker).items():
                if offset >= hw or offset < floor:
                    continue
                first = self.committed.setdefault(offset, rid)
                if first != rid:
                    self.violation(f"{when}: broker {broker.broker_id} has record {rid} at offset {offset}, below "
                                   f"its high watermark {hw}, where another replica had record {first}")

    def check_all_acked_in_isr(self) -> None:
        assert self.controller is not None
        for b in self.controller.state.isr:
            records = self.records_of(self.brokers[b])
            start = max(self._log_of(self.brokers[b]).log_start_offset, self._retention_floor())
            missing = [rid for rid, offset in self.acked.items() if offset >= start and records.get(offset) != rid]
            if missing:
                self.violation(f"at the end: broker {b} (in the ISR) lacks acknowledged records {missing[:10]}")

    def violation(self, message: str) -> None:
        self.log(f"VIOLATION {message}")
        error = Violation(f"seed {self.seed}: {message}")
        if self._failed is not None and not self._failed.done():
            self._failed.set_exception(error)
        raise error
