"""The ZooKeeper-backed control plane (Kafka 3.9 in ZooKeeper mode): `data` holds the znode paths and
JSON codecs, `client` bridges kazoo's ZooKeeper session into the event loop, `kafka_zk_client`
holds the operations the controller and brokers perform on it (Kafka's KafkaZkClient), `dump`
walks Kafka's znodes for an operator."""
