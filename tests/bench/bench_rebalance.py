"""Consumer group rebalance time: a new member joins a Stable group of N-1 members; timed from
the moment it sends its first JoinGroup until every one of the N members has completed SyncGroup
with the new generation. Median of 5 runs per group size.

Members are raw protocol clients (tests/raw_client.RawConnection), one thread each, so that what
is measured is the broker, not a client library: each existing member heartbeats every
`--heartbeat-ms` and, on REBALANCE_IN_PROGRESS, rejoins and syncs at once (the leader assigns
empty assignments). The time therefore includes up to one heartbeat interval for the existing
members to notice the rebalance; it is reported next to the numbers.

    python -m tests.bench.bench_rebalance [--sizes 3,30] [--runs 5] [--heartbeat-ms 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from protocol.errors import ErrorCode  # noqa: E402
from protocol.messages import (  # noqa: E402
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from protocol.messages import join_group_request as jgr  # noqa: E402
from protocol.messages import leave_group_request as lgr  # noqa: E402
from protocol.messages import sync_group_request as sgr  # noqa: E402
from tests.broker_process import BrokerProcess  # noqa: E402
from tests.raw_client import RawConnection  # noqa: E402

SESSION_MS = 30000
REBALANCE_MS = 30000


class Member(threading.Thread):
    """join -> sync -> heartbeat until told to stop; rejoins whenever the group rebalances.
    Every completed SyncGroup is recorded as (generation, perf_counter())."""

    def __init__(self, port: int, group: str, heartbeat_s: float, synced: threading.Condition,
                 log: list[tuple[int, float]]) -> None:
        super().__init__(daemon=True)
        self.conn = RawConnection(port, "bench-rebalance", timeout=60)
        self.group, self.heartbeat_s, self.synced, self.log = group, heartbeat_s, synced, log
        self.member_id = ""
        self.generation = -1
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.sent_join_at = 0.0
        self.noticed_at = 0.0  # when a heartbeat last answered REBALANCE_IN_PROGRESS

    def _rejoin(self) -> None:
        while True:
            resp = self.conn.call(11, 5, JoinGroupRequest(
                group_id=self.group, session_timeout_ms=SESSION_MS, rebalance_timeout_ms=REBALANCE_MS,
                member_id=self.member_id, protocol_type="consumer",
                protocols=[jgr.JoinGroupRequestProtocol(name="range", metadata=b"")],
            ))
            if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = resp.member_id
                continue
            if resp.error_code != 0:
                raise RuntimeError(f"JoinGroup failed: {resp.error_code}")
            self.member_id, self.generation = resp.member_id, resp.generation_id
            assignments = [sgr.SyncGroupRequestAssignment(member_id=m.member_id, assignment=b"")
                           for m in resp.members]  # only the leader gets the member list
            sync = self.conn.call(14, 3, SyncGroupRequest(
                group_id=self.group, generation_id=self.generation, member_id=self.member_id,
                assignments=assignments))
            if sync.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if sync.error_code != 0:
                raise RuntimeError(f"SyncGroup failed: {sync.error_code}")
            with self.synced:
                self.log.append((self.generation, time.perf_counter()))
                self.synced.notify_all()
            return

    def run(self) -> None:
        try:
            self.sent_join_at = time.perf_counter()
            self._rejoin()
            while not self.stop.wait(self.heartbeat_s):
                code = self.conn.call(12, 4, HeartbeatRequest(
                    group_id=self.group, generation_id=self.generation, member_id=self.member_id)).error_code
                if code == ErrorCode.REBALANCE_IN_PROGRESS:
                    self.noticed_at = time.perf_counter()
                    self._rejoin()
                elif code != 0:
                    raise RuntimeError(f"Heartbeat failed: {code}")
        except BaseException as e:
            self.error = e
            with self.synced:
                self.synced.notify_all()

    def wait_done(self, timeout: float) -> None:
        self.join(timeout)
        self.conn.close()


def one_run(port: int, group: str, size: int, heartbeat_s: float) -> tuple[float, float]:
    """Seconds from the newcomer's first JoinGroup to the last SyncGroup of its generation, and
    seconds from the last existing member noticing the rebalance (heartbeat) to that SyncGroup."""
    synced = threading.Condition()
    logs: list[list[tuple[int, float]]] = []
    members: list[Member] = []

    def add() -> Member:
        log: list[tuple[int, float]] = []
        logs.append(log)
        m = Member(port, group, heartbeat_s, synced, log)
        members.append(m)
        return m

    def failed() -> BaseException | None:
        return next((m.error for m in members if m.error is not None), None)

    try:
        for _ in range(size - 1):
            add().start()
        # Stable: every existing member synced in one common, latest generation.
        def stable() -> bool:
            if failed():
                return True
            last = [log[-1][0] if log else None for log in logs]
            return None not in last and len(set(last)) == 1

        with synced:
            if not synced.wait_for(stable, 120):
                raise RuntimeError("the existing members never stabilized")
        if err := failed():
            raise err
        old_generation = logs[0][-1][0]
        newcomer = add()
        newcomer.start()  # records sent_join_at just before its first JoinGroup

        def done() -> bool:
            return bool(failed()) or all(any(g > old_generation for g, _ in log) for log in logs)

        with synced:
            if not synced.wait_for(done, 120):
                raise RuntimeError("the rebalance did not complete")
        if err := failed():
            raise err
        generations = {next(g for g, _ in log if g > old_generation) for log in logs}
        assert len(generations) == 1, generations
        end = max(next(t for g, t in log if g > old_generation) for log in logs)
        noticed = max(m.noticed_at for m in members[:-1])
        return end - newcomer.sent_join_at, end - noticed
    finally:
        for m in members:
            m.stop.set()
        for m in members:
            m.wait_done(10)
        ids = [m.member_id for m in members if m.member_id]
        if ids:  # tidy: the group's sessions would otherwise expire later, during other runs
            with RawConnection(port, "bench-rebalance") as c:
                c.call(13, 4, LeaveGroupRequest(group_id=group, members=[lgr.MemberIdentity(member_id=i) for i in ids]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="3,30")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--heartbeat-ms", type=int, default=50)
    args = ap.parse_args(argv)
    heartbeat_s = args.heartbeat_ms / 1000
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "data", overrides=["group.initial.rebalance.delay.ms=0"]).start()
        try:
            with RawConnection(broker.port, "bench-rebalance") as c:  # creates __consumer_offsets
                c.call(10, 3, FindCoordinatorRequest(key="warm-up", key_type=0))
            for size in (int(s) for s in args.sizes.split(",")):
                runs = [one_run(broker.port, f"bench-{size}-{run}", size, heartbeat_s) for run in range(args.runs)]
                rows.append((size, [t for t, _ in runs], [b for _, b in runs]))
        finally:
            broker.stop()
    print(f"A member joins a Stable group; time until all members completed SyncGroup of the new generation "
          f"(raw protocol clients, heartbeat every {args.heartbeat_ms} ms, group.initial.rebalance.delay.ms=0, "
          f"median of {args.runs}).")
    print()
    print("The last column leaves out the heartbeat wait: from the moment the last existing member's "
          "heartbeat answered REBALANCE_IN_PROGRESS until every member had synced (join + sync round trips).")
    print()
    print("| members after join | median ms | min ms | max ms | median ms after the last member noticed |")
    print("|---:|---:|---:|---:|---:|")
    for size, times, after in rows:
        ms = [t * 1000 for t in times]
        print(f"| {size} | {statistics.median(ms):.1f} | {min(ms):.1f} | {max(ms):.1f} | "
              f"{statistics.median(after) * 1000:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
