"""The ACL znodes' JSON and the change notifications as Kafka 3.9 writes and reads them
(AclEntry.toJsonCompatibleMap, LiteralAclChangeStore, ExtendedAclChangeStore, ZkAclStore.path)."""

from __future__ import annotations

import json

from broker.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    acls_from_json,
    acls_to_json,
    decode_entries,
    encode_entries,
)
from controller.zk.acl_store import (
    decode_extended_change,
    decode_literal_change,
    encode_change,
    resource_path,
)

READ = AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW)
DENY = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.CLUSTER_ACTION, AclPermissionType.DENY)


def test_entries_json_is_kafkas() -> None:
    assert json.loads(encode_entries([READ])) == {
        "version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read", "host": "*"}]}
    kafka_wrote = (b'{"version":1,"acls":[{"principal":"User:bob","permissionType":"Deny",'
                   b'"operation":"ClusterAction","host":"10.0.0.1"},{"principal":"User:alice",'
                   b'"permissionType":"Allow","operation":"Read","host":"*"}]}')
    assert decode_entries(kafka_wrote) == {READ, DENY}
    assert decode_entries(encode_entries([READ, DENY])) == {READ, DENY}
    assert decode_entries(None) == frozenset()


def test_paths_and_change_notifications() -> None:
    literal = ResourcePattern(ResourceType.TRANSACTIONAL_ID, "tx", PatternType.LITERAL)
    prefixed = ResourcePattern(ResourceType.TOPIC, "pre", PatternType.PREFIXED)
    assert resource_path(literal) == "/kafka-acl/TransactionalId/tx"
    assert resource_path(prefixed) == "/kafka-acl-extended/prefixed/Topic/pre"
    path, data = encode_change(literal)
    assert (path, data) == ("/kafka-acl-changes/acl_changes_", b"TRANSACTIONAL_ID:tx")
    assert decode_literal_change(data) == literal
    assert decode_literal_change(b"Topic:a:b") == ResourcePattern(ResourceType.TOPIC, "a:b", PatternType.LITERAL)
    path, data = encode_change(prefixed)
    assert path == "/kafka-acl-extended-changes/acl_changes_"
    assert json.loads(data) == {"version": 1, "resourceType": "TOPIC", "name": "pre", "patternType": "PREFIXED"}
    assert decode_extended_change(data) == prefixed


def test_single_node_file_round_trip() -> None:
    acls = {ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL): frozenset({READ, DENY})}
    assert acls_from_json(json.loads(json.dumps(acls_to_json(acls)))) == acls
