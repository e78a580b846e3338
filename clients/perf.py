"""`odradek perf`: producer, consumer and end-to-end latency tests through librdkafka."""

from __future__ import annotations

import click


@click.group()
def perf() -> None:
    """Measure throughput and latency against any Kafka-compatible broker."""
