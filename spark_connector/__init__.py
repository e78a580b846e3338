"""PySpark data source `odradek`: Spark Structured Streaming over Odradek topics, no JVM jars.

    from spark_connector import register
    register(spark)
    spark.read.format("odradek").option("kafka.bootstrap.servers", "127.0.0.1:9092") ...

PySpark is imported only when `register` runs, so `import spark_connector` (done by the `odradek`
command) stays cheap and works without the `spark` extra installed.
"""

from __future__ import annotations

from typing import Any

FORMAT = "odradek"


def register(spark: Any) -> None:
    """Register the `odradek` format on a SparkSession (idempotent)."""
    from spark_connector.source import register as _register

    _register(spark)
