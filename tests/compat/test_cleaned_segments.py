"""Segments rewritten by Odradek's log cleaner, read by Kafka 3.9's own `DumpLogSegments`.

Two compacted topics get keyed records, tombstones and headers from confluent-kafka producers,
one per codec (idempotent but for gzip's), keys shared across codecs so that the cleaner filters
most batches and rebuilds them with their codec:

* ``keep``: the default delete.retention.ms (a day): one cleaning leaves one record per key and
  gives every batch that keeps a tombstone a delete horizon (KIP-534);
* ``expire``: delete.retention.ms=0: a second round of records and a second cleaning remove the
  tombstones of the first (their horizon has passed), emptying batches -- the last batch of an
  idempotent producer stays as a header without records.

With the broker stopped, Kafka's `kafka.tools.DumpLogSegments --deep-iteration --print-data-log`
reads every `.log`, `.index`, `.timeindex` and `.snapshot` file, CRCs valid, no offset-index
entry off its batch, reports the records a consumer read from the broker (offsets, timestamps,
keys, values), and `odradek dump-log` prints the same lines, ``deleteHorizonMs:
OptionalLong[...]`` included. The tool's only complaints are the two it also makes on segments
cleaned by Kafka 3.9 itself, each checked against the files:

* "Non-consecutive offsets": the gaps compaction leaves (it reports every gap between records of
  a `.log`); they must be exactly the gaps between the records it printed;
* "Found timestamp mismatch ... log timestamp: -1": a time-index entry at an empty batch. Kafka's
  cleaner keeps such a header-only batch (the last batch of an active producer,
  ``BatchRetention.RETAIN_EMPTY`` in MemoryRecords.filterTo) with the original batch's max
  timestamp, and counts that timestamp (``updateRetainedBatchMetadata(batch, 0, true)``), so the
  segment's time index can point at it; the tool then takes the largest timestamp of the batch's
  records -- none, -1. Run on a Kafka 3.9 broker's own cleaned segment with the same producers,
  the tool prints the same complaint. It must name the max timestamp of an empty batch of that
  segment.
"""

from __future__ import annotations

import itertools
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Producer

from tests.broker_process import BrokerProcess
from tests.compat.jvm import run_tool
from tests.compat.test_on_disk_format import (
    CODECS,
    create_topics,
    odradek_dump,
    read_all,
    segment_files,
)

KEYS = 20
PER_CODEC = 50
CLEANED_CONFIGS = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.01",
    "segment.bytes": "2048",
    "index.interval.bytes": "128",
}
TOPICS = {
    "keep": {**CLEANED_CONFIGS},
    "expire": {**CLEANED_CONFIGS, "delete.retention.ms": "0"},
}
BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* deleteHorizonMs: (\S+) .* CreateTime: (-?\d+) ")
RECORD = re.compile(
    r"^\| offset: (\d+) CreateTime: (-?\d+) keySize: (-?\d+) valueSize: (-?\d+) .*?headerKeys: \[[^\]]*\]"
    r"(?: key: (\S*))?(?: payload: (.*))?$"
)


def produce_round(bootstrap: str, topic: str, round_: int, base_ts: int, keys: range) -> int:
    """PER_CODEC records per codec over ``keys`` (every 6th a tombstone); the tombstones
    produced."""
    tombstones = 0
    failed: list[object] = []
    for c, codec in enumerate(CODECS):
        p = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 20,
                      "batch.num.messages": 6, "enable.idempotence": codec != "gzip", "acks": "all"})
        for i in range(PER_CODEC):
            n = c * PER_CODEC + i
            key = b"k-%02d" % keys[(n * 7) % len(keys)]
            value = None if n % 6 == 5 else f"r{round_}-{codec}-{i}".encode()
            tombstones += value is None
            headers = [("n", str(n).encode())] if n % 4 == 0 else []
            p.produce(topic, key=key, value=value, headers=headers, timestamp=base_ts + n,
                      on_delivery=lambda err, _msg: err and failed.append(err))
        assert p.flush(60) == 0, f"{codec}: records still queued after 60 s"
    assert not failed, failed[:3]
    return tombstones


def active_base(partition_dir: Path) -> int:
    return max(int(f.name.split(".")[0]) for f in partition_dir.glob("*.log"))


def wait_cleaned_through(broker: BrokerProcess, topic: str, offset: int, after: int, timeout: float = 90.0) -> int:
    """Wait for a cleaning of ``topic``-0 whose dirty section ends at ``offset`` or later; the
    index of its log line."""
    pattern = re.compile(rf"cleaned log {re.escape(topic)}-0 \(dirty section = \[(\d+), (\d+)\]\)")
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        assert remaining > 0, f"{topic}-0 was not cleaned through {offset} within {timeout} s"
        line = broker.wait_for_line(f"cleaned log {topic}-0 ", timeout=remaining, after=after)
        after = broker.lines.index(line, after) + 1
        m = pattern.search(line)
        assert m, line
        if int(m.group(2)) >= offset:
            return after


@dataclass
class Batch:
    base: int
    last: int
    count: int
    horizon: str
    max_timestamp: int
    records: list[tuple[int, int, bytes | None, bytes | None]] = field(default_factory=list)  # offset, ts, key, value


def parse_dump(lines: list[str]) -> dict[str, list[Batch]]:
    """The batches of each dumped .log file, with their records."""
    out: dict[str, list[Batch]] = {}
    current: list[Batch] = []
    for line in lines:
        if line.startswith("Dumping "):
            current = out.setdefault(line.removeprefix("Dumping "), []) if line.endswith(".log") else []
        elif (b := BATCH.match(line)) is not None:
            current.append(Batch(int(b[1]), int(b[2]), int(b[3]), b[4], int(b[5])))
        elif (r := RECORD.match(line)) is not None:
            key = None if r[3] == "-1" else (r[5] or "").encode()
            value = None if r[4] == "-1" else (r[6] or "").encode()
            current[-1].records.append((int(r[1]), int(r[2]), key, value))
    return out


def complaints(stderr: str) -> dict[tuple[str, str], list[tuple[int, int]]]:
    """DumpLogSegments' stderr as {(kind, file): [(number, number)]}; fails on anything but
    the two kinds a cleaned segment makes it print (see the module docstring)."""
    out: dict[tuple[str, str], list[tuple[int, int]]] = {}
    entries: list[tuple[int, int]] = []
    for line in stderr.splitlines():
        if not line.strip() or line.startswith("["):
            continue
        if line.startswith("Found timestamp mismatch in :"):
            entries = out.setdefault(("timestamp", line.split(":", 1)[1]), [])
        elif line.startswith("Non-consecutive offsets in "):
            entries = out.setdefault(("gaps", line.removeprefix("Non-consecutive offsets in ")), [])
        elif (m := re.fullmatch(r"  Index timestamp: (-?\d+), log timestamp: (-?\d+)", line)) is not None:
            entries.append((int(m[1]), int(m[2])))
        elif (m := re.fullmatch(r"  (\d+) is followed by (\d+)", line)) is not None:
            entries.append((int(m[1]), int(m[2])))
        else:
            raise AssertionError(f"DumpLogSegments complained: {line}\n{stderr[-3000:]}")
    return out


def test_kafka_dump_log_reads_cleaned_segments(tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data", overrides=["log.cleaner.backoff.ms=100"]).start()
    dirs = {t: broker.log_dir / f"{t}-0" for t in TOPICS}
    base_ts = int(time.time() * 1000) - 60_000
    try:
        create_topics(broker.bootstrap, {t: (1, cfg) for t, cfg in TOPICS.items()})
        mark = len(broker.lines)
        tombstones = {t: produce_round(broker.bootstrap, t, 0, base_ts, range(KEYS)) for t in TOPICS}
        for t in TOPICS:
            wait_cleaned_through(broker, t, active_base(dirs[t]), mark)
        # "expire": a second round on half the keys, and a cleaning past the first round's
        # tombstone horizons (the other half's tombstones go only because of that)
        mark = len(broker.lines)
        tombstones["expire"] += produce_round(broker.bootstrap, "expire", 1, base_ts + 10_000, range(KEYS // 2, KEYS))
        cleaned_to = {"keep": active_base(dirs["keep"]), "expire": active_base(dirs["expire"])}
        wait_cleaned_through(broker, "expire", cleaned_to["expire"], mark)
        consumed = read_all(broker.bootstrap, [(t, 0) for t in TOPICS])
    finally:
        stopped = broker.stop()
    assert stopped == 0

    files = segment_files(dirs.values())
    proc = run_tool("kafka.tools.DumpLogSegments", "--files", ",".join(files), "--deep-iteration",
                    "--print-data-log", timeout=120)
    lines = proc.stdout.splitlines()
    assert odradek_dump(files) == lines, "odradek dump-log differs from Kafka's DumpLogSegments"
    assert all(line.endswith("isvalid: true") for line in lines if line.startswith("baseOffset:"))
    assert not [line for line in lines if line.startswith("Found ") and "invalid bytes" in line]
    dumped = parse_dump(lines)
    for (kind, file), entries in complaints(proc.stderr).items():
        log = file.rsplit(".", 1)[0] + ".log"
        assert log in dumped, (kind, file)
        if kind == "gaps":
            offsets = [r[0] for b in dumped[log] for r in b.records]
            gaps = {(a, b) for a, b in itertools.pairwise(offsets) if b != a + 1}
            assert set(entries) == gaps, (file, sorted(entries), sorted(gaps))
        else:
            empty = {b.max_timestamp for b in dumped[log] if b.count == 0}
            assert all(log_ts == -1 and index_ts in empty for index_ts, log_ts in entries), (file, entries, empty)
    for t, d in dirs.items():
        batches = [b for f in sorted(dumped) if f.startswith(str(d) + "/") for b in dumped[f]]
        records = [r for b in batches for r in b.records]
        served = [(r[2], r[6][1], r[3], r[4]) for r in consumed if r[0] == t]
        assert records == served, f"{t}: Kafka's tool and a consumer disagree"
        cleaned = [r for r in records if r[0] < cleaned_to[t]]
        keys = [r[2] for r in cleaned]
        assert len(keys) == len(set(keys)) <= KEYS, f"{t}: more than one record per key in the cleaned segments"
        for b in batches:
            if b.base < cleaned_to[t] and any(r[3] is None for r in b.records):
                assert b.horizon.startswith("OptionalLong["), f"{t}: batch {b.base} keeps a tombstone without a horizon"
        horizons = [b for b in batches if b.horizon.startswith("OptionalLong[")]
        assert horizons, f"{t}: no batch got a delete horizon"
        # the active segment is never cleaned: it keeps every offset from its base to the log
        # end. Where it begins depends on how the producers' batches fell into 2 KiB segments
        # (a quiet run rolls at 198 of 250, a loaded one at 180), so the compaction is judged
        # on the cleaned section alone: one record per key (above) of at least twice as many
        produced = PER_CODEC * len(CODECS) * (2 if t == "expire" else 1)
        assert [r[0] for r in records if r[0] >= cleaned_to[t]] == list(range(cleaned_to[t], produced))
        assert cleaned_to[t] >= 2 * KEYS, f"{t}: the cleaned section ends at {cleaned_to[t]} of {produced}"
    # "expire": the first round's tombstones are gone (their horizon passed), those of keys the
    # second round did not write too; "keep" still has its tombstones
    first_round = PER_CODEC * len(CODECS)
    expire = [r for f in dumped if f.startswith(str(dirs["expire"]) + "/") for b in dumped[f] for r in b.records]
    keep = [r for f in dumped if f.startswith(str(dirs["keep"]) + "/") for b in dumped[f] for r in b.records]
    assert not [r for r in expire if r[3] is None and r[0] < first_round], "round-0 tombstones kept"
    assert [r for r in keep if r[3] is None], "no tombstone kept in 'keep'"
    assert tombstones["expire"] > tombstones["keep"] > 0
