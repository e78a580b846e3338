"""Long CLI operations against a real 3-broker ZooKeeper-mode cluster show their progress on
standard error when it is not a terminal (issue #24 §3): `odradek topics reassign` of a partition
whose new replica is throttled (KIP-73, so the move lasts seconds whatever the machine) and
`odradek topics create` of many partitions, whose request and wait for the leaders take long
enough to show lines at a short interval (CreateTopics itself waits for the leaders up to its
timeout, as Kafka's does, so the command's own wait is the safety net past that)."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.broker_process import REPO
from tests.cluster.processes import IDS, cluster_fixture, partitions
from tests.cluster.test_reassignment import LAG_MS, broker_configs, create_topic, plan, produce

# followers fetch at most 32 KiB per partition: a throttle can only act between fetches
cluster = cluster_fixture(f"replica.lag.time.max.ms={LAG_MS}", "replica.fetch.max.bytes=32768")

THROTTLE = 60_000  # B/s: after Kafka's burst of ~10 windows, 1.2 MB needs well over 8 s
REASSIGN_LINE = re.compile(r"^reassignment: (\d)/1 partitions \(\d+%\), (\d+\.\d) s elapsed$")
LEADERS_LINE = re.compile(r"^leaders of many: (\d+)/(\d+|\?) partitions(?: \(\d+%\))?, (\d+\.\d) s elapsed$")


def odradek(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """The CLI as a script runs it: stdout and stderr are pipes, not terminals."""
    return subprocess.run([sys.executable, "-m", "clients.cli", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, check=False)


async def test_throttled_reassignment_prints_progress_lines_then_clears_the_throttle(cluster, tmp_path: Path) -> None:
    await cluster.open()
    bootstrap = cluster.brokers[1].bootstrap
    await asyncio.to_thread(create_topic, bootstrap, "slow", [1, 2])
    await cluster.until_all_agree(lambda m: "slow" in m["topics"] and sorted(partitions(m, "slow")[0][4]) == [1, 2],
                                  "slow in sync on 1,2")
    await asyncio.to_thread(produce, bootstrap, "slow", [b"%04d" % i + bytes(6000) for i in range(200)])
    json_file = plan(tmp_path, "slow", [1, 2, 3])

    started = time.monotonic()
    r = await asyncio.to_thread(odradek, "topics", "reassign", "--reassignment-json-file", json_file,
                                "--throttle", str(THROTTLE), "--progress-interval", "1", "-b", bootstrap)
    took = time.monotonic() - started
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "Started the reassignment of 1 partition(s)." in r.stdout
    assert "Reassignment of 1 partition(s) completed in" in r.stdout, r.stdout
    assert "Cleared the replication throttles." in r.stdout
    assert took >= 8, f"the move took {took:.1f} s: not throttled, so this test shows nothing"
    lines = [REASSIGN_LINE.match(line) for line in r.stderr.splitlines()]
    assert all(lines), r.stderr
    # one line a second while broker 3 copies: the seconds before the last count, and they grow
    assert len(lines) >= int(took) - 3, (took, r.stderr)
    elapsed = [float(m.group(2)) for m in lines if m]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0.9, elapsed
    assert lines[0] is not None and lines[0].group(1) == "0"
    await cluster.until_all_agree(lambda m: sorted(partitions(m, "slow")[0][3]) == [1, 2, 3], "slow on 1,2,3")
    for b in IDS:  # the throttles the command set are gone
        configs = await asyncio.to_thread(broker_configs, cluster.brokers[b], b)
        assert "leader.replication.throttled.rate" not in configs, configs


async def test_create_of_many_partitions_returns_with_every_leader_elected(cluster) -> None:
    await cluster.open()
    bootstrap = cluster.brokers[2].bootstrap
    r = await asyncio.to_thread(odradek, "topics", "create", "many", "-p", "600", "-r", "3",
                                "--progress-interval", "0.1", "--timeout", "60", "-b", bootstrap)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.strip() == "Created topic many."
    lines = [LEADERS_LINE.match(line) for line in r.stderr.splitlines()]
    assert lines and all(lines), r.stderr
    # at once, as a producer would look, whichever broker it asks: every broker lists every
    # partition of the topic with a leader (the controller's UpdateMetadata reaches the brokers one
    # after the other; the command waits for all of them, not only for the one it asked)
    for b in IDS:
        view = await asyncio.to_thread(cluster.metadata, b)
        assert "many" in view["topics"], (b, sorted(view["topics"]))
        parts = partitions(view, "many")
        assert len(parts) == 600, (b, len(parts))
        assert all(p[1] >= 0 for p in parts.values()), (b, [k for k, p in parts.items() if p[1] < 0])
