"""`odradek perf`: producer, consumer and end-to-end latency tests through librdkafka.

The counterparts of kafka-producer-perf-test.sh, kafka-consumer-perf-test.sh and Kafka's
EndToEndLatency, printing the same final lines so that scripts written for those parse ours.
The measuring itself lives in clients/perf_run.py (reused by the benchmark harness) and the
arithmetic in clients/perf_stats.py; this module is options, progress and output.

Progress goes to standard error (clients/progress.py: a bar on a terminal, else a line every
--progress-interval seconds); standard output carries only the results. A failed run exits 1
with one `Error: ...` line (no traceback); a run that could not
complete its work (failed sends, records never consumed) prints its figures and then exits 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from clients.client_properties import ClientConfigError, ClientProperties
from clients.common import bootstrap_option, parse_pairs
from clients.perf_stats import CONSUME_HEADER, E2EResult, histogram, render_histogram
from clients.progress import progress, progress_interval_option

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@click.group()
def perf() -> None:
    """Measure throughput and latency against any Kafka-compatible broker.

    \b
    Examples:
      odradek perf produce bench --num-records 1000000 --record-size 100
      odradek perf consume bench --messages 1000000
      odradek perf e2e bench --rate 1000 --duration 10 --plot latency.png
    """


@contextmanager
def perf_errors() -> Iterator[None]:
    from confluent_kafka import KafkaException

    from clients.perf_run import PerfError

    try:
        yield
    except PerfError as e:
        raise click.ClickException(str(e)) from None
    except KafkaException as e:
        err = e.args[0] if e.args else e
        raise click.ClickException(err.str() if hasattr(err, "str") else str(err)) from None


def librdkafka_properties(client_config: ClientProperties) -> dict[str, str]:
    """--command-config as librdkafka properties (under the -X ones, which win)."""
    try:
        return client_config.librdkafka()
    except ClientConfigError as e:
        raise click.BadParameter(f"{client_config.origin}: {e}", param_hint="'--command-config'") from None


def props_option(name: str, short: str, what: str) -> Callable[[Any], Any]:
    return click.option(name, short, "props", multiple=True, metavar="KEY=VALUE",
                        help=f"Any librdkafka {what} property (repeatable).")


@perf.command("produce")
@bootstrap_option
@click.argument("topic")
@click.option("--num-records", "-n", type=click.IntRange(min=1), required=True,
              help="Records to send.")
@click.option("--record-size", "-s", type=click.IntRange(min=0), default=100, show_default=True,
              help="Value size in bytes.")
@click.option("--throughput", "-t", type=float, default=-1, show_default=True,
              help="Target records/s; -1 for as fast as possible.")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True)
@click.option("--compression", "-z", type=click.Choice(CODECS), default="none", show_default=True)
@props_option("--producer-prop", "-X", "producer")
@progress_interval_option
def produce_cmd(bootstrap: str, timeout_s: float, client_config: ClientProperties, topic: str,
                num_records: int, record_size: int, throughput: float, acks: str, compression: str,
                props: tuple[str, ...], progress_interval_s: float) -> None:
    """Send records to TOPIC as fast as possible (or at --throughput) and print
    kafka-producer-perf-test's summary line: records/s, MB/s, average and maximum latency and
    the 50th/95th/99th/99.9th percentiles (send to acknowledgement, ms).

    \b
    Examples:
      odradek perf produce bench -n 1000000 -s 100
      odradek perf produce bench -n 100000 -s 1024 --throughput 5000 --acks 1
      odradek perf produce bench -n 500000 -z lz4 -X linger.ms=20 -X batch.size=1048576
      ODRADEK_BOOTSTRAP=kafka:9092 odradek perf produce bench -n 10000

    \b
    Output (one line, Kafka's format):
      1000000 records sent, 612745.1 records/sec (58.44 MB/sec), 18.72 ms avg latency,
      61.00 ms max latency, 16 ms 50th, 41 ms 95th, 55 ms 99th, 60 ms 99.9th.
    """
    from clients.perf_run import run_produce

    extra = {**librdkafka_properties(client_config), **parse_pairs(props)}
    with perf_errors(), progress(num_records, f"producing to {topic}", progress_interval_s,
                                 "records") as update:
        result = run_produce(bootstrap, topic, num_records, record_size, throughput, acks,
                             compression, extra, timeout_s, update)
    click.echo(result.summary_line())
    if result.failed:
        raise click.ClickException(f"{result.failed} records were not acknowledged: "
                                   f"{result.first_error}")


@perf.command("consume")
@bootstrap_option
@click.argument("topic")
@click.option("--messages", "-n", type=click.IntRange(min=1), required=True,
              help="Records to consume.")
@click.option("--group", "-g", help="Consume as a member of this group (committing offsets); "
              "without it, every partition is assigned directly and nothing is committed.")
@click.option("--from-latest", is_flag=True,
              help="Start at the end of the log (new records only) instead of the beginning.")
@click.option("--hide-header", is_flag=True, help="Print the figures without the header line.")
@props_option("--consumer-prop", "-X", "consumer")
@progress_interval_option
def consume_cmd(bootstrap: str, timeout_s: float, client_config: ClientProperties, topic: str,
                messages: int, group: str | None, from_latest: bool, hide_header: bool,
                props: tuple[str, ...], progress_interval_s: float) -> None:
    """Consume records from TOPIC and print kafka-consumer-perf-test's figures: start and end
    time, MB consumed, MB/s, records, records/s, start-up time (rebalance.time.ms: group join,
    metadata, offsets) and the rates from the first record on (fetch.*). Stops with exit code 1
    if no record arrives for --timeout seconds before --messages are read.

    \b
    Examples:
      odradek perf consume bench --messages 1000000
      odradek perf consume bench -n 100000 --group perf-readers
      odradek perf consume bench -n 50000 -X fetch.max.bytes=1048576 --hide-header
    """
    from clients.perf_run import run_consume

    extra = {**librdkafka_properties(client_config), **parse_pairs(props)}
    with perf_errors(), progress(messages, f"consuming {topic}", progress_interval_s, "records") as update:
        result = run_consume(bootstrap, topic, messages, group, from_latest, extra, timeout_s,
                             update)
    if not hide_header:
        click.echo(CONSUME_HEADER)
    click.echo(result.summary_line())
    if result.records < messages:
        raise click.ClickException(
            f"consumed {result.records} of {messages} records: no record for {timeout_s:g}s")


@perf.command("e2e")
@bootstrap_option
@click.argument("topic")
@click.option("--rate", "-r", type=click.FloatRange(min=0, min_open=True), default=1000,
              show_default=True, help="Records sent per second.")
@click.option("--duration", "-d", type=click.FloatRange(min=0, min_open=True), default=10,
              show_default=True, help="Seconds to send for.")
@click.option("--record-size", "-s", type=click.IntRange(min=16), default=100, show_default=True,
              help="Value size in bytes (16 of them carry the send time).")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="1", show_default=True)
@click.option("--producer-prop", "producer_props", multiple=True, metavar="KEY=VALUE",
              help="Any librdkafka producer property (repeatable).")
@click.option("--consumer-prop", "consumer_props", multiple=True, metavar="KEY=VALUE",
              help="Any librdkafka consumer property (repeatable).")
@click.option("--plot", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a latency plot (PNG) to this file.")
@progress_interval_option
def e2e_cmd(bootstrap: str, timeout_s: float, client_config: ClientProperties, topic: str,
            rate: float, duration: float,
            record_size: int, acks: str, producer_props: tuple[str, ...],
            consumer_props: tuple[str, ...], plot: Path | None,
            progress_interval_s: float) -> None:
    """End-to-end latency: send records to TOPIC at a fixed --rate for --duration seconds while
    a consumer reads them back; print a latency histogram and a summary line (avg, max and
    percentiles of send-to-receive time in ms). Records not back within --timeout seconds of
    the last send count as lost and make the exit code 1.

    \b
    Examples:
      odradek perf e2e latency --rate 1000 --duration 10
      odradek perf e2e latency -r 10000 -d 30 --acks all --plot e2e.png
    """
    from clients.perf_run import run_e2e

    if plot is not None:
        require_matplotlib()
    num = max(1, round(rate * duration))
    common = librdkafka_properties(client_config)
    pprops, cprops = {**common, **parse_pairs(producer_props)}, {**common, **parse_pairs(consumer_props)}
    with perf_errors(), progress(num, f"round trips via {topic}", progress_interval_s, "records") as update:
        result = run_e2e(bootstrap, topic, rate, num, record_size, acks, pprops, cprops,
                         timeout_s, update, notice=lambda text: click.echo(text, err=True))
    click.echo(f"latency histogram (ms, {len(result.samples)} samples):")
    for row in render_histogram(histogram(v for _, v in result.samples)):
        click.echo("  " + row)
    click.echo(result.summary_line())
    if plot is not None:
        plot_e2e(result, plot, f"{topic}: {rate:g} records/s, {record_size} B, acks={acks}")
        click.echo(f"wrote {plot}")
    if result.lost:
        raise click.ClickException(
            f"{result.lost} of {result.sent} records did not come back within {timeout_s:g}s")


def require_matplotlib() -> None:
    """matplotlib is the optional `[plot]` extra: say so before measuring, not after."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise click.ClickException("--plot needs matplotlib: pip install 'odradek[plot]'") from None


def plot_e2e(result: E2EResult, path: Path, title: str) -> None:
    """Latency over the run (left) and the latency distribution as percentiles (right)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import ScalarFormatter

    fig = Figure(figsize=(10, 4), layout="constrained")
    over_time, dist = fig.subplots(1, 2)
    xs = [t for t, _ in result.samples]
    ys = [v for _, v in result.samples]
    over_time.scatter(xs, ys, s=2, alpha=0.5)
    over_time.set_xlabel("send time (s)")
    over_time.set_ylabel("end-to-end latency (ms)")
    over_time.set_yscale("log")
    over_time.yaxis.set_major_formatter(ScalarFormatter())
    over_time.grid(True, alpha=0.3)
    ordered = sorted(ys)
    n = len(ordered)
    if n:
        # x = 1/(1-p) on a log axis spreads the tail: 50th, 90th, 99th, 99.9th equally apart
        over = [1.0 / (1.0 - i / n) for i in range(n)]
        dist.plot(over, ordered, drawstyle="steps-post")
    dist.set_xscale("log")
    ticks = [p for p in (0.5, 0.9, 0.99, 0.999, 0.9999) if n and 1.0 / (1.0 - p) <= n]
    dist.set_xticks([1.0 / (1.0 - p) for p in ticks],
                    labels=[f"{p * 100:g}%" for p in ticks])
    dist.set_xlabel("percentile")
    dist.set_ylabel("end-to-end latency (ms)")
    dist.grid(True, alpha=0.3)
    lat = result.latency
    fig.suptitle(f"{title}\np50 {lat.p50:.2f} ms, p99 {lat.p99:.2f} ms, "
                 f"p99.9 {lat.p999:.2f} ms, max {lat.max_ms:.2f} ms")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
