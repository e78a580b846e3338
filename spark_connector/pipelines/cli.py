"""`odradek pipeline`: run the example Spark pipelines (PySpark is imported only when one runs)."""

from __future__ import annotations

from pathlib import Path

import click

from clients.client_properties import ClientProperties
from clients.common import command_config_option
from spark_connector.pipelines.clickstream import SOURCES  # (imports no PySpark)


@click.group()
def pipeline() -> None:
    """Example Spark Structured Streaming pipelines over Odradek topics."""


@pipeline.command()
@click.option("--bootstrap-server", default="127.0.0.1:9092", show_default=True)
@click.option("--output", type=click.Path(file_okay=False, path_type=Path),
              default=Path("clickstream-output"), show_default=True,
              help="Parquet output and checkpoint directory.")
@click.option("--events", type=int, default=600, show_default=True, help="Clicks to generate.")
@click.option("--available-now", is_flag=True,
              help="Produce all clicks first (simulated event times), process them, stop.")
@click.option("--rate", type=float, default=20.0, show_default=True,
              help="Live mode: clicks per second.")
@click.option("--spacing-ms", type=int, default=100, show_default=True,
              help="--available-now: event-time gap between simulated clicks.")
@click.option("--trigger-seconds", type=int, default=5, show_default=True,
              help="Live mode: micro-batch interval.")
@click.option("--source", type=click.Choice(SOURCES), default="odradek", show_default=True,
              help="The Spark data source that reads clicks and writes counts: odradek (this "
                   "repository's Python source) or kafka (Spark's own Java connector).")
@click.option("--kafka-jars", metavar="FOLDER|JAR,...",
              help="--source kafka: Spark's kafka connector (spark-sql-kafka-0-10_2.13 and its "
                   "dependencies) as a folder of jars or comma-separated jar files. Default: "
                   "build/java/spark-<PySpark version>/ of this repository (make java-deps).")
@command_config_option
def clickstream(bootstrap_server: str, output: Path, events: int, available_now: bool,
                rate: float, spacing_ms: int, trigger_seconds: int, source: str,
                kafka_jars: str | None, client_config: ClientProperties) -> None:
    """Clicks -> Spark (10 s event-time windows, watermark) -> topic page-counts + Parquet.

    \b
    Examples:
      odradek pipeline clickstream --available-now --events 600
      odradek pipeline clickstream --rate 50 --events 3000
      odradek pipeline clickstream --available-now --source kafka

    \b
    --source kafka runs Spark's own connector, found in --kafka-jars, else in
    build/java/spark-<PySpark version>/ of the Odradek repository, else taken
    from PYSPARK_SUBMIT_ARGS. Outside the repository, Spark can fetch it from
    Maven Central:
      export PYSPARK_SUBMIT_ARGS='--packages org.apache.spark:spark-sql-kafka-0-10_2.13:<PySpark version> pyspark-shell'
    """
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise click.ClickException("PySpark is not installed: pip install 'odradek[spark]'"
                                   ) from None
    from spark_connector.pipelines.clickstream import resolve_jars, run
    from spark_connector.pipelines.kafka_jars import KafkaJarsNotFound

    try:
        jars = resolve_jars(source, kafka_jars)
    except KafkaJarsNotFound as e:
        raise click.UsageError(str(e)) from None
    raise SystemExit(run(bootstrap_server, output, events=events, available_now=available_now,
                         rate=rate, spacing_ms=spacing_ms, trigger_seconds=trigger_seconds,
                         source=source, jars=jars, client=dict(client_config.values)))
