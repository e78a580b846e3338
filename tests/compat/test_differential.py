"""Differential test: every request of tests/compat/differential/corpus sent, byte for byte, to
Odradek and to Apache Kafka 3.9; the answers are compared field by field (see runner.py for the
few normalised fields and why). A difference must be listed in differential/allowlist.json with
its reason; an entry that no longer differs fails too, so the list cannot go stale.

Both brokers run with the same settings where they matter to the answers: one node with id 1,
num.partitions=1, auto.create.topics.enable (the default of both), groups that form at once
(group.initial.rebalance.delay.ms=0), group.min.session.timeout.ms=200, and an authorizer with
User:ANONYMOUS (the corpus's principal) as super user (StandardAuthorizer on Kafka's KRaft node,
AclAuthorizer on Odradek: the same ACL semantics). Both run with
transaction.partition.verification.enable=false: the corpus's transactional produces stand for
a producer whose coordinator added the partition (the corpus plays the coordinator with
WriteTxnMarkers), which either broker would otherwise ask its own coordinator about (KIP-890;
tests/integration/test_txn_verification.py and test_differential_verification.py test the
verification)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.broker_process import BrokerProcess
from tests.compat.differential.runner import (
    compare,
    load_allowlist,
    load_corpus,
    run_corpus,
)
from tests.compat.reference_kafka import ReferenceKafka

GROUPS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "200"}
# one broker: __transaction_state with one replica that is enough (the reference's SINGLE_NODE too)
TRANSACTIONS = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}
COMMON = {"num.partitions": "1", "auto.create.topics.enable": "true", **GROUPS, **TRANSACTIONS,
          "super.users": "User:ANONYMOUS", "transaction.partition.verification.enable": "false"}
# the same ACL semantics on both: Kafka's KRaft node runs StandardAuthorizer (AclAuthorizer needs
# ZooKeeper), Odradek AclAuthorizer; the corpus's connections are User:ANONYMOUS, a super user, so
# every other case is allowed as without an authorizer and the ACL APIs answer for real
KAFKA_AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
ODRADEK_AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}


def broker_pair(name: str, settings: dict[str, str], kafka_only: dict[str, str] | None = None,
                odradek_only: dict[str, str] | None = None) -> tuple[Any, Any]:
    """Module fixtures `kafka` and `odradek`: the two brokers with the same `settings` (plus
    each one's own, e.g. its authorizer's class name), one node with id 1 each
    (test_differential_verification.py runs a second pair)."""

    @pytest.fixture(scope="module")
    def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ReferenceKafka]:
        k = ReferenceKafka(tmp_path_factory.mktemp(f"{name}-kafka"), overrides={**settings, **(kafka_only or {})}).start()
        try:
            yield k
        finally:
            k.stop()

    @pytest.fixture(scope="module")
    def odradek(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
        overrides = ["broker.id=1", *(f"{k}={v}" for k, v in {**settings, **(odradek_only or {})}.items())]
        b = BrokerProcess(tmp_path_factory.mktemp(f"{name}-odradek") / "data", overrides=overrides).start()
        try:
            yield b
        finally:
            b.stop()

    return kafka, odradek


kafka, odradek = broker_pair("diff", COMMON, KAFKA_AUTHORIZER, ODRADEK_AUTHORIZER)


def test_corpus_is_large_and_covers_every_advertised_api() -> None:
    cases = load_corpus()
    sent = [c for c in cases if "recv" not in c.line]
    assert len(sent) >= 200
    apis = {c.line["api"] for c in sent if "api" in c.line and "raw" not in c.line}
    from broker.apis.registry import advertised, load_all

    load_all()
    assert {k for k, _, _ in advertised()} <= apis


def test_allowlist_entries_name_corpus_cases() -> None:
    ids = {c.id for c in load_corpus()}
    unknown = sorted(case for case, _ in load_allowlist() if case not in ids)
    assert not unknown, f"allow-list entries for cases not in the corpus: {unknown}"


def test_differential(odradek: BrokerProcess, kafka: ReferenceKafka) -> None:
    cases = load_corpus()
    allow = load_allowlist()
    t0 = time.monotonic()
    theirs = run_corpus(kafka.port, cases)
    ours = run_corpus(odradek.port, cases)
    undocumented: list[str] = []
    seen: set[tuple[str, str]] = set()
    total = identical = documented = 0
    for case in cases:
        if "recv" in case.line:
            continue
        total += 1
        diffs = compare(ours[case.id], theirs[case.id])
        if not diffs:
            identical += 1
            continue
        documented += all((case.id, path) in allow for path, _, _ in diffs)
        for path, a, b in diffs:
            seen.add((case.id, path))
            if (case.id, path) not in allow:
                undocumented.append(f"{case.id} ({case.source}) {path}: odradek={a!r:.300} kafka={b!r:.300}")
    stale = sorted(f"{c} {f}" for c, f in allow if (c, f) not in seen)
    print(f"\ndifferential: {total} cases, {identical} identical, {documented} differing-documented, "
          f"{len(undocumented)} undocumented differences, {len(stale)} stale allow-list entries "
          f"({time.monotonic() - t0:.1f}s)")
    assert not undocumented, "differences not in differential/allowlist.json:\n" + "\n".join(undocumented)
    assert not stale, "allow-list entries that no longer differ (remove them):\n" + "\n".join(stale)
    assert identical + documented == total
