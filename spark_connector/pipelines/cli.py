"""`odradek pipeline`: run the example Spark pipelines (PySpark is imported only when one runs)."""

from __future__ import annotations

import click


@click.group()
def pipeline() -> None:
    """Example Spark Structured Streaming pipelines over Odradek topics."""
