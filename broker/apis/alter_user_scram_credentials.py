"""AlterUserScramCredentials (key 51), version 0 (KIP-554).

As Kafka 3.9's KafkaApis / ZkAdminManager.alterUserScramCredentials: in a cluster only the active
controller acts (NOT_CONTROLLER for every user otherwise; the admin client sends it to the
controller), a single node is its own controller;
ALTER on the cluster is required. Per user: an unknown mechanism is UNSUPPORTED_SASL_MECHANISM,
an empty name or iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL, a user altered twice
for one mechanism DUPLICATE_RESOURCE, a deletion of a credential that does not exist
RESOURCE_NOT_FOUND -- and a user with any error is not changed at all. The credential of an
upsertion comes from the client's salt and salted password (the password never travels):
StoredKey = H(HMAC(salted, "Client Key")), ServerKey = HMAC(salted, "Server Key"). The
credentials go to the broker's ScramCredentialStore (broker.sasl.credential_store): in a cluster
the user's `/config/users/<user>` is rewritten with its other keys (quotas) kept, and a
/config/changes notification tells every broker; a single node writes its metadata file and its
CredentialCache at once, and answers once the file is durable."""

from __future__ import annotations

import hashlib
import hmac
from collections import defaultdict

from broker.apis.describe_user_scram_credentials import MECHANISM_TYPES
from broker.apis.registry import api
from broker.context import RequestContext
from broker.sasl.scram import MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, hash_name
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse
from protocol.messages.alter_user_scram_credentials_response import AlterUserScramCredentialsResult

MECHANISM_NAMES = {v: k for k, v in MECHANISM_TYPES.items()}


def _result(user: str, code: int = 0, message: str | None = None) -> AlterUserScramCredentialsResult:
    return AlterUserScramCredentialsResult(user=user, error_code=code, error_message=message)


@api(51, 0, 0)
async def handle(ctx: RequestContext, req: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    users = list(dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions]))
    if ctx.server.zk_mode and not getattr(ctx.server.controller, "is_active_controller", False):
        return AlterUserScramCredentialsResponse(results=[_result(u, ErrorCode.NOT_CONTROLLER) for u in users])
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return AlterUserScramCredentialsResponse(
            results=[_result(u, ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for u in users])
    errors: dict[str, tuple[int, str]] = {}
    seen: dict[str, set[int]] = defaultdict(set)

    def check(name: str, mechanism: int, iterations: int | None) -> None:
        if name in errors:
            return
        if not name:
            errors[name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mechanism not in MECHANISM_NAMES:
            errors[name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
        elif mechanism in seen[name]:
            errors[name] = (ErrorCode.DUPLICATE_RESOURCE,
                            "A user credential cannot be altered twice in the same request")
        elif iterations is not None and iterations < MIN_ITERATIONS:
            errors[name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif iterations is not None and iterations > MAX_ITERATIONS:
            errors[name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        seen[name].add(mechanism)

    for d in req.deletions:
        check(d.name, d.mechanism, None)
    for u in req.upsertions:
        check(u.name, u.mechanism, u.iterations)
    store = ctx.server.scram_store
    assert store is not None
    current = {name: await store.credentials(name) for name in users if name not in errors}
    for d in req.deletions:
        if d.name not in errors and MECHANISM_NAMES[d.mechanism] not in current[d.name]:
            errors[d.name] = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
    for name, config in current.items():
        if name in errors:
            continue
        config = dict(config)
        for d in req.deletions:
            if d.name == name:
                config.pop(MECHANISM_NAMES[d.mechanism], None)
        for u in req.upsertions:
            if u.name == name:
                mechanism = MECHANISM_NAMES[u.mechanism]
                h = hash_name(mechanism)
                salted = bytes(u.salted_password)
                cred = ScramCredential(bytes(u.salt), hashlib.new(h, hmac.new(salted, b"Client Key", h).digest()).digest(),
                                       hmac.new(salted, b"Server Key", h).digest(), u.iterations)
                config[mechanism] = cred.to_zk()
        await store.set_credentials(name, config)
    results = [_result(u, *errors[u]) if u in errors else _result(u) for u in users]
    await ctx.committed(results)
    return AlterUserScramCredentialsResponse(results=results)
