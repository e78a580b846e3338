"""Client quota entities and Kafka's precedence between them (DefaultQuotaCallback, ZooKeeper mode).

An entity is a (user, client-id) pair, each part absent (None), a name, or DEFAULT (`<default>`).
Names are kept *sanitized* as ZooKeeper stores them (Kafka's Sanitizer: URL-encoding with `%20`
for space, `%2A` for `*`, `~` kept), so that `<default>` -- which a sanitized name cannot be --
is unambiguous, and the ZooKeeper entity paths map one to one onto the keys here:

    /config/users/<user>/clients/<client-id>   (USER, CLIENT)
    /config/users/<user>                        (USER, None)
    /config/clients/<client-id>                 (None, CLIENT)

Each quota key (`producer_byte_rate`, ...) is looked up on its own, the first entity in
PRECEDENCE that sets it wins (Kafka keeps one override map per quota type). The winner also says
how clients share the quota (quotaMetricTags): the parts of the entity that are present become the
rate's key, with the connection's actual user / client-id in them -- so a `<default>` quota is
one quota *per* user or client-id, not one shared by all of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import quote, unquote

DEFAULT = "<default>"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE, CONTROLLER_MUTATION_RATE)
# QuotaConfigs: the byte rates are longs, the other two doubles
INTEGRAL_KEYS = frozenset({PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE})

Entity = tuple[str | None, str | None]  # (sanitized user or DEFAULT or None, same for client-id)


def sanitize(name: str) -> str:
    """Kafka's Sanitizer.sanitize: URL-encode, space as %20, `*` as %2A, `~` unencoded."""
    return quote(name, safe="-._~")


def desanitize(name: str) -> str:
    return unquote(name)


def user_name(principal: str) -> str:
    """The quota `user` of a KafkaPrincipal string (`User:alice` -> `alice`); Kafka's quotas key
    on the principal's name, ANONYMOUS included."""
    return principal.split(":", 1)[1] if ":" in principal else principal


def precedence(user: str, client_id: str) -> tuple[Entity, ...]:
    """The entities that may hold a (sanitized) user's and client-id's quota, highest first."""
    return (
        (user, client_id), (user, DEFAULT), (user, None),
        (DEFAULT, client_id), (DEFAULT, DEFAULT), (DEFAULT, None),
        (None, client_id), (None, DEFAULT),
    )


def find_quota(quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str, client_id: str
               ) -> tuple[float, Entity] | None:
    """The bound of quota `key` for a connection of (sanitized) `user` and `client_id`, and the
    rate key it is measured under (see the module docstring); None when no entity sets it."""
    for entity in precedence(user, client_id):
        config = quotas.get(entity)
        if config is not None and key in config:
            u, c = entity
            return config[key], (user if u is not None else "", client_id if c is not None else "")
    return None


def parse_entity(entity_type: str, entity: str) -> Entity:
    """The entity of a ZooKeeper config change: `users` with `alice` or `alice/clients/c1`,
    `clients` with `c1` (each part sanitized or `<default>`)."""
    if entity_type == "clients":
        return None, entity
    if entity_type != "users":
        raise ValueError(f"not a quota entity type: {entity_type}")
    user, sep, rest = entity.partition("/clients/")
    return user, (rest if sep else None)


def zk_entity(entity: Entity) -> tuple[str, str]:
    """The (entity type, entity path under it) a quota entity is stored at in ZooKeeper."""
    user, client = entity
    if user is None:
        if client is None:
            raise ValueError("a quota entity names a user, a client-id or both")
        return "clients", client
    return "users", user if client is None else f"{user}/clients/{client}"


def parse_quota_config(config: Mapping[str, str]) -> dict[str, float]:
    """The quota keys of an entity's stored configs as numbers; other keys (Kafka stores SCRAM
    credentials next to user quotas) and unparsable values are left out."""
    out: dict[str, float] = {}
    for key in QUOTA_KEYS:
        if key in config:
            try:
                out[key] = float(config[key])
            except ValueError:
                continue
    return out
