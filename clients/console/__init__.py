"""`odradek console`: a read-only web console for any Kafka cluster, reached over the wire.

It is a Kafka client like the other operator commands (kafka-python's admin client and
consumer), so it shows Apache Kafka as well as Odradek. Modules: `cluster_view` asks the
cluster and shapes what the pages show, `records` reads a bounded page of one partition and
decodes it, `throughput` scrapes brokers' Prometheus /metrics, `server` serves the pages
(aiohttp + Jinja2), `command` is the click command.
"""
