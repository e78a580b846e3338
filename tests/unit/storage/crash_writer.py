"""Child process for test_crash.py: opens a log (recovering it), then appends batches forever,
reporting each on stdout, until the test SIGKILLs it.

    python -m tests.unit.storage.crash_writer <partition dir> <seed>

Output lines: ``open <log end offset> <recovery point>`` once, then ``a <log end offset> <bytes
of the next batch> <active segment file> <its size>`` after each append returned (what the next
append will write, and where the write starts unless it rolls to ``<log end offset>.log``), and
``f <recovery point>`` after each flush. Record values and timestamps
follow from the offsets (see helpers.offset_record_value), so the test can check any prefix.
Batches are small or ~2 MB, so kills land inside writes too.
"""

from __future__ import annotations

import random
import sys

from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log import Log
from tests.unit.storage.helpers import T0

CONFIG = LogConfig(
    segment_bytes=16 << 20,
    segment_index_bytes=64 * 1024,
    index_interval_bytes=4096,
    max_message_bytes=8 << 20,
)


def value_for(offset: int, size: int) -> bytes:
    return (b"%d|" % offset).ljust(size, b"%d" % (offset % 10))


def main() -> None:
    directory, seed = sys.argv[1], int(sys.argv[2])
    recovery_point = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    rng = random.Random(seed)
    log = Log.open(directory, CONFIG, recovery_point=recovery_point, clean_shutdown=False, now=lambda: T0)
    out = sys.stdout
    out.write(f"open {log.log_end_offset} {log.recovery_point}\n")
    out.flush()
    batch = next_batch(rng, log.log_end_offset)
    while True:
        # the batch is built before the previous append is reported, so what follows the
        # report is the append itself: a kill soon after it lands in the write
        log.append_as_leader(batch, 1, T0)
        batch = next_batch(rng, log.log_end_offset)
        active = log.active_segment
        out.write(f"a {log.log_end_offset} {len(batch)} {active.log_path.name} {active.size}\n")
        out.flush()
        if rng.random() < 0.05:
            log.flush()
            out.write(f"f {log.recovery_point}\n")
            out.flush()


def next_batch(rng: random.Random, leo: int) -> bytearray:
    """A client batch whose record at offset o (once appended at ``leo``) has timestamp
    T0 + o and value value_for(o, size)."""
    if rng.random() < 0.4:
        n, size = 2, 1 << 20  # ~2 MB: a write that takes a while, so kills can tear it
    else:
        n, size = rng.randint(1, 20), rng.randint(10, 300)
    recs = [Record(0, i, i, None, value_for(leo + i, size)) for i in range(n)]
    return bytearray(build_batch(recs, base_timestamp=T0 + leo))

if __name__ == "__main__":
    main()
