"""The ZooKeeper-backed control plane (Kafka 3.9 in ZooKeeper mode): `data` holds the znode paths and
JSON codecs, `client` bridges kazoo's ZooKeeper session into the event loop, `kafka_zk_client`
holds the operations the controller and brokers perform on it (Kafka's KafkaZkClient), `dump`
walks Kafka's znodes for an operator.

The controller: `controller` (KafkaController: election, failover, the watches as events),
`event_manager` (its one ordered queue and the events), `context` (ControllerContext),
`partition_state_machine` / `replica_state_machine` / `topic_deletion_manager` (Kafka's Zk*
classes of the same names), `admin` (AdminZkClient), and `zk_controller` (ZkController: the
controller.interface.Controller a ZooKeeper-mode broker uses). The controller -> broker channel
is controller.channel."""
