"""`odradek perf`'s arithmetic: percentiles by Kafka's rule, sampled recorders, histograms and the
summary lines that scripts parse."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from clients.perf_stats import (
    CONSUME_HEADER,
    MB,
    ConsumeResult,
    E2EResult,
    LatencyRecorder,
    LatencyStats,
    ProduceResult,
    histogram,
    kafka_time,
    parse_consume_line,
    parse_e2e_line,
    parse_produce_line,
    percentile,
    render_histogram,
    sampling_for,
)


def test_percentile_takes_the_sample_at_int_p_times_n() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 0.5) == 51.0      # index 50
    assert percentile(values, 0.95) == 96.0
    assert percentile(values, 0.99) == 100.0
    assert percentile(values, 0.999) == 100.0
    assert percentile(values, 1.0) == 100.0     # clamped to the last sample
    assert percentile(values, 0.0) == 1.0
    assert percentile([], 0.5) == 0.0
    assert percentile([7.0], 0.999) == 7.0


@pytest.mark.parametrize("p", [-0.1, 1.5])
def test_percentile_outside_0_1_is_an_error(p: float) -> None:
    with pytest.raises(ValueError, match="within"):
        percentile([1.0], p)


def test_recorder_exact_count_mean_max_and_sorted_percentiles() -> None:
    rec = LatencyRecorder()
    rec.extend([5.0, 1.0, 3.0, 2.0, 4.0])  # arrival order is not sorted
    s = rec.stats()
    assert (s.count, s.avg_ms, s.max_ms) == (5, 3.0, 5.0)
    assert (s.p50, s.p95, s.p99, s.p999) == (3.0, 5.0, 5.0, 5.0)


def test_recorder_sampling_keeps_every_nth_but_counts_all() -> None:
    rec = LatencyRecorder(sampling=10)
    rec.extend(float(i) for i in range(1000))
    assert len(rec.samples) == 100
    assert list(rec.samples[:3]) == [0.0, 10.0, 20.0]
    s = rec.stats()
    assert s.count == 1000
    assert s.max_ms == 999.0            # exact even though 999 was not sampled
    assert s.avg_ms == pytest.approx(499.5)
    assert s.p50 == 500.0               # 50th of the samples 0, 10, ..., 990


def test_sampling_bounds_the_sample_count() -> None:
    assert sampling_for(0) == 1
    assert sampling_for(500_000) == 1
    assert sampling_for(500_001) == 2
    assert sampling_for(10_000_000) == 20
    with pytest.raises(ValueError):
        LatencyRecorder(sampling=0)


def test_empty_recorder_reports_zeros() -> None:
    s = LatencyRecorder().stats()
    assert (s.count, s.avg_ms, s.max_ms, s.p50, s.p999) == (0, 0.0, 0.0, 0.0, 0.0)


def lat(avg: float = 12.3, mx: float = 45.0, p50: float = 10.7, p95: float = 30.2,
        p99: float = 40.9, p999: float = 44.0) -> LatencyStats:
    return LatencyStats(count=1, avg_ms=avg, max_ms=mx,
                        percentiles={0.5: p50, 0.95: p95, 0.99: p99, 0.999: p999})


def test_produce_line_is_kafkas_and_parses_back() -> None:
    r = ProduceResult(records=100_000, bytes=100_000 * 100, elapsed_s=1.9, latency=lat())
    line = r.summary_line()
    # kafka-producer-perf-test: percentiles as whole milliseconds (truncated), MB = 2^20 bytes
    assert line == ("100000 records sent, 52631.6 records/sec (5.02 MB/sec), 12.30 ms avg latency, "
                    "45.00 ms max latency, 10 ms 50th, 30 ms 95th, 40 ms 99th, 44 ms 99.9th.")
    fields = parse_produce_line(line)
    assert fields["records"] == 100_000
    assert fields["rps"] == pytest.approx(52631.6)
    assert fields["mbps"] == pytest.approx(5.02)
    assert (fields["p50"], fields["p99"], fields["p999"]) == (10, 40, 44)


def test_produce_line_parser_accepts_kafkas_own_output() -> None:
    kafka = ("50000 records sent, 24987.506247 records/sec (2.38 MB/sec), 3.84 ms avg latency, "
             "228.00 ms max latency, 2 ms 50th, 7 ms 95th, 20 ms 99th, 220 ms 99.9th.")
    assert parse_produce_line(kafka)["max"] == 228.0
    with pytest.raises(ValueError, match="not a producer summary"):
        parse_produce_line("100 records sent")


def test_rates_of_a_zero_length_run_are_zero_not_a_crash() -> None:
    assert ProduceResult(0, 0, 0.0, lat()).records_per_sec == 0.0
    c = ConsumeResult(records=0, bytes=0, start=10.0, first=10.0, end=10.0)
    assert (c.mb_per_sec, c.records_per_sec, c.fetch_mb_per_sec) == (0.0, 0.0, 0.0)


def test_consume_line_matches_kafkas_header_and_splits_startup_from_fetching() -> None:
    start = dt.datetime(2024, 5, 17, 9, 30, 0, 250_000).timestamp()
    r = ConsumeResult(records=1_000_000, bytes=100 * MB, start=start, first=start + 0.5,
                      end=start + 2.5)
    assert r.rebalance_s == pytest.approx(0.5)
    assert r.fetch_s == pytest.approx(2.0)
    line = r.summary_line()
    assert line.startswith("2024-05-17 09:30:00:250, 2024-05-17 09:30:02:750, 100.0000, 40.0000, "
                           "1000000, 400000.0000, 500, 2000, 50.0000, 500000.0000")
    fields = parse_consume_line(line)
    assert list(fields) == CONSUME_HEADER.split(", ")
    assert fields["data.consumed.in.nMsg"] == 1_000_000
    assert fields["fetch.nMsg.sec"] == 500_000.0
    assert fields["start.time"] == "2024-05-17 09:30:00:250"
    with pytest.raises(ValueError):
        parse_consume_line("1, 2, 3")


def test_kafka_time_has_milliseconds_after_a_colon() -> None:
    t = dt.datetime(2023, 1, 2, 3, 4, 5, 6_000).timestamp()
    assert kafka_time(t) == "2023-01-02 03:04:05:006"


def test_e2e_line_round_trips_and_counts_lost_records() -> None:
    r = E2EResult(rate=1000, sent=10_000, received=9_990, elapsed_s=10.0,
                  latency=lat(avg=0.41, mx=6.2, p50=0.33, p95=0.49, p99=2.51, p999=4.96))
    assert r.lost == 10
    line = r.summary_line()
    assert line == ("9990 of 10000 records received at 1000 records/sec, end-to-end latency "
                    "0.41 ms avg, 6.20 ms max, 0.33 ms 50th, 0.49 ms 95th, 2.51 ms 99th, "
                    "4.96 ms 99.9th.")
    f = parse_e2e_line(line)
    assert (f["received"], f["sent"], f["rate"], f["p999"]) == (9990, 10000, 1000, 4.96)


def test_histogram_buckets_are_half_open_and_trimmed() -> None:
    buckets = histogram([0.3, 0.5, 0.9, 1.0, 1.5, 7.0])
    assert buckets == [(0.2, 0.5, 1), (0.5, 1.0, 2), (1.0, 2.0, 2), (2.0, 5.0, 0), (5.0, 10.0, 1)]
    assert histogram([]) == []
    # below the first bound and above the last
    tail = histogram([0.001, 1e9])
    assert tail[0] == (0.0, 0.01, 1)
    assert tail[-1][1] == math.inf and tail[-1][2] == 1
    assert sum(c for *_, c in tail) == 2


def test_render_histogram_scales_bars_to_the_largest_bucket() -> None:
    rows = render_histogram([(0.5, 1.0, 30), (1.0, 2.0, 10), (2.0, 5.0, 0)], width=30)
    assert len(rows) == 3
    assert rows[0].endswith("#" * 30) and "75.0%" in rows[0]
    assert rows[1].endswith(" " + "#" * 10) and "25.0%" in rows[1]
    assert not rows[2].endswith("#")
    assert render_histogram([]) == ["(no samples)"]
    assert render_histogram([(0, 1, 1000), (1, 2, 1)], width=10)[1].endswith(".")  # tiny but seen
