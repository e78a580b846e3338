"""Upper bounds on partition counts, and the file-descriptor limit they depend on.

Why: every partition keeps its segments' ``.log`` files open (one descriptor per segment, as
Kafka's ``FileRecords``) and maps two index files, so a single request asking for tens of
thousands of partitions could exhaust ``ulimit -n`` half way -- leaving a broker that could not
reopen its own logs at the next start. Three guards, all checked before anything is created:

* per request (CreateTopics, CreatePartitions): at most ``max.request.partitions`` new
  partitions, default 10,000 -- Kafka's controller has the same fixed bound
  (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH) and answers POLICY_VIOLATION
  "Excessively large number of partitions per request." for every topic of the request;
* per broker: at most ``max.broker.partitions`` hosted partitions (the name KIP-578 proposed;
  Kafka itself has no such bound), POLICY_VIOLATION beyond;
* file descriptors: the new partitions need FILES_PER_PARTITION descriptor each on top of those
  open now, and ``FD_RESERVE`` stay free for connections, rolls and checkpoint writes; otherwise
  POLICY_VIOLATION naming the limit, before a single file is created. One per partition: its
  active segment's ``.log`` (index maps keep none, see storage.mapped_file); older segments keep
  one each, and the check counts what is open now, so they are included.

At start, :func:`raise_open_files_limit` raises the soft ``RLIMIT_NOFILE`` to the hard limit (what
Kafka's documentation asks operators to do with ``ulimit -n``) and logs both, so the default soft
limit of a shell does not cap the partition count.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Iterable

from protocol.errors import ErrorCode, KafkaProtocolError

__all__ = [
    "FD_RESERVE",
    "FILES_PER_PARTITION",
    "check_broker_partitions",
    "check_request_partitions",
    "open_files",
    "raise_open_files_limit",
]

FD_RESERVE = 1024  # descriptors kept free for connections, segment rolls and checkpoint files
FILES_PER_PARTITION = 1  # a new partition: its active segment's .log


def check_request_partitions(counts: Iterable[int], limit: int) -> None:
    """POLICY_VIOLATION when the partitions a request would create exceed ``limit`` (Kafka's
    wording and error); negative or zero counts are left to the per-topic checks."""
    total = sum(c for c in counts if c > 0)
    if total > limit:
        raise KafkaProtocolError(
            ErrorCode.POLICY_VIOLATION,
            f"Excessively large number of partitions per request ({total} > max.request.partitions={limit}).",
        )


def open_files() -> int:
    """Descriptors this process has open now (Linux /proc; 0 where unknown)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def check_broker_partitions(hosted: int, adding: int, limit: int, files_open: int) -> None:
    """POLICY_VIOLATION when ``adding`` partitions to the ``hosted`` ones would pass
    max.broker.partitions, or, with ``files_open`` descriptors open now, would leave fewer than
    FD_RESERVE of the open-files limit free."""
    if adding <= 0:
        return
    if hosted + adding > limit:
        raise KafkaProtocolError(
            ErrorCode.POLICY_VIOLATION,
            f"Creating {adding} partitions would make this broker host {hosted + adding}, more than "
            f"max.broker.partitions={limit}.",
        )
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return
    needed = adding * FILES_PER_PARTITION
    if files_open + needed + FD_RESERVE > soft:
        raise KafkaProtocolError(
            ErrorCode.POLICY_VIOLATION,
            f"Creating {adding} partitions needs {needed} more open files; this broker has {files_open} "
            f"open of its limit of {soft} (ulimit -n) and keeps {FD_RESERVE} free. Raise the limit "
            "and restart the broker.",
        )


def raise_open_files_limit() -> tuple[int, int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit (to 2^20 when the hard one is unlimited);
    returns (old soft, new soft, hard). A refusal leaves the limit as it was."""
    inf = resource.RLIM_INFINITY
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = (1 << 20) if hard == inf else hard
    if soft == inf or soft >= target:
        return soft, soft, hard
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft, soft, hard
    return soft, target, hard
