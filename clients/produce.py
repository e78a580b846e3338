"""`odradek produce`: one record per input line (kafka-console-producer.sh's job).

Lines are bytes, not text: the trailing newline is dropped and everything else is sent as is.
Sends are asynchronous and flushed at the end; the command fails (exit 1) if any record was not
acknowledged, so `odradek produce < file && echo done` means every line is on the broker.
"""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any, BinaryIO

import click

from clients.client_properties import ClientProperties
from clients.common import admin_client, bootstrap_option, error_text, kafka_errors, parse_pairs

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


def parse_line(line: bytes, key_separator: bytes | None, lineno: int) -> tuple[bytes | None, bytes]:
    """(key, value) of one input line; with a key separator, the key is what precedes its
    first occurrence."""
    if line.endswith(b"\n"):
        line = line[:-2] if line.endswith(b"\r\n") else line[:-1]
    if key_separator is None:
        return None, line
    key, sep, value = line.partition(key_separator)
    if not sep:
        raise click.ClickException(f"no key separator found on line number {lineno}: {line!r}")
    return key, value


@click.command()
@bootstrap_option
@click.argument("topic")
@click.option("--file", "-f", "path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Read lines from this file instead of standard input.")
@click.option("--key-separator", "-K", help="Each line is KEY<sep>VALUE (e.g. -K ':').")
@click.option("--header", "-H", "headers", multiple=True, metavar="KEY=VALUE",
              help="Header added to every record (repeatable).")
@click.option("--partition", "-p", type=click.IntRange(min=0), help="Send every record to this partition.")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True)
@click.option("--compression", "-z", type=click.Choice(CODECS), default="none", show_default=True)
@click.option("--linger-ms", type=int, default=5, show_default=True)
def produce(bootstrap: str, timeout_s: float, client_config: ClientProperties, topic: str, path: Path | None,
            key_separator: str | None, headers: tuple[str, ...], partition: int | None,
            acks: str, compression: str, linger_ms: int) -> None:
    """Send each line of standard input (or --file) as a record to TOPIC.

    \b
    Examples:
      echo 'hello' | odradek produce greetings
      odradek produce clicks -K ':' -H source=cli --compression zstd < clicks.txt
      odradek produce clicks --file clicks.txt --acks 1 --partition 0
    """
    from kafka import KafkaProducer
    from kafka.util import ensure_valid_topic_name

    try:
        ensure_valid_topic_name(topic)  # before reading input that would then be thrown away
    except ValueError as e:
        raise click.ClickException(str(e)) from None
    header_list = [(k, v.encode()) for k, v in parse_pairs(headers).items()]
    sep = key_separator.encode() if key_separator is not None else None
    failures: list[BaseException] = []
    sent = 0
    existed = _topic_exists(bootstrap, timeout_s, client_config, topic)
    with kafka_errors(bootstrap, client_config):
        # defaults < --command-config < this command's own options
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            **{"client_id": "odradek-cli-producer", "max_block_ms": int(timeout_s * 1000),
               "bootstrap_timeout_ms": int(timeout_s * 1000), **client_config.kafka_python("producer"),
               "acks": "all" if acks == "all" else int(acks),
               "compression_type": None if compression == "none" else compression, "linger_ms": linger_ms},
        )
        try:
            if not existed:
                _create_by_metadata(producer, topic, timeout_s)
            with _open(path) as source:
                for lineno, line in enumerate(source, 1):
                    key, value = parse_line(line, sep, lineno)
                    future = producer.send(topic, value=value, key=key, partition=partition,
                                           headers=header_list or None)
                    future.add_errback(failures.append)
                    sent += 1
                    if failures:
                        break
            producer.flush(timeout=timeout_s * 6)
        finally:
            producer.close(timeout=timeout_s)
    if failures:
        raise click.ClickException(f"{len(failures)} of {sent} records were not acknowledged: "
                                   f"{error_text(failures[0])}")
    click.echo(f"Produced {sent} records to {topic}.", err=True)


def _topic_exists(bootstrap: str, timeout_s: float, client_config: ClientProperties, topic: str) -> bool:
    """Whether TOPIC exists, asked without creating it (and warning about brokers that do not
    answer, as every command does)."""
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        return any(t["name"] == topic and t["error_code"] == 0 for t in admin.describe_topics([topic]))


def _create_by_metadata(producer: Any, topic: str, timeout_s: float) -> None:
    """Ask for a missing TOPIC as kafka-console-producer's first send does: a broker with
    auto.create.topics.enable creates it, and the command says so; otherwise refuse (Kafka's
    tool fails with `Topic X not present in metadata`). Done before reading any input, so an
    empty input does not report `Produced 0 records` to a topic that is not there."""
    from kafka import errors as Errors

    try:
        producer.partitions_for(topic)
    except Errors.KafkaTimeoutError:
        raise click.ClickException(
            f"topic '{topic}' does not exist and the broker did not create it within {timeout_s:g}s "
            "(auto.create.topics.enable=false?): create it with `odradek topics create`") from None
    click.echo(f"Created topic {topic} (it did not exist; the broker's auto.create.topics.enable).", err=True)


def _open(path: Path | None) -> AbstractContextManager[BinaryIO]:
    """The file, or standard input left open afterwards."""
    return path.open("rb") if path is not None else nullcontext(sys.stdin.buffer)
