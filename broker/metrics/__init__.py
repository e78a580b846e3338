"""Prometheus metrics with the names the JMX exporter's usual Kafka rules give Kafka's MBeans
(docs/operations.md lists every series served)."""
