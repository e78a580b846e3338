"""Clickstream: per-page click counts over 10-second event-time windows, Odradek in and out.

    python -m spark_connector.pipelines.clickstream --bootstrap-server 127.0.0.1:9092
    odradek pipeline clickstream --bootstrap-server 127.0.0.1:9092 [--source kafka]

A generator produces JSON click events `{"user": "u7", "page": "/cart", "ts": <epoch ms>}` to topic
`clicks` (key = user). The Spark job reads them with the `odradek` data source (or, with
`--source kafka`, Spark's own Java `kafka` connector: same options, same rows), parses the JSON, counts
clicks per page over tumbling 10-second windows of *event* time with a 10-second watermark (late
clicks within the watermark still count; a window is emitted once, in append mode, when the
watermark passes its end), and writes each finished window to topic `page-counts` (key = page,
JSON value) and to Parquet.

Both outputs are written from one `foreachBatch`, so the aggregation state exists once. Parquet
goes to `<output>/batch_id=<n>/` with mode overwrite, so a re-run micro-batch replaces its own
files (exactly-once); the topic gets the at-least-once guarantee of the sink (both connectors'
sinks are at-least-once). The counts are the same whichever connector runs the job.

Two ways to run: `--available-now` produces all events first (stamped with simulated times
`--spacing-ms` apart), processes what is there and stops: deterministic, used by the tests and
the docs. The default is live: `--events` clicks stamped with the wall clock at `--rate` per
second while the query runs every `--trigger-seconds`; windows are printed as the watermark closes
them (the newest ones stay open when the generator stops: no later click moves the watermark).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

#: The Spark data sources the job can read clicks and write counts with: this repository's Python
#: source, or Spark's Java kafka connector (its jars on the class path: kafka_jars.py).
SOURCES = ("odradek", "kafka")
CLICKS_TOPIC = "clicks"
COUNTS_TOPIC = "page-counts"
PAGES = ("/", "/products", "/products/42", "/cart", "/checkout", "/help")
WINDOW_S = 10
WATERMARK_S = 10
#: Clicks arrive up to this much out of order (less than the watermark, so none is dropped).
JITTER_MS = 3_000


@dataclass(frozen=True)
class Click:
    user: str
    page: str
    ts_ms: int

    def to_json(self) -> bytes:
        return json.dumps({"user": self.user, "page": self.page, "ts": self.ts_ms}).encode()


def generate_clicks(n: int, start_ms: int, spacing_ms: int = 100, seed: int = 7) -> list[Click]:
    """`n` clicks about `spacing_ms` apart from `start_ms`, jittered out of order by up to
    JITTER_MS, skewed towards the first pages (a deterministic sequence for a given seed)."""
    rng = random.Random(seed)
    weights = [len(PAGES) - i for i in range(len(PAGES))]
    return [
        Click(user=f"u{rng.randrange(50)}", page=rng.choices(PAGES, weights)[0],
              ts_ms=max(start_ms, start_ms + i * spacing_ms - rng.randrange(JITTER_MS)))
        for i in range(n)
    ]


def expected_counts(clicks: Iterable[Click]) -> dict[tuple[int, str], int]:
    """What the job must emit for these clicks: {(window start ms, page): count} for the windows
    the watermark has closed, i.e. window end <= max event time - WATERMARK_S."""
    clicks = list(clicks)
    watermark = max(c.ts_ms for c in clicks) - WATERMARK_S * 1000
    window_ms = WINDOW_S * 1000
    counts = Counter((c.ts_ms - c.ts_ms % window_ms, c.page) for c in clicks)
    return {k: v for k, v in counts.items() if k[0] + window_ms <= watermark}


def client_settings(client: Mapping[str, str], role: Literal["admin", "producer", "consumer"]) -> dict[str, Any]:
    """kafka-python settings from Kafka client properties (`odradek pipeline --command-config`)."""
    from clients.client_properties import ClientProperties

    return ClientProperties(client).kafka_python(role)


def spark_kafka_options(client: Mapping[str, str]) -> dict[str, str]:
    """The client properties' security keys as the `kafka.*` options both sources take."""
    return {f"kafka.{k}": v for k, v in client.items() if k.startswith(("security.", "ssl.", "sasl."))}


def ensure_topics(bootstrap: str, clicks_topic: str, counts_topic: str, partitions: int = 3,
                  client: Mapping[str, str] | None = None) -> None:
    """Create the two topics if they do not exist yet, with the broker's
    default.replication.factor (KIP-464's -1): 1 on a single node, 3 in docker-compose.yml."""
    from kafka.admin import KafkaAdminClient, NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap,
                             **{"client_id": "clickstream", **client_settings(client or {}, "admin")})
    try:
        existing = set(admin.list_topics())
        new = [NewTopic(t, n, -1) for t, n in ((clicks_topic, partitions), (counts_topic, 1))
               if t not in existing]
        if new:
            try:
                admin.create_topics(new)
            except TopicAlreadyExistsError:
                pass  # created concurrently: fine
    finally:
        admin.close()


def produce_clicks(bootstrap: str, clicks: Iterable[Click], topic: str = CLICKS_TOPIC,
                   rate: float | None = None, client: Mapping[str, str] | None = None) -> int:
    """Send the clicks (keyed by user), at `rate` per second if given; returns how many."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, **{**client_settings(client or {}, "producer"), "linger_ms": 5})
    sent = 0
    started = time.monotonic()
    try:
        for click in clicks:
            producer.send(topic, key=click.user.encode(), value=click.to_json(),
                          timestamp_ms=click.ts_ms)
            sent += 1
            if rate:
                ahead = started + sent / rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)  # pacing the generator, not waiting for an event
        producer.flush()
    finally:
        producer.close()
    return sent


def page_counts(spark: Any, bootstrap: str, topic: str = CLICKS_TOPIC,
                max_offsets_per_trigger: int | None = None, source: str = "odradek",
                client: Mapping[str, str] | None = None) -> Any:
    """The streaming DataFrame of finished windows: window_start, window_end, page, count, with
    clicks read through `source` (one of SOURCES)."""
    from pyspark.sql import functions as F

    from spark_connector import register

    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, not {source!r}")
    if source == "odradek":
        register(spark)
    reader = (spark.readStream.format(source)
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .options(**spark_kafka_options(client or {})))
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    clicks = (reader.load()
              .select(F.from_json(F.col("value").cast("string"),
                                  "user string, page string, ts long").alias("c"))
              .select("c.user", "c.page",
                      F.timestamp_millis(F.col("c.ts")).alias("event_time"))
              .where(F.col("page").isNotNull() & F.col("event_time").isNotNull()))
    return (clicks.withWatermark("event_time", f"{WATERMARK_S} seconds")
            .groupBy(F.window("event_time", f"{WINDOW_S} seconds"), "page")
            .count()
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "page", "count"))


def start(spark: Any, bootstrap: str, output: Path, checkpoint: Path, *,
          clicks_topic: str = CLICKS_TOPIC, counts_topic: str = COUNTS_TOPIC,
          available_now: bool = False, trigger_seconds: int = 5,
          max_offsets_per_trigger: int | None = None, echo: bool = False,
          source: str = "odradek", client: Mapping[str, str] | None = None) -> Any:
    """Start the streaming query, reading and writing through `source` (with the client
    properties' security keys); returns the StreamingQuery."""
    from pyspark.sql import functions as F

    def write_batch(batch: Any, batch_id: int) -> None:
        batch = batch.persist()
        try:
            if batch.isEmpty():
                return
            (batch.select(F.col("page").alias("key"),
                          F.to_json(F.struct("window_start", "window_end", "page", "count"))
                          .alias("value"))
             .write.format(source)
             .option("kafka.bootstrap.servers", bootstrap)
             .option("topic", counts_topic)
             .options(**spark_kafka_options(client or {}))
             .mode("append").save())
            batch.write.mode("overwrite").parquet(str(output / f"batch_id={batch_id}"))
            if echo:
                for row in batch.orderBy("window_start", "page").collect():
                    print(format_row(row), flush=True)
        finally:
            batch.unpersist()

    writer = (page_counts(spark, bootstrap, clicks_topic, max_offsets_per_trigger, source, client)
              .writeStream.outputMode("append")
              .foreachBatch(write_batch)
              .option("checkpointLocation", str(checkpoint)))
    writer = (writer.trigger(availableNow=True) if available_now
              else writer.trigger(processingTime=f"{trigger_seconds} seconds"))
    return writer.queryName("clickstream").start()


def read_counts(spark: Any, output: Path) -> list[Any]:
    """Every window written to Parquet so far, in (window_start, page) order."""
    if not output.exists():
        return []
    return (spark.read.parquet(str(output))
            .select("window_start", "window_end", "page", "count")
            .orderBy("window_start", "page").collect())


def format_row(row: Any) -> str:
    return (f"{row.window_start:%H:%M:%S}-{row.window_end:%H:%M:%S}  {row.page:<14} "
            f"{row['count']:>5}")


def run(bootstrap: str, output: Path, *, events: int, available_now: bool, rate: float,
        spacing_ms: int, trigger_seconds: int, master: str = "local[2]",
        source: str = "odradek", jars: Sequence[str] = (), client: Mapping[str, str] | None = None) -> int:
    """The command-line job: generate, process, print the windows; returns an exit status.
    `jars` go to `spark.jars` (Spark's kafka connector for source "kafka": kafka_jars.py);
    `client` holds Kafka client properties (--command-config) for every client it builds."""
    from pyspark.sql import SparkSession

    # Spark's Python workers must run this interpreter (the one with kafka-python and this repo).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    output = output.resolve()
    parquet, checkpoint = output / "page_counts", output / "_checkpoint"
    ensure_topics(bootstrap, CLICKS_TOPIC, COUNTS_TOPIC, client=client)
    builder = (SparkSession.builder.master(master).appName("odradek-clickstream")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false"))
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        print(f"window (UTC)       page           count   <- {COUNTS_TOPIC} and {parquet}",
              flush=True)
        if available_now:
            start_ms = (int(time.time() * 1000) // 60_000) * 60_000  # a whole minute
            n = produce_clicks(bootstrap, generate_clicks(events, start_ms, spacing_ms), client=client)
            print(f"produced {n} clicks to {CLICKS_TOPIC}", file=sys.stderr, flush=True)
            query = start(spark, bootstrap, parquet, checkpoint, available_now=True, echo=True,
                          source=source, client=client)
            query.awaitTermination()
        else:
            query = start(spark, bootstrap, parquet, checkpoint, trigger_seconds=trigger_seconds,
                          echo=True, source=source, client=client)
            live = (Click(f"u{random.randrange(50)}", random.choice(PAGES),
                          int(time.time() * 1000)) for _ in range(events))
            produce_clicks(bootstrap, live, rate=rate, client=client)  # the query runs meanwhile
            # Windows close only when newer clicks move the watermark: the last ones stay open.
            query.processAllAvailable()
            query.stop()
        if query.exception() is not None:
            print(f"query failed: {query.exception()}", file=sys.stderr)
            return 1
        total = sum(r["count"] for r in read_counts(spark, parquet))
        print(f"{total} clicks counted in finished windows", flush=True)
        return 0
    finally:
        spark.stop()


def resolve_jars(source: str, kafka_jars: str | None) -> list[str]:
    """The `spark.jars` a run needs: Spark's kafka connector for source "kafka", none for the
    Python source. Raises kafka_jars.KafkaJarsNotFound (with what to do) before Spark starts."""
    from spark_connector.pipelines.kafka_jars import KafkaJarsNotFound, kafka_connector_jars

    if source != "kafka":
        if kafka_jars:
            raise KafkaJarsNotFound("--kafka-jars is for --source kafka")
        return []
    from pyspark import __version__

    return kafka_connector_jars(kafka_jars, __version__)


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m spark_connector.pipelines.clickstream",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-server", default="127.0.0.1:9092")
    p.add_argument("--output", type=Path, default=Path("clickstream-output"))
    p.add_argument("--events", type=int, default=600)
    p.add_argument("--available-now", action="store_true",
                   help="produce all events first, process them, stop (deterministic)")
    p.add_argument("--rate", type=float, default=20.0, help="live mode: clicks per second")
    p.add_argument("--spacing-ms", type=int, default=100,
                   help="--available-now: simulated event-time gap between clicks")
    p.add_argument("--trigger-seconds", type=int, default=5)
    p.add_argument("--source", choices=SOURCES, default="odradek",
                   help="the Spark data source: odradek (Python) or kafka (Spark's connector)")
    p.add_argument("--kafka-jars", help="--source kafka: a folder of Spark's kafka connector jars "
                                        "or comma-separated jar files (default: build/java)")
    args = p.parse_args(argv)
    from spark_connector.pipelines.kafka_jars import KafkaJarsNotFound

    try:
        jars = resolve_jars(args.source, args.kafka_jars)
    except KafkaJarsNotFound as e:
        p.error(str(e))
    return run(args.bootstrap_server, args.output, events=args.events,
               available_now=args.available_now, rate=args.rate, spacing_ms=args.spacing_ms,
               trigger_seconds=args.trigger_seconds, source=args.source, jars=jars)


if __name__ == "__main__":
    sys.exit(main())
