"""Java exactly-once end to end against a single `odradek serve` (issue #22 §3; the same
scenarios on the 3-broker cluster are tests/cluster/test_java_eos.py, the scenarios themselves
tests/compat/eos.py):

* a consume-transform-produce application (read_committed group consumer, transactional
  producer, `sendOffsetsToTransaction(offsets, groupMetadata)`, every 4th transaction aborted and
  the consumer sought back to the committed offsets): the output is every input record once, in
  order, and the group's committed offsets are the input's end offsets;
* the application killed in the middle of a transaction and run again: nothing duplicated,
  nothing lost (the offsets were committed with their transaction's records, not apart);
* Kafka's transactions_test.py in small: VerifiableProducer seeds, two TransactionalMessageCopier
  copy while the only broker is restarted (SIGTERM) and then killed (kill -9) and restarted, and
  read_committed ConsoleConsumers check the output against the input.
"""

from __future__ import annotations

import pytest

from tests.broker_process import BrokerProcess
from tests.compat import eos
from tests.compat.test_java_transactions import broker

__all__ = ["broker"]  # a single node with transaction.state.log.min.isr=1, a fixture of that module


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> str:
    return eos.compile_eos(tmp_path_factory.mktemp("java-eos") / "classes")


def test_consume_transform_produce_commits_and_aborts(classes: str, broker: BrokerProcess) -> None:
    eos.consume_transform_produce(classes, broker.bootstrap, rf=1)


def test_application_killed_mid_transaction_resumes_exactly_once(classes: str, broker: BrokerProcess) -> None:
    eos.copier_killed_mid_transaction(classes, broker.bootstrap, rf=1)


def test_kafka_transactional_message_copier_across_broker_restarts(broker: BrokerProcess) -> None:
    def clean() -> None:
        broker.stop()
        broker.start()

    def hard() -> None:
        broker.kill()
        broker.start()

    measured = eos.transactions_test(broker.bootstrap, 1, [clean, hard])
    print(measured)
