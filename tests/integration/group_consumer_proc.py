"""A kafka-python group consumer run as its own process by test_groups_scenarios.py, so that a
test can SIGKILL it. It commits synchronously after every poll and reports on stdout, one line
each, flushed:

    ASSIGN 0,3          its assignment changed (after a poll)
    R <p> <offset>      a record it received
    C <p>:<offset> ...  positions it has committed (printed only once the commit succeeded)
    F <error>           the commit failed (the batch stays uncommitted work)
    HOLD                it has received HOLD_AFTER records and stops before committing them:
                        it keeps heartbeating (kafka-python's heartbeat thread) until killed,
                        with the batch it printed last as uncommitted work

    python tests/integration/group_consumer_proc.py BOOTSTRAP TOPIC GROUP CLIENT_ID [HOLD_AFTER]
"""

from __future__ import annotations

import sys
import threading
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError


def main(bootstrap: str, topic: str, group: str, client_id: str, hold_after: int = 0) -> None:
    c = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, client_id=client_id, auto_offset_reset="earliest",
        enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=200, max_poll_records=20,
    )
    # Subscribe first, then fetch metadata (topics() always asks the broker), before the first
    # poll joins: the leader then assigns every partition, and kafka-python's snapshot of the
    # subscribed partitions comes from this metadata. Metadata fetched before subscribe() leaves
    # that snapshot empty, so the leader's next refresh makes it rejoin once; kafka-python 3.0.12
    # loses a rejoin asked for that way when the SyncGroup answer arrives while poll() is not
    # waiting (need_rejoin() is false once the leader has assigned): the member never turns
    # stable or heartbeats again, and its session expires.
    c.subscribe([topic])
    c.topics()
    assigned: list[int] = []
    received = 0
    while True:  # until killed (SIGKILL) or terminated
        batches = c.poll(timeout_ms=100)
        out = [f"R {r.partition} {r.offset}" for recs in batches.values() for r in recs]
        now = sorted(tp.partition for tp in c.assignment())
        if now != assigned:
            assigned = now
            out.insert(0, "ASSIGN " + ",".join(map(str, now)))
        if out:
            print("\n".join(out), flush=True)
        if not batches:
            continue
        received += sum(len(recs) for recs in batches.values())
        if hold_after and received >= hold_after:
            print("HOLD", flush=True)
            threading.Event().wait()  # until SIGKILL
        try:
            c.commit()  # synchronous
            print("C " + " ".join(f"{tp.partition}:{c.position(tp)}" for tp in batches), flush=True)
        except KafkaError as e:  # e.g. a rebalance: this batch stays uncommitted work
            print(f"F {type(e).__name__}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:5], *map(int, sys.argv[5:6]))
