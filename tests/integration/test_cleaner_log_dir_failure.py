"""The log cleaner runs out of disk (Kafka's CleanerThread.cleanLog: an IOException takes the
log dir offline): a single node with two log dirs, `good` (the metadata dir) and `small` (a
4 MiB tmpfs the test fills), and a compacted topic with one partition in each. The disk is full
but for a few pages -- room for the checkpoints the broker rewrites, not for a cleaned segment
-- when the topic's min.compaction.lag.ms drops to 0; the cleaner's worker then fails writing
the `.cleaned` segment with ENOSPC and the broker takes `small` offline: one error line naming
the dir and the file, no traceback, the partition answers KAFKA_STORAGE_ERROR and DescribeLogDirs
shows the dir offline, while `good`'s partition is cleaned. A restart with room again finds every
acknowledged record of the failed partition at its offset with its key and value, and the
`.cleaned` file the failure left removed.

Waits are the broker's own log lines, bounded."""

from __future__ import annotations

import os
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.messages import FetchRequest, ProduceRequest
from protocol.messages import fetch_request as fr
from protocol.messages import produce_request as pr
from protocol.records import Record, build_batch, decode_records, iter_batches
from storage.segment import CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX
from tests.broker_process import BrokerProcess
from tests.full_disk import fill, mounted_tmpfs
from tests.integration.test_lifecycle import produce as produce_one
from tests.integration.test_log_dir_failure import log_dirs
from tests.integration.test_storage_integrity import alter_topic_config, create_topic
from tests.raw_client import RawConnection

TOPIC = "table"
OVERRIDES = ["log.cleaner.backoff.ms=100", "auto.create.topics.enable=false", "num.partitions=1"]
HOUR_MS = "3600000"
Rec = tuple[int, bytes | None, bytes | None]


def produce(c: RawConnection, partition: int, items: list[tuple[bytes, bytes]]) -> list[Rec]:
    """One keyed batch, acks=1: the (offset, key, value) of each record, acknowledged."""
    batch = build_batch([Record(0, i, i, k, v, []) for i, (k, v) in enumerate(items)], base_timestamp=1)
    r = c.call(0, 9, ProduceRequest(acks=1, timeout_ms=10000, topic_data=[pr.TopicProduceData(
        name=TOPIC, partition_data=[pr.PartitionProduceData(index=partition, records=batch)])]))
    p = r.responses[0].partition_responses[0]
    assert p.error_code == 0, p
    return [(p.base_offset + i, k, v) for i, (k, v) in enumerate(items)]


def read_partition(c: RawConnection, partition: int) -> list[Rec]:
    """Every record from offset 0 to the high watermark (bounded: each fetch brings some)."""
    out: list[Rec] = []
    for _ in range(1000):
        r = c.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
            session_epoch=-1, topics=[fr.FetchTopic(topic=TOPIC, partitions=[fr.FetchPartition(
                partition=partition, fetch_offset=out[-1][0] + 1 if out else 0, partition_max_bytes=1 << 20)])]))
        p = r.responses[0].partitions[0]
        assert p.error_code == 0, p
        data = bytes(p.records or b"")
        out += [(rec.offset, rec.key, rec.value) for pos, size in iter_batches(data)
                for rec in decode_records(data[pos:pos + size])[1]]
        if not out or out[-1][0] >= p.high_watermark - 1:
            return out
    raise AssertionError("the partition did not read to its end")


def temp_files(part: Path) -> list[str]:
    return sorted(p.name for p in part.iterdir() if p.name.endswith((CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)))


def test_a_full_disk_while_cleaning_takes_the_dir_offline_and_a_restart_keeps_every_record(tmp_path: Path) -> None:
    good = tmp_path / "good"
    with mounted_tmpfs(tmp_path / "small", "4m") as small:
        dirs = Path(f"{good},{small}")
        b = BrokerProcess(dirs, overrides=OVERRIDES).start()
        try:
            with RawConnection(b.port) as c:
                assert create_topic(c, TOPIC, 2, cleanup_policy="compact", segment_bytes="65536",
                                    min_cleanable_dirty_ratio="0.01", min_compaction_lag_ms=HOUR_MS) == 0
                placed = log_dirs(c)
                ((_, p_small),) = placed[str(small)][1]
                ((_, p_good),) = placed[str(good)][1]
                acked: dict[int, list[Rec]] = {p_small: [], p_good: []}
                for p in (p_small, p_good):
                    # keys of their own first (a cleaned first segment keeps ~100 KB), then
                    # versions of a few keys: several segments below the active one
                    for n in range(15):
                        acked[p] += produce(c, p, [(b"once-%04d" % (n * 100 + i), b"v" * 100) for i in range(100)])
                    for v in range(40):
                        acked[p] += produce(c, p, [(b"key-%02d" % i, b"%03d-%s" % (v, b"w" * 90)) for i in range(50)])
                fill(small / "filler")
                # room for the checkpoints the broker rewrites meanwhile, not for a cleaned segment
                filler = small / "filler"
                os.truncate(filler, filler.stat().st_size - 32768)
                mark = len(b.lines)
                assert alter_topic_config(c, TOPIC, "min.compaction.lag.ms", "0") == 0
                line = b.wait_for_line(f"Log directory {small} is offline", timeout=60, after=mark)
                part = small / f"{TOPIC}-{p_small}"
                assert (f"Failed to clean up log for {TOPIC}-{p_small} in dir {small} due to IOException: No space "
                        f"left on device (ENOSPC) on {part.resolve() / '00000000000000000000.log'}"
                        f"{CLEANED_FILE_SUFFIX}") in line, line
                b.wait_for_line(f"cleaned log {TOPIC}-{p_good} ", timeout=60, after=mark)  # the other dir's
                assert produce_one(c, TOPIC, [p_small], b"after") == {p_small: ErrorCode.KAFKA_STORAGE_ERROR}
                after = log_dirs(c)
                assert after[str(small)] == (ErrorCode.KAFKA_STORAGE_ERROR, set())
                assert after[str(good)] == (0, {(TOPIC, p_good)})
                # what the worker was writing is left for the next load: the dir is not touched
                assert temp_files(part) != []
                # the restarted broker must not compact before the test reads what it acknowledged
                assert alter_topic_config(c, TOPIC, "min.compaction.lag.ms", HOUR_MS) == 0
            loud = [x for x in b.lines if "level='error'" in x or "level='critical'" in x or " ERROR " in x]
            assert len(loud) == 1 and f"Log directory {small} is offline" in loud[0], "\n".join(loud)
            assert "Traceback" not in b.log_text() and "will not be cleaned again" not in b.log_text()
            assert b.stop() == 0
            filler.unlink()  # room again
            b = BrokerProcess(dirs, overrides=OVERRIDES).start()
            with RawConnection(b.port) as c:
                assert log_dirs(c)[str(small)] == (0, {(TOPIC, p_small)})
                assert read_partition(c, p_small) == acked[p_small]  # every acknowledged record, once
            assert temp_files(part) == []
            assert b.stop() == 0
        finally:
            b.kill()
