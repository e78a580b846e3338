"""Kafka's transaction coordinator, ZooKeeper-mode Kafka 3.9 semantics (issue #22).

The pure half: `metadata` (TransactionState, TransactionMetadata and its state machine),
`transaction_log` (metadata <-> `__transaction_state` records) and `decisions` (what
InitProducerId, AddPartitionsToTxn and EndTxn decide). The I/O half: `state_manager`
(`__transaction_state` on the coordinator runtime: load by replay, acks=all writes) and
`coordinator` (the requests' loop around the decisions). Not yet: the marker sender that
completes a transaction (Kafka's TransactionMarkerChannelManager), timeouts and expiration.
"""
