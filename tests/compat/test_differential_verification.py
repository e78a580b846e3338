"""Differential test of KIP-890 part 1 (issue #22): tests/compat/differential/verification's
transactional produces sent byte for byte to Odradek and to Apache Kafka 3.9.2, both with their
default transaction.partition.verification.enable=true and their own transaction coordinator
(one node each), and the answers compared field by field as test_differential.py compares them
(runner.py's normalisation; no allow-list: every answer must be identical). A produce to a
partition not added to the transaction, at v3, v9 and v11, with an unknown transactional id, a
newer epoch than the coordinator's, two producers in one request, a partially verified request,
a non-transactional batch inside the transaction, a newer epoch where the transaction already
has data (not verified: appended); TxnOffsetCommit v0 / v3 / v4 for a group not added with
AddOffsetsToTxn, with a newer epoch, then added. The main corpus runs with the
verification off (its transactional produces have no coordinator), hence a second pair of
brokers here."""

from __future__ import annotations

from tests.broker_process import BrokerProcess
from tests.compat.differential.runner import HERE, compare, load_corpus, run_corpus
from tests.compat.reference_kafka import ReferenceKafka
from tests.compat.test_differential import GROUPS, TRANSACTIONS, broker_pair

COMMON = {"num.partitions": "1", "auto.create.topics.enable": "true", **GROUPS, **TRANSACTIONS}
CORPUS = HERE / "verification"


kafka, odradek = broker_pair("ver", COMMON)


def test_produce_verification_answers_as_kafka(odradek: BrokerProcess, kafka: ReferenceKafka) -> None:
    cases = load_corpus(CORPUS)
    assert len(cases) >= 15
    theirs = run_corpus(kafka.port, cases)
    ours = run_corpus(odradek.port, cases)
    differences = [f"{c.id}: {path}: odradek={a!r:.300} kafka={b!r:.300}"
                   for c in cases for path, a, b in compare(ours[c.id], theirs[c.id])]
    assert not differences, "\n".join(differences)
    # the corpus says what it tests: the refusals it was written for are what both answered
    errors = {c.id: ours[c.id].raw["responses"][0]["partition_responses"][0]["error_code"]
              for c in cases if c.line["api"] == 0}
    assert errors["ver-not-added"] == errors["ver-other-partition-not-added"] == 48
    assert (errors["ver-not-added-v11"], errors["ver-added"]) == (120, 0)
    assert errors["ver-newer-epoch-ongoing"] == 0  # Kafka 3.9 does not compare the epoch there
    offsets = {c.id: ours[c.id].raw["topics"][0]["partitions"][0]["error_code"] for c in cases if c.line["api"] == 28}
    assert (offsets["ver-toc-not-added"], offsets["ver-toc-not-added-v4"], offsets["ver-toc-added"]) == (48, 120, 0)
