"""A ZooKeeper-mode broker's SIGTERM ends in bounded time whatever ZooKeeper does (issue #21 §2):
controlled shutdown gives up after `controlled.shutdown.max.retries` x (`request.timeout.ms` +
`controlled.shutdown.retry.backoff.ms`), and deregistration and the session close are bounded
too, so the broker still shuts down cleanly (segments closed, clean-shutdown marker written)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from controller.zk.client import CLOSE_TIMEOUT_S
from storage.checkpoints import CLEAN_SHUTDOWN_FILE
from tests.broker_process import REPO

RETRIES, REQUEST_TIMEOUT_MS, BACKOFF_MS = 2, 2000, 500


@pytest.mark.parametrize("zookeeper_fate", ["stopped", "paused"])
def test_sigterm_with_zookeeper_gone_gives_up_controlled_shutdown_and_stops_cleanly(
        zookeeper_fate, zookeeper, start_broker):
    """Stopped: connections refused, kazoo reconnects forever. Paused (SIGSTOP): connections
    accepted by the kernel, nothing answered. Either way the broker is out within the bound."""
    b = start_broker(1, zookeeper.connect_string(), f"controlled.shutdown.max.retries={RETRIES}",
                     f"request.timeout.ms={REQUEST_TIMEOUT_MS}", f"controlled.shutdown.retry.backoff.ms={BACKOFF_MS}",
                     "zookeeper.session.timeout.ms=30000")
    created = subprocess.run([sys.executable, "-m", "clients.cli", "topics", "create", "t", "--partitions", "2",
                              "--replication-factor", "1", "-b", b.bootstrap], capture_output=True, text=True,
                             timeout=60, cwd=REPO)
    assert created.returncode == 0, created.stderr
    assert b.wait_until(lambda: (b.log_dir / "t-1").is_dir(), 30)
    if zookeeper_fate == "stopped":
        zookeeper.stop()
    else:
        zookeeper.pause()  # the fixture resumes it to stop it
    started = time.monotonic()
    bound = RETRIES * (REQUEST_TIMEOUT_MS + BACKOFF_MS) / 1000
    b.proc.send_signal(signal.SIGTERM)
    try:
        code = b.proc.wait(bound + CLOSE_TIMEOUT_S + 20)
    except subprocess.TimeoutExpired:
        code = None
    took = time.monotonic() - started
    text = b.log_text()
    ours = "\n".join(line for line in b.lines if "kazoo" not in line)  # not its reconnect lines
    assert code == 0, f"exit {code} after {took:.1f} s:\n{ours[-4000:]}"
    assert "Starting controlled shutdown" in text
    assert "Proceeding to do an unclean shutdown as all the controlled shutdown attempts failed" in text, text[-3000:]
    assert "shut down cleanly" in text, text[-3000:]
    assert (b.log_dir / CLEAN_SHUTDOWN_FILE).exists()
    # then the session's close, bounded too; 5 s for the rest (draining, closing the logs)
    assert took < bound + CLOSE_TIMEOUT_S + 5, f"SIGTERM took {took:.1f} s, controlled shutdown's bound is {bound} s:\n{ours[-5000:]}"
