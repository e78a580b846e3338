"""Runnable Spark Structured Streaming jobs on top of the `odradek` data source."""
