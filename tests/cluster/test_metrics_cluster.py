"""/metrics of a 3-broker ZooKeeper-mode cluster, scraped over HTTP from each broker: the active
controller count sums to 1; a follower paused (SIGSTOP) past replica.lag.time.max.ms makes its
leaders report under-replicated partitions and ISR shrinks, and once it runs again and catches
up every broker reports 0 under-replicated partitions and the leaders count ISR expansions; a
leader's RequestMetrics count its followers' fetches as FetchFollower and a real consumer's as
FetchConsumer, each with every phase (response queue and send included)."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

from tests.broker_process import free_port
from tests.cluster.processes import IDS, running_cluster
from tests.metrics_scrape import scrape, value
from tests.zookeeper import ZooKeeperServer

LAG_MS = 1500
WAIT = 30.0


async def scrape_all(ports: dict[int, int], among: list[int]) -> dict[int, Any]:
    return {i: await asyncio.to_thread(scrape, "127.0.0.1", ports[i]) for i in among}


def total(samples: dict[int, Any], name: str) -> float:
    return sum(value(s, name) for s in samples.values())


async def until(ports: dict[int, int], among: list[int], check: Any, what: str) -> dict[int, Any]:
    """Scrape `among` until `check(samples)` holds (bounded); the samples."""
    deadline = time.monotonic() + WAIT
    samples: dict[int, Any] = {}
    while time.monotonic() < deadline:
        samples = await scrape_all(ports, among)
        if check(samples):
            return samples
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what}: not within {WAIT}s: " + str({
        i: {k: v for (k, _), v in s.items() if "replicamanager" in k or "activecontroller" in k}
        for i, s in samples.items()}))


async def test_under_replicated_and_active_controller(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    ports = {i: free_port() for i in IDS}
    per_broker = {i: (f"metrics.port={ports[i]}", "metrics.host=127.0.0.1") for i in IDS}
    async with running_cluster(zookeeper, tmp_path, (f"replica.lag.time.max.ms={LAG_MS}",), per_broker) as cluster:
        await cluster.open()
        all_ids = list(IDS)
        await until(ports, all_ids, lambda s: total(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1
                    and total(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0, "one controller, no URP")
        cid, _ = await cluster.controller()
        paused = next(i for i in IDS if i != cid)
        others = [i for i in IDS if i != paused]
        before = await scrape_all(ports, others)
        shrinks_before = total(before, "kafka_server_replicamanager_isrshrinks_total")
        cluster.brokers[paused].proc.send_signal(signal.SIGSTOP)
        try:
            during = await until(ports, others,
                                 lambda s: total(s, "kafka_server_replicamanager_underreplicatedpartitions") >= 1,
                                 f"URP with broker {paused} paused")
            assert total(during, "kafka_controller_kafkacontroller_activecontrollercount") == 1
            # the running followers fetch from each other's leaders: their lag is served
            assert any(n == "kafka_server_fetcherlagmetrics_consumerlag" for s in during.values() for n, _ in s)
        finally:
            cluster.brokers[paused].proc.send_signal(signal.SIGCONT)
        after = await until(ports, all_ids, lambda s: total(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0
                            and total(s, "kafka_server_replicamanager_isrexpands_total") >= 1,
                            f"no URP once broker {paused} runs again")
        assert total(after, "kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert total(after, "kafka_server_replicamanager_isrshrinks_total") > shrinks_before
        # every partition has one leader somewhere: the leader counts add up to the controller's
        assert total(after, "kafka_server_replicamanager_leadercount") == total(
            after, "kafka_controller_kafkacontroller_globalpartitioncount") == 9
        assert total(after, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0


async def test_fetches_split_into_consumer_and_follower(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    import warnings

    with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated importlib call
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
        from kafka.admin import NewTopic

    ports = {i: free_port() for i in IDS}
    per_broker = {i: (f"metrics.port={ports[i]}", "metrics.host=127.0.0.1") for i in IDS}
    async with running_cluster(zookeeper, tmp_path, (), per_broker) as cluster:
        await cluster.open()
        bootstrap = cluster.brokers[1].bootstrap

        def produce_and_consume() -> None:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20_000)
            try:  # led by broker 1, followed by 2 and 3
                admin.create_topics([NewTopic("split", -1, -1, replica_assignments={0: [1, 2, 3]})])
            finally:
                admin.close()
            producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", request_timeout_ms=20_000)
            for i in range(100):
                producer.send("split", b"v%d" % i, partition=0)
            producer.flush(30)
            producer.close()
            consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000)
            consumer.assign([TopicPartition("split", 0)])
            consumer.seek_to_beginning()
            got = sum(1 for _, _ in zip(range(100), consumer, strict=False))
            consumer.close()
            assert got == 100

        await asyncio.to_thread(produce_and_consume)

        def split(s: Any) -> tuple[float, float, float]:
            n = "kafka_network_requestmetrics_requests_total"
            return value(s, n, request="Fetch"), value(s, n, request="FetchConsumer"), value(s, n, request="FetchFollower")

        # the followers keep fetching (acks=all needed them); the consumer fetched from broker 1
        leader = (await until(ports, [1], lambda s: split(s[1])[2] >= 2 and split(s[1])[1] >= 1,
                              "FetchFollower and FetchConsumer on the leader"))[1]
        fetch, consumer_fetches, follower_fetches = split(leader)
        assert fetch == consumer_fetches + follower_fetches, (fetch, consumer_fetches, follower_fetches)
        for request in ("FetchConsumer", "FetchFollower"):
            count = value(leader, "kafka_network_requestmetrics_requests_total", request=request)
            for phase in ("requestqueuetimems", "localtimems", "remotetimems", "responsequeuetimems",
                          "responsesendtimems", "totaltimems"):
                assert value(leader, f"kafka_network_requestmetrics_{phase}_count", request=request) == count
        # a caught-up follower's fetch waits replica.fetch.wait.max.ms in the purgatory: remote time
        assert value(leader, "kafka_network_requestmetrics_remotetimems_sum", request="FetchFollower") >= 100
