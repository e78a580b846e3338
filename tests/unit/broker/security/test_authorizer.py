"""AclAuthorizer's decisions and ACL management, the cases of Kafka 3.9's AclAuthorizerTest.scala
(core/src/test/scala/unit/kafka/security/authorizer) on the pure cache, no store."""

from __future__ import annotations

import pytest

from broker.security.acl import (
    ANY_FILTER,
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from broker.security.authorizer import AclAuthorizer, parse_super_users
from protocol.errors import ErrorCode

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
U1, U2, U3 = "User:alice", "User:bob", "User:carol"
H1, H2 = "192.168.1.1", "192.168.1.2"


def ace(principal: str, op: AclOperation, perm: AclPermissionType = ALLOW, host: str = "*") -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


def res(name: str, kind: ResourceType = TOPIC, pattern: PatternType = LIT) -> ResourcePattern:
    return ResourcePattern(kind, name, pattern)


async def add(auth: AclAuthorizer, resource: ResourcePattern, *entries: AccessControlEntry) -> None:
    results = await auth.create_acls([AclBinding(resource, e) for e in entries])
    assert results == [None] * len(entries)


async def test_topic_acl_hosts_operations_and_deny() -> None:
    # AclAuthorizerTest.testTopicAcl
    auth = AclAuthorizer()
    t = res("test-topic")
    await add(auth, t, ace(U1, Op.READ, host=H1), ace(U1, Op.READ, host=H2), ace(U1, Op.WRITE, host=H1),
              ace(U1, Op.DESCRIBE), ace(U2, Op.READ, DENY, host=H1), ace(U2, Op.READ), ace(U3, Op.WRITE))
    assert auth.authorize(U1, H1, Op.READ, TOPIC, "test-topic")
    assert auth.authorize(U1, H2, Op.READ, TOPIC, "test-topic")
    assert not auth.authorize(U1, "10.0.0.9", Op.READ, TOPIC, "test-topic")
    assert auth.authorize(U1, H1, Op.WRITE, TOPIC, "test-topic")
    assert not auth.authorize(U1, H2, Op.WRITE, TOPIC, "test-topic")
    assert auth.authorize(U1, "10.0.0.9", Op.DESCRIBE, TOPIC, "test-topic")
    assert not auth.authorize(U2, H1, Op.READ, TOPIC, "test-topic")  # DENY from that host wins
    assert auth.authorize(U2, H2, Op.READ, TOPIC, "test-topic")
    assert auth.authorize(U2, H1, Op.DESCRIBE, TOPIC, "test-topic")  # DENY READ does not deny DESCRIBE
    assert auth.authorize(U3, H1, Op.WRITE, TOPIC, "test-topic")
    assert not auth.authorize(U3, H1, Op.READ, TOPIC, "test-topic")
    assert not auth.authorize("User:nobody", H1, Op.DESCRIBE, TOPIC, "test-topic")
    assert not auth.authorize(U1, H1, Op.READ, TOPIC, "other")  # no ACL there: not allowed by default


async def test_deny_takes_precedence() -> None:
    auth = AclAuthorizer()
    await add(auth, res("t"), ace(U1, Op.ALL), ace(U1, Op.ALL, DENY, host=H1))
    assert not auth.authorize(U1, H1, Op.READ, TOPIC, "t")
    assert auth.authorize(U1, H2, Op.READ, TOPIC, "t")


async def test_allow_all_access_and_wildcard_principal() -> None:
    auth = AclAuthorizer()
    await add(auth, res("t"), ace("User:*", Op.ALL))
    for op in (Op.READ, Op.WRITE, Op.DESCRIBE, Op.ALTER, Op.DELETE, Op.CREATE):
        assert auth.authorize("User:random", "10.1.1.1", op, TOPIC, "t")
    # AclAuthorizer compares the ACL's principal with User:*, whatever the caller's type
    assert auth.authorize("Group:random", "10.1.1.1", Op.READ, TOPIC, "t")


async def test_super_user_has_access_even_with_deny() -> None:
    auth = AclAuthorizer(super_users=parse_super_users("User:superuser1; User:superuser2"))
    await add(auth, res("t"), ace("User:*", Op.ALL, DENY))
    assert auth.authorize("User:superuser1", H1, Op.READ, TOPIC, "t")
    assert auth.authorize("User:superuser2", H1, Op.WRITE, CLUSTER, "kafka-cluster")
    assert not auth.authorize(U1, H1, Op.READ, TOPIC, "t")
    assert auth.authorize_by_resource_type("User:superuser1", H1, Op.WRITE, TOPIC)


def test_super_users_parse() -> None:
    assert parse_super_users("") == frozenset()
    assert parse_super_users("User:a;User:b") == {"User:a", "User:b"}
    with pytest.raises(ValueError):
        parse_super_users("alice")


async def test_wildcard_resource_acls() -> None:
    # testWildCardAcls
    auth = AclAuthorizer()
    assert not auth.authorize(U1, H1, Op.READ, TOPIC, "any")
    await add(auth, res("*"), ace(U1, Op.READ, host=H1))
    assert auth.authorize(U1, H1, Op.READ, TOPIC, "any")
    await add(auth, res("*"), ace(U1, Op.WRITE, DENY, host=H1))
    assert not auth.authorize(U1, H1, Op.WRITE, TOPIC, "any")
    await add(auth, res("any"), ace(U1, Op.WRITE, host=H1))
    assert not auth.authorize(U1, H1, Op.WRITE, TOPIC, "any")  # the wildcard's DENY still applies
    assert not auth.authorize(U1, H1, Op.READ, GROUP, "any")  # another resource type


async def test_no_acl_found_and_override() -> None:
    assert not AclAuthorizer().authorize(U1, H1, Op.READ, TOPIC, "t")
    allow_all = AclAuthorizer(allow_everyone_if_no_acl_found=True)
    assert allow_all.authorize(U1, H1, Op.READ, TOPIC, "t")
    await add(allow_all, res("t"), ace(U2, Op.READ))
    assert not allow_all.authorize(U1, H1, Op.READ, TOPIC, "t")  # some ACL exists: it decides


@pytest.mark.parametrize(("granted", "implied"), [
    (Op.ALL, [Op.READ, Op.WRITE, Op.CREATE, Op.DELETE, Op.ALTER, Op.DESCRIBE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS,
             Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS]),
    (Op.READ, [Op.DESCRIBE]), (Op.WRITE, [Op.DESCRIBE]), (Op.DELETE, [Op.DESCRIBE]), (Op.ALTER, [Op.DESCRIBE]),
    (Op.ALTER_CONFIGS, [Op.DESCRIBE_CONFIGS]), (Op.DESCRIBE, []), (Op.CREATE, []), (Op.DESCRIBE_CONFIGS, []),
])
async def test_acl_inheritance(granted: AclOperation, implied: list[AclOperation]) -> None:
    # testAclInheritance: what one ALLOW also allows, and nothing more
    auth = AclAuthorizer()
    await add(auth, res("t"), ace(U1, granted))
    for op in Op:
        if op in (Op.UNKNOWN, Op.ANY, Op.ALL):
            continue
        expected = op == granted or op in implied
        assert auth.authorize(U1, H1, op, TOPIC, "t") == expected, op


async def test_prefixed_acls() -> None:
    # testAccessAllowedIfAllowAclExistsOnPrefixedResource / ...DenyAclExistsOnPrefixedResource
    auth = AclAuthorizer()
    await add(auth, res("foo", pattern=PRE), ace(U1, Op.READ))
    assert auth.authorize(U1, H1, Op.READ, TOPIC, "foo")
    assert auth.authorize(U1, H1, Op.READ, TOPIC, "foobar")
    assert not auth.authorize(U1, H1, Op.READ, TOPIC, "fo")
    assert not auth.authorize(U1, H1, Op.READ, TOPIC, "barfoo")
    await add(auth, res("foob", pattern=PRE), ace(U1, Op.READ, DENY))
    assert auth.authorize(U1, H1, Op.READ, TOPIC, "fooa")
    assert not auth.authorize(U1, H1, Op.READ, TOPIC, "foobar")
    await add(auth, res("fooa"), ace(U1, Op.READ, DENY))
    assert not auth.authorize(U1, H1, Op.READ, TOPIC, "fooa")
    assert auth.authorize(U1, H1, Op.READ, TOPIC, "fooab")  # a LITERAL deny is that name only


async def test_empty_resource_name_matches_wildcard() -> None:
    # testAuthorizeWithEmptyResourceName
    auth = AclAuthorizer()
    await add(auth, res("*", GROUP), ace(U1, Op.READ))
    assert auth.authorize(U1, H1, Op.READ, GROUP, "")


async def test_authorize_by_resource_type() -> None:
    # testAuthorizeByResourceTypeMultipleAddAndRemove / ...WithAllHostAce / ...DenyTakesPrecedence
    auth = AclAuthorizer()
    assert not auth.authorize_by_resource_type(U1, H1, Op.WRITE, TOPIC)
    await add(auth, res("t1"), ace(U1, Op.WRITE))
    assert auth.authorize_by_resource_type(U1, H1, Op.WRITE, TOPIC)
    assert not auth.authorize_by_resource_type(U2, H1, Op.WRITE, TOPIC)
    assert not auth.authorize_by_resource_type(U1, H1, Op.READ, TOPIC)
    await add(auth, res("t1"), ace(U1, Op.WRITE, DENY))
    assert not auth.authorize_by_resource_type(U1, H1, Op.WRITE, TOPIC)  # the only allow is denied
    await add(auth, res("pre", pattern=PRE), ace(U1, Op.WRITE))
    assert auth.authorize_by_resource_type(U1, H1, Op.WRITE, TOPIC)
    await add(auth, res("p", pattern=PRE), ace(U1, Op.WRITE, DENY))
    assert not auth.authorize_by_resource_type(U1, H1, Op.WRITE, TOPIC)  # "pre" dominated by "p"
    await add(auth, res("*"), ace("User:*", Op.ALL))
    assert auth.authorize_by_resource_type(U1, H1, Op.WRITE, TOPIC)  # a wildcard allow
    await add(auth, res("*"), ace(U1, Op.WRITE, DENY, host=H1))
    assert not auth.authorize_by_resource_type(U1, H1, Op.WRITE, TOPIC)  # a wildcard deny: all denied
    assert auth.authorize_by_resource_type(U1, H2, Op.WRITE, TOPIC)


async def test_authorize_by_resource_type_allow_everyone() -> None:
    auth = AclAuthorizer(allow_everyone_if_no_acl_found=True)
    assert auth.authorize_by_resource_type(U1, H1, Op.WRITE, TOPIC)
    await add(auth, res("*"), ace(U1, Op.WRITE, DENY))
    assert not auth.authorize_by_resource_type(U1, H1, Op.WRITE, TOPIC)


async def test_authorized_operations_bit_field() -> None:
    auth = AclAuthorizer()
    await add(auth, res("g", GROUP), ace(U1, Op.READ))
    assert auth.authorized_operations(U1, H1, GROUP, "g") == (1 << 3) | (1 << 8)  # READ, DESCRIBE implied
    assert auth.authorized_operations(U2, H1, GROUP, "g") == 0


async def test_create_validates_bindings() -> None:
    auth = AclAuthorizer()
    results = await auth.create_acls([
        AclBinding(res("a/b"), ace(U1, Op.READ)),
        AclBinding(res("ok"), ace(U1, Op.UNKNOWN)),
        AclBinding(res("ok"), ace(U1, Op.READ)),
        AclBinding(res("bad"), ace("alice", Op.READ)),  # no principal type: the resource's update fails
        AclBinding(res("bad"), ace(U1, Op.READ)),
    ])
    assert [r.code if r else 0 for r in results] == [ErrorCode.INVALID_REQUEST] * 2 + [0] + [
        ErrorCode.UNKNOWN_SERVER_ERROR] * 2
    assert auth.acls(ANY_FILTER) == [AclBinding(res("ok"), ace(U1, Op.READ))]


def entry_filter(principal: str | None = None, op: AclOperation = Op.ANY,
                 perm: AclPermissionType = AclPermissionType.ANY) -> AccessControlEntryFilter:
    return AccessControlEntryFilter(principal, None, op, perm)


async def test_describe_filters_literal_prefixed_match_any() -> None:
    auth = AclAuthorizer()
    await add(auth, res("foo"), ace(U1, Op.READ))
    await add(auth, res("*"), ace(U2, Op.READ))
    await add(auth, res("fo", pattern=PRE), ace(U3, Op.WRITE))
    await add(auth, res("bar"), ace(U1, Op.WRITE, DENY))

    def names(pattern_type: PatternType, name: str | None, principal: str | None = None) -> list[str]:
        f = AclBindingFilter(ResourcePatternFilter(TOPIC, name, pattern_type), entry_filter(principal))
        return sorted(f"{b.pattern.pattern_type.name}:{b.pattern.name}" for b in auth.acls(f))

    assert names(LIT, "foo") == ["LITERAL:foo"]
    assert names(PRE, "fo") == ["PREFIXED:fo"]
    assert names(PRE, "foo") == []
    assert names(PatternType.ANY, "foo") == ["LITERAL:foo"]
    assert names(PatternType.MATCH, "foo") == ["LITERAL:*", "LITERAL:foo", "PREFIXED:fo"]
    assert names(PatternType.ANY, None) == ["LITERAL:*", "LITERAL:bar", "LITERAL:foo", "PREFIXED:fo"]
    assert names(PatternType.ANY, None, U1) == ["LITERAL:bar", "LITERAL:foo"]
    f = AclBindingFilter(ResourcePatternFilter(GROUP, None, PatternType.ANY), entry_filter())
    assert auth.acls(f) == []


async def test_delete_acls_by_filters() -> None:
    # testDeleteAclsWithFilters-style: each filter reports what it deleted, a binding once
    auth = AclAuthorizer()
    await add(auth, res("foo"), ace(U1, Op.READ), ace(U2, Op.READ))
    await add(auth, res("fo", pattern=PRE), ace(U1, Op.WRITE))
    await add(auth, res("bar"), ace(U1, Op.READ))
    match_foo = AclBindingFilter(ResourcePatternFilter(TOPIC, "foo", PatternType.MATCH), entry_filter(U1))
    all_u1 = AclBindingFilter(ResourcePatternFilter(ResourceType.ANY, None, PatternType.ANY), entry_filter(U1))
    deleted = await auth.delete_acls([match_foo, all_u1])
    first = sorted(str(b.pattern) + str(b.entry) for b, err in deleted[0])
    assert first == sorted([str(res("foo")) + str(ace(U1, Op.READ)), str(res("fo", pattern=PRE)) + str(ace(U1, Op.WRITE))])
    assert [(b.pattern.name, err) for b, err in deleted[1]] == [("bar", None)]
    assert auth.acls(ANY_FILTER) == [AclBinding(res("foo"), ace(U2, Op.READ))]
    assert (await auth.delete_acls([all_u1])) == [[]]
    # the last entry of a resource removes the resource from the cache
    await auth.delete_acls([ANY_FILTER])
    assert auth.cache == {}


def test_filter_indefinite_fields() -> None:
    assert ResourcePatternFilter(TOPIC, "a", LIT).matches_at_most_one()
    assert not ResourcePatternFilter(TOPIC, "a", PatternType.MATCH).matches_at_most_one()
    assert ResourcePatternFilter(TOPIC, None, LIT).find_indefinite_field() == "Resource name is NULL."
    assert ResourcePatternFilter(ResourceType.ANY, "a", LIT).find_indefinite_field() == "Resource type is ANY."


def test_names() -> None:
    assert Op.CLUSTER_ACTION.pascal == "ClusterAction"
    assert Op.from_string("IdempotentWrite") is Op.IDEMPOTENT_WRITE
    assert Op.from_string("describe_configs") is Op.DESCRIBE_CONFIGS
    assert ResourceType.from_string("TransactionalId") is ResourceType.TRANSACTIONAL_ID
    assert ResourceType.from_string("nope") is ResourceType.UNKNOWN


async def test_prefix_index_follows_additions_and_removals() -> None:
    """The decision index (prefix lengths per type) changes with the cache: a removed prefix no
    longer applies, a remaining shorter one still does, a name shorter than every prefix has none."""
    auth = AclAuthorizer()
    await add(auth, res("ab", pattern=PRE), ace(U1, Op.READ))
    await add(auth, res("abcd", pattern=PRE), ace(U1, Op.READ, DENY))
    assert not auth.authorize(U1, H1, Op.READ, TOPIC, "abcde")
    assert auth.authorize(U1, H1, Op.READ, TOPIC, "abc")
    assert not auth.authorize(U1, H1, Op.READ, TOPIC, "a")
    await auth.delete_acls([AclBindingFilter(ResourcePatternFilter(TOPIC, "abcd", PRE), entry_filter())])
    assert auth.authorize(U1, H1, Op.READ, TOPIC, "abcde")
    await auth.delete_acls([AclBindingFilter(ResourcePatternFilter(TOPIC, "ab", PRE), entry_filter())])
    assert not auth.authorize(U1, H1, Op.READ, TOPIC, "abcde")
    assert auth.matching_acls(TOPIC, "abcde") == []
