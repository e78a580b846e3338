"""DescribeUserScramCredentials (key 50), version 0 (KIP-554).

As Kafka 3.9's ZkAdminManager.describeUserScramCredentials: the SCRAM mechanisms and iterations
of the users named (all users with a credential when none is named), read from
the broker's ScramCredentialStore (ZooKeeper's `/config/users/<user>` in a cluster, the metadata
file on a single node) -- never the salt or keys. A user named twice gets DUPLICATE_RESOURCE, one
without a credential RESOURCE_NOT_FOUND. DESCRIBE on the cluster is required
(CLUSTER_AUTHORIZATION_FAILED at the top level otherwise)."""

from __future__ import annotations

from collections import Counter

from broker.apis.registry import api
from broker.context import RequestContext
from broker.sasl.scram import MECHANISMS, ScramCredential
from broker.security.acl import AclOperation
from protocol.errors import ErrorCode
from protocol.messages import (
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from protocol.messages.describe_user_scram_credentials_response import (
    CredentialInfo,
    DescribeUserScramCredentialsResult,
)

# ScramMechanism's type bytes (org.apache.kafka.clients.admin.ScramMechanism)
MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


def credential_infos(config: dict[str, str]) -> list[CredentialInfo]:
    infos = []
    for mechanism in MECHANISMS:
        if mechanism in config:
            try:
                iterations = ScramCredential.from_zk(config[mechanism]).iterations
            except ValueError:
                continue
            infos.append(CredentialInfo(mechanism=MECHANISM_TYPES[mechanism], iterations=iterations))
    return infos


@api(50, 0, 0)
async def handle(ctx: RequestContext, req: DescribeUserScramCredentialsRequest) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeUserScramCredentialsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                    error_message=None)
    store = ctx.server.scram_store
    assert store is not None
    results: list[DescribeUserScramCredentialsResult] = []
    if not req.users:
        for user in await store.users():
            infos = credential_infos(await store.credentials(user))
            if infos:
                results.append(DescribeUserScramCredentialsResult(
                    user=user, error_code=0, error_message=None, credential_infos=infos))
        return DescribeUserScramCredentialsResponse(error_code=0, error_message=None, results=results)
    counts = Counter(u.name for u in req.users)
    for name in dict.fromkeys(u.name for u in req.users):
        if counts[name] > 1:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message=f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"))
            continue
        infos = credential_infos(await store.credentials(name))
        if not infos:
            results.append(DescribeUserScramCredentialsResult(
                user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message=f"Attempt to describe a user credential that does not exist: {name}"))
            continue
        results.append(DescribeUserScramCredentialsResult(user=name, error_code=0, error_message=None,
                                                          credential_infos=infos))
    return DescribeUserScramCredentialsResponse(error_code=0, error_message=None, results=results)
