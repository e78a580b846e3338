"""The errors the data source raises on purpose, so callers (and tests) can tell them apart.

Both derive from built-in exceptions: Spark shows the Python message of a failed planner or task,
and `ValueError`/`RuntimeError` read naturally there."""

from __future__ import annotations


class OptionError(ValueError):
    """A reader or writer option is unknown, missing, contradictory or malformed. Raised on the
    driver while the query is planned, before any data moves."""


class DataLossError(RuntimeError):
    """Offsets the query must read are gone (deleted by retention or DeleteRecords, or the topic
    was recreated). Raised only when `failOnDataLoss` is true, as Spark's kafka source does."""
