"""`odradek consume`: print records of a topic (kafka-console-consumer.sh's job).

Output follows Kafka's DefaultMessageFormatter: optional `CreateTime:<ms>`, `Partition:<p>`,
`Offset:<o>`, headers `k:v,k:v` (or `NO_HEADERS`), key, then the value, separated by
`--separator` (a tab). Keys and values are written as raw bytes, as Kafka's tool does.
Without `--group` the consumer assigns partitions itself and commits nothing, so looking at a
topic never disturbs a consumer group's offsets.
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from clients.client_properties import ClientProperties
from clients.common import bootstrap_option, kafka_errors
from clients.groups import parse_datetime
from clients.reachability import avoid_unreachable


def format_record(record: Any, *, timestamp: bool, partition: bool, offset: bool,
                  headers: bool, key: bool, separator: bytes) -> bytes:
    """One output line (without the newline) for a kafka-python ConsumerRecord."""
    fields: list[bytes] = []
    if timestamp:
        if record.timestamp is None or record.timestamp < 0:
            fields.append(b"NO_TIMESTAMP")
        else:
            kind = "LogAppendTime" if record.timestamp_type == 1 else "CreateTime"
            fields.append(f"{kind}:{record.timestamp}".encode())
    if partition:
        fields.append(f"Partition:{record.partition}".encode())
    if offset:
        fields.append(f"Offset:{record.offset}".encode())
    if headers:
        hs = record.headers or []
        fields.append(b",".join(k.encode() + b":" + (v if v is not None else b"null") for k, v in hs)
                      if hs else b"NO_HEADERS")
    if key:
        fields.append(record.key if record.key is not None else b"null")
    fields.append(record.value if record.value is not None else b"null")
    return separator.join(fields)


def _start_position(consumer: Any, tps: list[Any], from_beginning: bool, offset: str | None,
                    at_ms: int | None) -> None:
    if at_ms is not None:
        found = consumer.offsets_for_times(dict.fromkeys(tps, at_ms))
        for tp in tps:
            hit = found.get(tp)
            if hit is None:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, hit.offset)
    elif offset == "earliest" or (offset is None and from_beginning):
        consumer.seek_to_beginning(*tps)
    elif offset == "latest" or offset is None:
        consumer.seek_to_end(*tps)
    else:
        for tp in tps:
            consumer.seek(tp, int(offset))


def _seek_on_assign(consumer: Any, at_ms: int | None) -> Any:
    """In a group, positions can only be set once partitions are assigned: seek then."""
    from kafka import ConsumerRebalanceListener

    class SeekOnAssign(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            return None

        def on_partitions_assigned(self, assigned: Any) -> None:
            if at_ms is not None and assigned:
                _start_position(consumer, list(assigned), False, None, at_ms)

    return SeekOnAssign()


def _offset_value(text: str | None) -> str | None:
    if text is None or text in ("earliest", "latest"):
        return text
    try:
        if int(text) >= 0:
            return text
    except ValueError:
        pass
    raise click.BadParameter("expected earliest, latest or an offset >= 0", param_hint="--offset")


@click.command()
@bootstrap_option
@click.argument("topic")
@click.option("--from-beginning", is_flag=True,
              help="Start at the log start when there is no committed offset.")
@click.option("--offset", help="Start at earliest, latest or this offset (without --group).")
@click.option("--from-timestamp", help="Start at the first record at or after this time "
              "(milliseconds since the epoch, or YYYY-MM-DDTHH:mm:SS[zone]).")
@click.option("--group", "-g", help="Consume as a member of this consumer group (commits offsets).")
@click.option("--partition", "-p", "partitions", type=click.IntRange(min=0), multiple=True,
              help="Only these partitions (repeatable; default all).")
@click.option("--max-messages", "-n", type=click.IntRange(min=1), help="Exit after this many records.")
@click.option("--idle-timeout-ms", type=click.IntRange(min=1),
              help="Exit when no record arrives for this long (default: wait forever).")
@click.option("--print-timestamp", is_flag=True)
@click.option("--print-partition", is_flag=True)
@click.option("--print-offset", is_flag=True)
@click.option("--print-headers", is_flag=True)
@click.option("--print-key", is_flag=True)
@click.option("--separator", default="\t", show_default="tab", help="Between printed fields.")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True)
def consume(bootstrap: str, timeout_s: float, client_config: ClientProperties, topic: str, from_beginning: bool, offset: str | None,
            from_timestamp: str | None, group: str | None, partitions: tuple[int, ...],
            max_messages: int | None, idle_timeout_ms: int | None, print_timestamp: bool,
            print_partition: bool, print_offset: bool, print_headers: bool, print_key: bool,
            separator: str, isolation_level: str) -> None:
    """Print records of TOPIC, one per line.

    \b
    Examples:
      odradek consume greetings --from-beginning --max-messages 10
      odradek consume clicks --group dashboards --print-key --print-offset
      odradek consume clicks -p 0 --offset 1000 --print-timestamp --print-headers
      odradek consume clicks --from-timestamp 2026-11-22T08:00:00 --idle-timeout-ms 5000
    """
    from kafka import KafkaConsumer, TopicPartition

    offset = _offset_value(offset)
    if group and (offset is not None or partitions):
        raise click.UsageError("--offset and --partition assign partitions: not with --group")
    at_ms = None
    if from_timestamp is not None:
        at_ms = int(from_timestamp) if from_timestamp.isdigit() else parse_datetime(from_timestamp)
    sep = separator.encode()
    out = sys.stdout.buffer
    count = 0
    with kafka_errors(bootstrap, client_config):
        # defaults < --command-config < this command's own options
        consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            **{"client_id": "odradek-cli-consumer", "bootstrap_timeout_ms": int(timeout_s * 1000),
               "request_timeout_ms": max(int(timeout_s * 1000), 1000) + 1000,
               **client_config.kafka_python("consumer"),
               "group_id": group, "enable_auto_commit": bool(group), "allow_auto_create_topics": False,
               "auto_offset_reset": "earliest" if from_beginning else "latest",
               "isolation_level": isolation_level},
        )
        try:
            avoid_unreachable(consumer._manager, bootstrap, timeout_s, client_config)
            known = consumer.partitions_for_topic(topic)
            if not known:
                raise click.ClickException(f"topic '{topic}' does not exist")
            missing = set(partitions) - known
            if missing:
                raise click.ClickException(f"topic '{topic}' has no partition {min(missing)}")
            if group:
                consumer.subscribe([topic], listener=_seek_on_assign(consumer, at_ms))
                # fresh metadata after subscribe(): with only the metadata fetched above,
                # kafka-python's leader rejoins once after its first assignment, and 3.0.12 can
                # lose that join's answer (the member then never turns stable)
                consumer.topics()
            else:
                tps = [TopicPartition(topic, p) for p in sorted(partitions or known)]
                consumer.assign(tps)
                _start_position(consumer, tps, from_beginning, offset, at_ms)
            last = time.monotonic()
            while max_messages is None or count < max_messages:
                batch = consumer.poll(timeout_ms=200, max_records=(max_messages - count)
                                      if max_messages else 500)
                if not batch:
                    if idle_timeout_ms and (time.monotonic() - last) * 1000 >= idle_timeout_ms:
                        break
                    continue
                last = time.monotonic()
                for records in batch.values():
                    for r in records:
                        out.write(format_record(
                            r, timestamp=print_timestamp, partition=print_partition,
                            offset=print_offset, headers=print_headers, key=print_key,
                            separator=sep) + b"\n")
                        count += 1
                out.flush()
        except KeyboardInterrupt:
            pass
        finally:
            consumer.close()
    click.echo(f"Processed a total of {count} messages", err=True)
