"""The broker's metrics, read at scrape time (a prometheus-client custom Collector).

Names and labels are those the Prometheus JMX exporter's usual Kafka rules (lowercased output,
`kafka_<domain>_<type>_<name>`, `_total` for the `...PerSec` meters' Count) give Kafka's MBeans,
so dashboards and alerts written for Kafka work unchanged.

Threading: `collect()` runs in the exporter's HTTP thread, but the state it reads (partitions,
counters, purgatories, connections) is owned by the event loop and changes under it. So the
metric families are built on the loop (`families()`, plain reads of in-memory state: no file
I/O, no awaits, a few microseconds per partition) through `run_coroutine_threadsafe`, and only
the text rendering and the socket work happen in the thread.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import structlog
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

from broker.group.metadata import GroupState
from broker.metrics.request_metrics import PHASES, cumulative
from protocol.messages import REQUESTS
from storage.flush_stats import BOUNDS_MS as FLUSH_BOUNDS_MS
from storage.flush_stats import LOG_FLUSH_STATS

log = structlog.get_logger("odradek.metrics")

if TYPE_CHECKING:
    from broker.server import BrokerServer

# how long a scrape waits for the loop to build the families before failing the scrape
SNAPSHOT_TIMEOUT_S = 10.0


def _counter(name: str, doc: str, labels: Iterable[str] = ()) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=list(labels))


def _gauge(name: str, doc: str, value: float | None = None, labels: Iterable[str] = ()) -> GaugeMetricFamily:
    if value is not None:
        return GaugeMetricFamily(name, doc, value=value)
    return GaugeMetricFamily(name, doc, labels=list(labels))


def _topic_counter(name: str, doc: str, per_topic: dict[str, int], total: int) -> CounterMetricFamily:
    """A BrokerTopicMetrics meter: a series per topic and the all-topics one without a label
    (as the JMX exporter renders the MBean without `topic=`)."""
    fam = _counter(name, doc, ["topic"])
    fam.samples.append(Sample(fam.name + "_total", {}, float(total)))
    for topic, value in sorted(per_topic.items()):
        fam.add_metric([topic], float(value))
    return fam


def topic_families(server: BrokerServer) -> list[Metric]:
    """The per-topic series of a deleted topic go away (Kafka removes its topic metrics on
    deletion): a topic neither in the metadata nor hosted here is dropped from the counters."""
    rm = server.replica_manager
    stats = rm.topic_stats
    topics = stats.topics
    known = server.metadata_cache.topics
    gone = [t for t in topics if t not in known]
    if gone:
        hosted = {tp[0] for tp in rm.partitions}
        for t in gone:
            if t not in hosted:
                stats.remove_topic(t)
    return [
        _topic_counter("kafka_server_brokertopicmetrics_messagesin", "Records appended to leaders (MessagesInPerSec).",
                       {t: c.messages_in for t, c in topics.items()}, stats.all.messages_in),
        _topic_counter("kafka_server_brokertopicmetrics_bytesin", "Record bytes appended to leaders (BytesInPerSec).",
                       {t: c.bytes_in for t, c in topics.items()}, stats.all.bytes_in),
        _topic_counter("kafka_server_brokertopicmetrics_bytesout", "Record bytes sent to consumers (BytesOutPerSec).",
                       {t: c.bytes_out for t, c in topics.items()}, stats.all.bytes_out),
    ]


def replica_manager_families(server: BrokerServer) -> list[Metric]:
    rm = server.replica_manager
    leaders = under = under_min = 0
    sizes = _gauge("kafka_log_log_size", "Bytes in a partition's live segments (Log Size).", labels=["topic", "partition"])
    for (topic, index), p in rm.partitions.items():
        if p.is_leader:
            leaders += 1
            isr = p.state.isr
            if len(isr) < len(p.state.replicas):
                under += 1
            if len(isr) < p.log.config.min_insync_replicas:
                under_min += 1
        sizes.add_metric([topic, str(index)], float(p.log.size))
    purgatory = _gauge("kafka_server_delayedoperationpurgatory_purgatorysize",
                       "Operations watched in a purgatory (PurgatorySize).", labels=["delayedOperation"])
    delayed = _gauge("kafka_server_delayedoperationpurgatory_numdelayedoperations",
                     "Operations waiting in a purgatory (NumDelayedOperations).", labels=["delayedOperation"])
    for pg in (rm.produce_purgatory, rm.fetch_purgatory):
        purgatory.add_metric([pg.name], float(pg.watched))
        delayed.add_metric([pg.name], float(pg.delayed))
    isr_shrinks = _counter("kafka_server_replicamanager_isrshrinks", "ISR shrinks the controller accepted (IsrShrinksPerSec).")
    isr_shrinks.add_metric([], float(rm.isr_shrinks))
    isr_expands = _counter("kafka_server_replicamanager_isrexpands", "ISR expansions the controller accepted (IsrExpandsPerSec).")
    isr_expands.add_metric([], float(rm.isr_expands))
    return [
        _gauge("kafka_server_replicamanager_partitioncount", "Partitions hosted here.", len(rm.partitions)),
        _gauge("kafka_server_replicamanager_leadercount", "Partitions led here.", leaders),
        _gauge("kafka_server_replicamanager_underreplicatedpartitions",
               "Partitions led here whose ISR is smaller than their replica set.", under),
        _gauge("kafka_server_replicamanager_underminisrpartitioncount",
               "Partitions led here whose ISR is smaller than min.insync.replicas.", under_min),
        _gauge("kafka_server_replicamanager_offlinereplicacount",
               "Partitions whose log could not be opened or whose log dir failed.",
               len(rm.offline) + len(rm.offline_dir_partitions)),
        isr_shrinks, isr_expands, sizes, purgatory, delayed,
    ]


def controller_families(server: BrokerServer) -> list[Metric]:
    """KafkaController's gauges: ActiveControllerCount is 1 on the active controller only (a
    cluster's sum is 1); the others are reported by it alone (0 elsewhere), from the counts it
    updates after each controller event (Kafka's updateMetrics). A single node is its own
    controller: its counts come from its metadata image."""
    active, offline, topics, partitions = 0, 0, 0, 0
    if server.zk_mode:
        kc = server.controller.kafka_controller if server.controller is not None else None
        if kc is not None and kc.is_active:
            active = 1
            offline, topics, partitions = kc.offline_partition_count, kc.global_topic_count, kc.global_partition_count
    else:
        active = 1
        image = server.metadata_cache.image
        topics = len(image.topics)
        for topic in image.topics.values():
            partitions += len(topic.partitions)
            offline += sum(1 for st in topic.partitions.values() if st.leader < 0)
    return [
        _gauge("kafka_controller_kafkacontroller_activecontrollercount",
               "1 on the cluster's active controller, 0 elsewhere.", active),
        _gauge("kafka_controller_kafkacontroller_offlinepartitionscount",
               "Partitions without a live leader (reported by the active controller).", offline),
        _gauge("kafka_controller_kafkacontroller_globaltopiccount", "Topics (reported by the active controller).", topics),
        _gauge("kafka_controller_kafkacontroller_globalpartitioncount",
               "Partitions (reported by the active controller).", partitions),
    ]


def network_families(server: BrokerServer) -> list[Metric]:
    conns = _gauge("kafka_server_socketservermetrics_connection_count", "Open connections per listener.",
                   labels=["listener"])
    counts = {listener.name: 0 for listener in server.config.listeners}
    for conn in server.connections:
        name = conn.listener.name
        counts[name] = counts.get(name, 0) + 1
    for name, n in sorted(counts.items()):
        conns.add_metric([name], float(n))
    return [conns]


def request_families(server: BrokerServer) -> list[Metric]:
    """RequestMetrics per API (`request` label: Kafka's API name; Fetch also split into
    FetchConsumer and FetchFollower as Kafka does); histograms in ms
    (broker/metrics/request_metrics.py)."""
    rm = server.request_metrics
    if rm is None:
        return []
    count = _counter("kafka_network_requestmetrics_requests", "Requests handled (RequestsPerSec).", ["request"])
    hists = [HistogramMetricFamily(f"kafka_network_requestmetrics_{phase}", f"Request {phase} (Kafka's RequestMetrics).",
                                   labels=["request"]) for phase in PHASES]
    named = sorted(((key if isinstance(key, str) else api_name(key), m) for key, m in rm.apis.items()),
                   key=lambda item: item[0])
    for name, m in named:
        count.add_metric([name], float(m.count))
        for fam, h in zip(hists, m.phases, strict=True):
            fam.add_metric([name], h.cumulative(), h.sum)
    return [count, *hists]


def api_name(key: int) -> str:
    """Kafka's ApiKeys name of a key: the generated request class's name without `Request`."""
    cls = REQUESTS.get(key)
    return cls.__name__.removesuffix("Request") if cls is not None else str(key)


def group_families(server: BrokerServer) -> list[Metric]:
    """GroupMetadataManager's counts, and each group's committed offsets and lag, computed here
    at scrape time (kafka_exporter's names, which Kafka dashboards use): for the groups this
    broker coordinates, on the partitions it leads (lag = high watermark, the end offset a
    read_uncommitted consumer sees, minus the committed offset)."""
    gc = server.group_coordinator
    if gc is None:
        return []
    rm = server.replica_manager
    by_state = {state: 0 for state in GroupState}
    num_offsets = 0
    current = _gauge("kafka_consumergroup_current_offset", "A group's committed offset.",
                     labels=["consumergroup", "topic", "partition"])
    lag = _gauge("kafka_consumergroup_lag", "High watermark minus the group's committed offset.",
                 labels=["consumergroup", "topic", "partition"])
    for group_id, g in gc.groups.items():
        by_state[g.state] += 1
        num_offsets += len(g.offsets)
        for (topic, index), om in g.offsets.items():
            p = rm.partitions.get((topic, index))
            if p is None or not p.is_leader:
                continue
            labels = [group_id, topic, str(index)]
            current.add_metric(labels, float(om.offset))
            lag.add_metric(labels, float(max(0, p.high_watermark - om.offset)))
    prefix = "kafka_coordinator_group_groupmetadatamanager_"
    out: list[Metric] = [
        _gauge(prefix + "numgroups", "Groups this broker coordinates.", len(gc.groups)),
        _gauge(prefix + "numoffsets", "Committed offsets of the groups this broker coordinates.", num_offsets),
    ]
    for state, n in by_state.items():
        out.append(_gauge(prefix + "numgroups" + state.value.lower(), f"Groups in state {state.value}.", n))
    return [*out, current, lag]


def replication_families(server: BrokerServer) -> list[Metric]:
    """Followers' lag behind their leaders (FetcherLagMetrics ConsumerLag: the leader's high
    watermark minus our log end at the last fetch) and the replication throttles' measured byte
    rates (Kafka's LeaderReplication / FollowerReplication byte-rate quota sensors)."""
    rm = server.replica_manager
    lag = _gauge("kafka_server_fetcherlagmetrics_consumerlag", "Offsets a follower is behind its leader.",
                 labels=["clientId", "topic", "partition"])
    for (leader, fid), fetcher in rm.replica_fetcher_manager.fetchers.items():
        client_id = f"ReplicaFetcherThread-{fid}-{leader}"
        for (topic, index), st in fetcher.partitions.items():
            if st.lag is not None:
                lag.add_metric([client_id, topic, str(index)], float(st.lag))
    now_ms = time.monotonic() * 1000
    return [
        lag,
        _gauge("kafka_server_leaderreplication_byte_rate", "Throttled replication bytes per second sent as leader.",
               rm.leader_quota.rate.measure(now_ms)),
        _gauge("kafka_server_followerreplication_byte_rate",
               "Throttled replication bytes per second fetched as follower.", rm.follower_quota.rate.measure(now_ms)),
    ]


def process_families(server: BrokerServer) -> list[Metric]:
    """The loop's busy ratio (our request handler pool is the event loop) and log flush times."""
    out: list[Metric] = []
    busy = server.loop_busy
    if busy is not None:
        out.append(_gauge("kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
                          "Fraction of the last second the event loop was idle (1 - busy).", 1.0 - busy.ratio))
        out.append(_gauge("odradek_event_loop_busy_ratio", "Fraction of the last second the event loop ran.", busy.ratio))
    buckets, total_ms = LOG_FLUSH_STATS.snapshot()
    flush = HistogramMetricFamily("kafka_log_logflushstats_logflushrateandtimems", "Log flushes (fsync) and their time.")
    flush.add_metric([], cumulative(FLUSH_BOUNDS_MS, buckets), total_ms)
    out.append(flush)
    return out


FAMILIES = (topic_families, request_families, group_families, replication_families, process_families, replica_manager_families, controller_families, network_families)


def families(server: BrokerServer) -> list[Metric]:
    """Every family, built on the event loop (see the module docstring)."""
    out: list[Metric] = []
    if server.replica_manager is None:  # still starting
        return out
    for build in FAMILIES:
        out.extend(build(server))
    return out


class BrokerCollector(Collector):
    """Asks the broker's loop for the families at each scrape."""

    def __init__(self, server: BrokerServer, loop: asyncio.AbstractEventLoop) -> None:
        self.server = server
        self.loop = loop

    def collect(self) -> Iterator[Metric]:
        async def build() -> list[Metric]:
            return families(self.server)

        future: Any = asyncio.run_coroutine_threadsafe(build(), self.loop)
        try:
            result = future.result(SNAPSHOT_TIMEOUT_S)
        except Exception:  # a bug of ours: the scrape fails (HTTP 500), the broker goes on
            log.exception("building the metrics failed")
            raise
        yield from result
