"""`odradek transactions`: list the transactions the coordinators know and describe one
transactional id, as kafka-transactions.sh's `list` and `describe` do, with its table: the same
headers and cells, each cell padded to its column's width and followed by a tab, so scripts that
read the Kafka tool's output read this one.

`list` asks every broker (ListTransactions; each coordinates a slice of `__transaction_state`)
and prints one row per transactional id with the broker that answered as its coordinator;
`describe` asks the id's coordinator (DescribeTransactions). They speak the Kafka protocol only,
so they work against Apache Kafka 3.x too (`--duration-filter` needs ListTransactions v1, Kafka
3.8+). describe-producers, find-hanging and abort are left to kafka-transactions.sh.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import click

from clients.client_properties import ClientProperties
from clients.common import admin_client, bootstrap_option, split_names

LIST_HEADERS = ("TransactionalId", "Coordinator", "ProducerId", "TransactionState")
DESCRIBE_HEADERS = ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                    "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                    "TopicPartitions")


def tool_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """kafka-transactions.sh's prettyPrintTable: every cell left-aligned, padded to the widest
    cell of its column (header included) and followed by a tab; one line per row."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(headers)]
    return "\n".join("".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths, strict=True))
                     for row in [list(headers), *rows])


@click.group()
def transactions() -> None:
    """List transactions and describe a transactional id (kafka-transactions.sh's list and
    describe, with its table).

    \b
    Examples:
      odradek transactions list
      odradek transactions list --state Ongoing --duration-filter 60000
      odradek transactions describe --transactional-id my-app-0
    """


@transactions.command("list")
@bootstrap_option
@click.option("--state", "states", multiple=True,
              help="Only transactions in this state (Ongoing, PrepareCommit, CompleteAbort, ...; repeatable).")
@click.option("--producer-id", "producer_ids", multiple=True, type=int, help="Only this producer id (repeatable).")
@click.option("--duration-filter", "duration_ms", type=int,
              help="Only transactions running longer than this many milliseconds (KIP-994).")
def list_(bootstrap: str, timeout_s: float, client_config: ClientProperties, states: tuple[str, ...], producer_ids: tuple[int, ...],
          duration_ms: int | None) -> None:
    """Print every transactional id each coordinator knows: its coordinator, producer id and
    state.

    \b
    Examples:
      odradek transactions list
      odradek transactions list --state Ongoing --state PrepareCommit
      odradek transactions list --duration-filter 900000
    """
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        brokers = sorted(b.node_id for b in admin._manager.cluster.brokers() if b.node_id not in admin.unreachable)
        found = admin.list_transactions(broker_ids=brokers, producer_id_filters=list(producer_ids) or None,
                                        state_filters=split_names(states) or None, duration_filter_ms=duration_ms)
    rows = [[t.transactional_id, str(broker), str(t.producer_id), t.state.value]
            for broker, listed in sorted(found.items()) for t in sorted(listed, key=lambda t: t.transactional_id)]
    click.echo(tool_table(LIST_HEADERS, rows))


@transactions.command()
@bootstrap_option
@click.option("--transactional-id", "transactional_id", required=True, help="The transactional id.")
def describe(bootstrap: str, timeout_s: float, client_config: ClientProperties, transactional_id: str) -> None:
    """Print a transactional id's state at its coordinator: producer id and epoch, timeout, the
    current transaction's start time and duration, and its partitions.

    \b
    Examples:
      odradek transactions describe --transactional-id my-app-0
    """
    from kafka import errors as Errors

    with admin_client(bootstrap, timeout_s, client_config) as admin:
        try:
            d = admin.describe_transactions([transactional_id])[transactional_id]
        except Errors.TransactionalIdNotFoundError:
            raise click.ClickException(f"transactional id '{transactional_id}' was not found at its "
                                       "coordinator") from None
    started = d.transaction_start_time_ms
    row = [str(d.coordinator_id), transactional_id, str(d.producer_id), str(d.producer_epoch), d.state.value,
           str(d.transaction_timeout_ms), "None" if started < 0 else str(started),
           "None" if started < 0 else str(int(time.time() * 1000) - started),
           ",".join(f"{tp.topic}-{tp.partition}" for tp in sorted(d.topic_partitions))]
    click.echo(tool_table(DESCRIBE_HEADERS, [row]))
