"""The pure logic of DescribeClientQuotas and AlterClientQuotas (Kafka 3.9's ZkAdminManager
describeClientQuotas / alterClientQuotas): request entities to quota entities, the filters, and an
entry's ops applied to the entity's stored configs. Errors are KafkaProtocolError with Kafka's
code and message; the handlers in broker/apis/client_quotas.py do the I/O.

Request entities name parts `user` and `client-id` (a null name: the `<default>`); `ip` quotas
(connection_creation_rate) are not implemented by Odradek and refused with INVALID_REQUEST.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from broker.quota.entity import DEFAULT, INTEGRAL_KEYS, QUOTA_KEYS, Entity, desanitize, sanitize
from protocol.errors import ErrorCode, KafkaProtocolError

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def _invalid(message: str) -> KafkaProtocolError:
    return KafkaProtocolError(ErrorCode.INVALID_REQUEST, message)


def entity_of(parts: Iterable[tuple[str, str | None]]) -> Entity:
    """A request's (entity_type, entity_name) parts as a quota entity of sanitized names."""
    user: str | None = None
    client: str | None = None
    for entity_type, name in dict(parts).items():  # Kafka reads the parts into a map: the last of a type wins
        value = DEFAULT if name is None else sanitize(name)
        if entity_type == USER:
            user = value
        elif entity_type == CLIENT_ID:
            client = value
        elif entity_type == IP:
            raise _invalid("IP quotas (connection_creation_rate) are not supported by Odradek")
        else:
            raise _invalid(f"Unhandled client quota entity type: {entity_type}")
    if user is None and client is None:
        raise _invalid("Invalid empty client quota entity")
    return user, client


def entity_parts(entity: Entity) -> list[tuple[str, str | None]]:
    """The response's parts of an entity, the `<default>` as a null name, client-id first as
    Kafka's answers have them (its entity is a HashMap)."""
    out: list[tuple[str, str | None]] = []
    for entity_type, value in ((CLIENT_ID, entity[1]), (USER, entity[0])):
        if value is not None:
            out.append((entity_type, None if value == DEFAULT else desanitize(value)))
    return out


def apply_ops(stored: Mapping[str, str], ops: Iterable[tuple[str, float, bool]]) -> dict[str, str]:
    """The entity's configs after an entry's (key, value, remove) ops, as ZkAdminManager writes
    them (the byte rates as longs, the others as doubles); other stored keys are kept."""
    props = dict(stored)
    seen: set[str] = set()
    for key, value, remove in ops:
        if key in seen:
            raise _invalid(f"Duplicate quota key {key} not updating quota for the entity")
        seen.add(key)
        if key not in QUOTA_KEYS:
            raise _invalid(f"Unrecognized configuration key {key}")
        if remove:
            props.pop(key, None)
        elif key in INTEGRAL_KEYS:
            whole = int(value + 1e-6) if value >= 0 else -int(-value + 1e-6)
            if abs(whole - value) > 1e-6:
                raise _invalid(f"Configuration {key} must be a Long value")
            props[key] = str(whole)
        else:
            props[key] = repr(float(value))
    return props


@dataclass(frozen=True, slots=True)
class Component:
    entity_type: str
    match_type: int
    match: str | None


def check_filter(components: Iterable[Component]) -> None:
    seen: set[str] = set()
    for c in components:
        if c.entity_type in seen:
            raise _invalid(f"Duplicate {c.entity_type} filter component entity type")
        seen.add(c.entity_type)
        if c.entity_type == IP:
            raise _invalid("IP quotas (connection_creation_rate) are not supported by Odradek")
        if c.entity_type not in (USER, CLIENT_ID):
            raise _invalid(f"Custom entity type '{c.entity_type}' not supported")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise _invalid(f"Unexpected match type {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise _invalid(f"Exact match of {c.entity_type} needs a name")


def matches(entity: Entity, components: Iterable[Component], strict: bool) -> bool:
    """Whether a stored entity matches a DescribeClientQuotas filter: every component matches
    its part, and (strict) the entity has no other part."""
    parts = {USER: entity[0], CLIENT_ID: entity[1]}
    named = set()
    for c in components:
        named.add(c.entity_type)
        value = parts[c.entity_type]
        if value is None:
            return False
        if c.match_type == MATCH_EXACT and value != sanitize(c.match or ""):
            return False
        if c.match_type == MATCH_DEFAULT and value != DEFAULT:
            return False
        if c.match_type == MATCH_SPECIFIED and value == DEFAULT:
            return False
    return not strict or all(v is None for t, v in parts.items() if t not in named)
