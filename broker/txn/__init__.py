"""Kafka's transaction coordinator, ZooKeeper-mode Kafka 3.9 semantics (issue #22).

So far only its pure half: `metadata` (TransactionState, TransactionMetadata and its state
machine), `transaction_log` (metadata <-> `__transaction_state` records) and `decisions` (what
InitProducerId, AddPartitionsToTxn and EndTxn decide). Nothing in the broker uses them yet: the
coordinator that loads `__transaction_state`, writes to it and sends the markers comes later.
"""
