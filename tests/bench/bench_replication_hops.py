"""CPU time per hop of the acks=all replication round's steady state, in-process (issue #20 §5).

Three real ReplicaManagers (leader 1, followers 2 and 3; real Logs in a temp dir, the real
Partition, ReplicaFetcher, FetchSessionHandler, FetchSessionCache and Fetch handler) exchange real
Fetch v12 request and response bytes for one partition in an incremental fetch session, one
100-byte record per round, as Kafka's EndToEndLatency loop makes them. No sockets and no event loop
turns between the hops. Each hop is timed alone (time.perf_counter_ns; thread_time_ns is a system
call that costs more than a small hop here) and its median taken: a hop lasts tens of
microseconds, far below a scheduler time slice, so the median is the hop's CPU cost even on a
loaded machine; the process's CPU time per round (time.process_time over the whole run) is printed
beside it. Per round and follower:

* follower_request: the fetcher's next request (session build) and its frame encoded;
* leader_fetch: the leader decodes that frame, handles it (session update, follower state, high
  watermark, read) and encodes the response frame -- once with the new record, once empty (the
  fetch that moves the high watermark; the real broker parks it in the fetch purgatory, which
  this bench leaves out: replica.fetch.wait.max.ms is 0 here);
* follower_response: the follower decodes the response frame, advances its session and
  processes it (append_as_follower, high watermark) -- with the record, and the empty one.

The leader's append (acks=1 here, so no DelayedProduce) is timed as leader_append.

    python -m tests.bench.bench_replication_hops [--rounds N]   (or python -m tests.bench --only hops)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.apis import fetch as fetch_api
from broker.background import BackgroundTasks
from broker.config import KafkaConfig
from broker.context import RequestContext
from broker.logging_setup import configure_logging
from broker.metadata_cache import MetadataCache
from broker.network_client import decode_response_frame
from broker.quota.quotas import ClientQuotas
from broker.replica_fetcher import FETCH_VERSION, ReplicaFetcher
from broker.replica_manager import ReplicaManager
from controller.image import BrokerInfo, MetadataImage
from protocol.framing import (
    decode_request_body,
    decode_request_header,
    encode_request_frame,
    encode_response_frame,
)
from protocol.messages import LeaderAndIsrRequest
from protocol.messages.leader_and_isr_request import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrTopicState,
)
from protocol.records import Record, build_batch
from storage.log_manager import LogManager

TOPIC = "hops"
TP = (TOPIC, 0)
BROKERS = (1, 2, 3)
CONTROLLER = 100
HOPS = ("leader_append", "follower_request", "leader_fetch_records", "follower_response_records",
        "leader_fetch_empty", "follower_response_empty")


class _IdleClient:
    """The follower's connection stand-in: its fetch loop's sends never complete (the bench
    drives the hops itself)."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.closed = False

    def update_node(self, *_: Any) -> None:
        pass

    async def send(self, *_: Any, **__: Any) -> Any:
        await asyncio.Event().wait()

    async def close(self) -> None:
        self.closed = True


class _Broker:
    """What ReplicaManager reads of a BrokerServer (as tests/sim's SimBroker)."""

    def __init__(self, root: Path, broker_id: int) -> None:
        self.broker_id = broker_id
        self.broker_epoch = 1
        self.zk_mode = True
        self.controller = None
        self.inter_broker_listener_name = "PLAINTEXT"
        self.authorizer = None  # no ACLs: the Fetch handler asks nobody (as a broker without an authorizer)
        self.quotas = ClientQuotas(11, 1, 11, 1)  # none set: nothing is recorded or throttled
        self.tasks = BackgroundTasks()
        self.config = KafkaConfig({"broker.id": broker_id, "log.dirs": str(root / f"broker-{broker_id}"),
                                   "zookeeper.connect": "bench:2181", "replica.fetch.wait.max.ms": 0})
        brokers = {b: BrokerInfo(b, "bench", 9000 + b) for b in (*BROKERS, CONTROLLER)}
        self.metadata_cache = MetadataCache(MetadataImage("bench", CONTROLLER, brokers))
        self.log_manager = LogManager.open(self.config)
        self.replica_manager = ReplicaManager(self, client_factory=_IdleClient)

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        return self.tasks.spawn(coro)


def _leader_and_isr() -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(
        controller_id=CONTROLLER, controller_epoch=1, broker_epoch=1,
        topic_states=[LeaderAndIsrTopicState(topic_name=TOPIC, topic_id=uuid.UUID(int=5), partition_states=[
            LeaderAndIsrPartitionState(topic_name=TOPIC, partition_index=0, controller_epoch=1, leader=1,
                                       leader_epoch=0, isr=list(BROKERS), partition_epoch=0,
                                       replicas=list(BROKERS))])],
        live_leaders=[])


class Round:
    """The three brokers and the hops between them."""

    def __init__(self, brokers: dict[int, _Broker]) -> None:
        self.brokers = brokers
        self.leader = brokers[1].replica_manager
        self.corr = 0
        self.times: dict[str, list[int]] = {h: [] for h in HOPS}

    def fetcher(self, b: int) -> ReplicaFetcher:
        return next(iter(self.brokers[b].replica_manager.replica_fetcher_manager.fetchers.values()))

    async def timed(self, hop: str, fn: Callable[..., Any], *args: Any) -> Any:
        t0 = time.perf_counter_ns()
        out = fn(*args)
        if asyncio.iscoroutine(out):
            out = await out
        self.times[hop].append(time.perf_counter_ns() - t0)
        return out

    def request_frame(self, fetcher: ReplicaFetcher) -> tuple[bytes, dict[Any, Any]]:
        ready = dict(fetcher.partitions)
        request = fetcher._fetch_request(ready)
        self.corr += 1
        frame = encode_request_frame(1, FETCH_VERSION, self.corr, fetcher.client.config.client_id, request)
        return frame, ready

    async def leader_fetch(self, frame: bytes) -> bytes:
        body = memoryview(frame)[4:]
        header, pos = decode_request_header(body)
        request = decode_request_body(header, body, pos)
        ctx = RequestContext(self.brokers[1], None, header)
        response = await fetch_api.handle(ctx, request)
        chunks = encode_response_frame(header.correlation_id, 1, header.request_api_version, response)
        return b"".join(bytes(c) if not isinstance(c, (bytes, bytearray, memoryview)) else c for c in chunks)

    async def follower_response(self, fetcher: ReplicaFetcher, ready: dict[Any, Any], frame: bytes) -> None:
        response = decode_response_frame(memoryview(frame)[4:], 1, FETCH_VERSION)
        assert fetcher._accept(response)
        await fetcher._process(ready, response)

    async def one_fetch(self, b: int, suffix: str) -> None:
        fetcher = self.fetcher(b)
        frame, ready = await self.timed("follower_request", self.request_frame, fetcher)
        answer = await self.timed(f"leader_fetch_{suffix}", self.leader_fetch, frame)
        await self.timed(f"follower_response_{suffix}", self.follower_response, fetcher, ready, answer)

    async def run(self, rounds: int, value: bytes) -> None:
        for i in range(rounds):
            batch = bytearray(build_batch([Record(0, 0, 0, None, value, [])], base_offset=0,
                                          base_timestamp=1_700_000_000_000 + i))
            results = await self.timed("leader_append", self.leader.append_records, [(TP, batch)], 1)
            assert results[TP].error == 0, results
            for b in (2, 3):
                await self.one_fetch(b, "records")
            for b in (2, 3):
                await self.one_fetch(b, "empty")


async def bench(rounds: int, warmup: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-hops-") as tmp:
        brokers = {b: _Broker(Path(tmp), b) for b in BROKERS}
        try:
            for b in brokers.values():
                await b.replica_manager.startup()
                await b.replica_manager.become_leader_or_follower(0, _leader_and_isr(), 7)
            r = Round(brokers)
            for b in (2, 3):  # the full fetches that open the sessions
                await r.one_fetch(b, "empty")
            await r.run(warmup, bytes(100))
            r.times = {h: [] for h in HOPS}
            gc.collect()
            cpu = time.process_time()
            await r.run(rounds, bytes(100))
            cpu = time.process_time() - cpu
            hw = r.leader.partitions[TP].log.high_watermark
            assert hw == warmup + rounds, hw
            for b in (2, 3):
                assert brokers[b].replica_manager.partitions[TP].log.log_end_offset == hw
                assert r.fetcher(b).session.epoch > 1  # incremental throughout
        finally:
            for b in brokers.values():
                await b.replica_manager.shutdown()
                b.log_manager.shutdown()
    return {**{h: statistics.median(v) / 1000 for h, v in r.times.items()}, "cpu_per_round": cpu / rounds * 1e6}


LABELS = {
    "leader_append": "leader append",
    "follower_request": "follower: build and encode the next fetch",
    "leader_fetch_records": "leader: decode a follower fetch, handle it, encode the response (with the record)",
    "follower_response_records": "follower: decode that response, append, high watermark",
    "leader_fetch_empty": "leader: the same for the fetch that moves the high watermark (empty response)",
    "follower_response_empty": "follower: decode the empty response",
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    scale = float(os.environ.get("ODRADEK_BENCH_SCALE", "1"))
    ap.add_argument("--rounds", type=int, default=max(20, int(3000 * scale)))
    ap.add_argument("--warmup", type=int, default=max(5, int(200 * scale)))
    args = ap.parse_args()
    configure_logging("INFO")  # as a broker runs (its lines to stderr, the table alone on stdout)
    result = asyncio.run(bench(args.rounds, args.warmup))
    per_round = (result["leader_append"] + 4 * result["follower_request"]
                 + 2 * sum(result[h] for h in HOPS[2:]))
    print("| hop | median µs |")
    print("|---|---:|")
    for hop in HOPS:
        print(f"| {LABELS[hop]} | {result[hop]:.1f} |")
    print(f"| round, sum of the hops (append + 2 followers x 2 fetches) | {per_round:.1f} |")
    print(f"| round, process CPU time | {result['cpu_per_round']:.1f} |")
    print()
    print(f"{args.rounds} rounds of one 100-byte record, a leader and two followers in one process, "
          "real Fetch v12 frames in an incremental fetch session (tests/bench/bench_replication_hops.py).")


if __name__ == "__main__":
    main()
