"""Client quotas (KIP-13, KIP-55, KIP-124, KIP-599): Kafka's ClientQuotaManager and its relatives.

* entity.py: the quota entities (user, client-id, both, and their `<default>`s), their ZooKeeper
  names, and Kafka's precedence between them (DefaultQuotaCallback);
* manager.py: the sampled rates per (user, client-id) and the throttle time a violation costs.
"""
