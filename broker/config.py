"""Broker configuration: `server.properties` with Kafka's key names, types and defaults.

Why one table: Kafka's users carry their server.properties from broker to broker, so the key
names, units and defaults must be Kafka's; and every place that mentions a setting (parsing,
validation, `--override`, CLI flags, the configuration reference in docs/) is derived from the one
`DEFINITIONS` table below rather than listed again (uvicorn's single Config object).

Unknown keys are warned about (a typo must not pass silently) and invalid values are refused with
a message naming the key. Keys Kafka 3.9 has but Odradek does not act on (broker/
kafka_broker_configs, thread-pool sizes and the like that have no meaning on asyncio, SASL's
Kerberos settings, ...) are accepted quietly, and described as Kafka describes them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from broker.java_properties import parse_properties
from broker.kafka_broker_configs import KAFKA_BROKER_CONFIGS
from broker.replica_selector import RACK_AWARE_REPLICA_SELECTOR, SELECTORS

LONG_MAX = 9223372036854775807


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the key."""


@dataclass(frozen=True)
class ConfigDef:
    key: str
    type: str  # int, long, bool, string, list, double, password
    default: Any
    doc: str
    validator: Callable[[Any], bool] | None = None
    valid_text: str = ""


def _at_least(n: int) -> Callable[[Any], bool]:
    return lambda v: v >= n


def _one_of(*choices: str) -> Callable[[Any], bool]:
    return lambda v: v in choices


D = ConfigDef
DEFINITIONS: tuple[ConfigDef, ...] = (
    D("broker.id", "int", 0, "This broker's id, unique in the cluster.", _at_least(0), "[0,...]"),
    D("listeners", "list", ["PLAINTEXT://:9092"], "Listener URIs: NAME://host:port."),
    D("advertised.listeners", "list", None, "Addresses clients are told to use; default: listeners."),
    D("log.dirs", "list", None, "Directories holding partition logs; default: log.dir."),
    D("log.dir", "string", "/tmp/kafka-logs", "The log directory when log.dirs is not set."),
    D("num.partitions", "int", 1, "Partitions of an auto-created topic.", _at_least(1), "[1,...]"),
    D("default.replication.factor", "int", 1, "Replication factor of auto-created topics.", _at_least(1), "[1,...]"),
    D("auto.create.topics.enable", "bool", True, "Create an unknown topic when a Metadata request asks for it (Produce never creates topics)."),
    D("delete.topic.enable", "bool", True, "Allow DeleteTopics."),
    D("socket.request.max.bytes", "int", 104857600, "Largest request frame; larger ones close the connection.", _at_least(1), "[1,...]"),
    D("connections.max.idle.ms", "long", 600000, "Idle connections are closed after this long."),
    D("queued.max.request.bytes", "long", 104857600, "Bytes of partly received requests held across all connections; a connection whose request does not fit waits unread (Kafka's default -1 = unbounded; -1 or 0 here too).", _at_least(-1), "[-1,...]"),
    D("queued.max.response.bytes", "long", 16777216, "Odradek: finished but unsent response bytes per connection above which the connection is not read until they drain.", _at_least(1), "[1,...]"),
    D("socket.request.receive.timeout.ms", "long", 30000, "Odradek: a connection whose request has not fully arrived this long after its first byte is closed (slowloris); 0 = never.", _at_least(0), "[0,...]"),
    D("request.timeout.ms", "int", 30000, "Upper bound used for internal requests, and for the acks=all wait of the transaction markers a WriteTxnMarkers appends."),
    D("message.max.bytes", "int", 1048588, "Largest record batch (topic config max.message.bytes).", _at_least(0), "[0,...]"),
    D("log.segment.bytes", "int", 1073741824, "Segment size (topic config segment.bytes).", _at_least(14), "[14,...]"),
    D("log.roll.hours", "int", 168, "Segment age before a roll, in hours.", _at_least(1), "[1,...]"),
    D("log.roll.ms", "long", None, "Segment age before a roll (segment.ms); overrides log.roll.hours."),
    D("log.roll.jitter.hours", "int", 0, "Jitter subtracted from the roll age, hours."),
    D("log.roll.jitter.ms", "long", None, "Jitter subtracted from the roll age (segment.jitter.ms)."),
    D("log.retention.hours", "int", 168, "Retention time in hours."),
    D("log.retention.minutes", "int", None, "Retention time in minutes; overrides hours."),
    D("log.retention.ms", "long", None, "Retention time (retention.ms); overrides minutes; -1 = unlimited."),
    D("log.retention.bytes", "long", -1, "Retention size per partition (retention.bytes); -1 = unlimited."),
    D("log.retention.check.interval.ms", "long", 300000, "How often retention runs.", _at_least(1), "[1,...]"),
    D("log.index.size.max.bytes", "int", 10485760, "Index file size (segment.index.bytes).", _at_least(4), "[4,...]"),
    D("log.index.interval.bytes", "int", 4096, "Bytes between offset index entries (index.interval.bytes).", _at_least(0), "[0,...]"),
    D("log.flush.interval.messages", "long", LONG_MAX, "fsync after this many messages (flush.messages).", _at_least(1), "[1,...]"),
    D("log.flush.interval.ms", "long", None, "fsync after this long (flush.ms); default: never by time."),
    D("log.flush.scheduler.interval.ms", "long", LONG_MAX, "How often the flusher checks flush.ms."),
    D("log.flush.offset.checkpoint.interval.ms", "int", 60000, "How often recovery points are checkpointed."),
    D("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, "How often log start offsets are checkpointed."),
    D("log.segment.delete.delay.ms", "long", 60000,
      "Delay before a .deleted segment, or a deleted log's <topic>-<partition>.<uuid>-delete directory, is removed "
      "(file.delete.delay.ms)."),
    D("log.message.timestamp.type", "string", "CreateTime", "CreateTime or LogAppendTime.", _one_of("CreateTime", "LogAppendTime"), "[CreateTime, LogAppendTime]"),
    D("log.cleanup.policy", "list", ["delete"], "delete and/or compact (cleanup.policy)."),
    D("log.preallocate", "bool", False, "Preallocate segment files."),
    D("log.cleaner.enable", "bool", True, "Run the log cleaner (compaction of cleanup.policy=compact topics, __consumer_offsets included)."),
    D("log.cleaner.threads", "int", 1, "Cleaner threads, each with its own worker process.", _at_least(0), "[0,...]"),
    D("log.cleaner.dedupe.buffer.size", "long", 134217728, "Memory for the key -> offset maps of all cleaner threads; a cleaning covers as much of the dirty section as its share holds."),
    D("log.cleaner.io.buffer.size", "int", 524288, "Bytes a cleaner reads at a time (grown for a larger batch).", _at_least(0), "[0,...]"),
    D("log.cleaner.io.buffer.load.factor", "double", 0.9, "Fill of the offset map at which a cleaning stops taking keys."),
    D("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308, "Bytes per second a cleaner reads and writes at most."),
    D("log.cleaner.backoff.ms", "long", 15000, "Wait before looking again when there is no log to clean.", _at_least(0), "[0,...]"),
    D("log.cleaner.min.cleanable.ratio", "double", 0.5, "Default min.cleanable.dirty.ratio: dirty bytes / all bytes above which a log is cleaned."),
    D("log.cleaner.min.compaction.lag.ms", "long", 0, "Default min.compaction.lag.ms: records younger than this are not compacted."),
    D("log.cleaner.max.compaction.lag.ms", "long", LONG_MAX, "Default max.compaction.lag.ms: a record older than this is compacted whatever the ratio.", _at_least(1), "[1,...]"),
    D("log.cleaner.delete.retention.ms", "long", 86400000, "Default delete.retention.ms: how long tombstones (and transaction markers) stay after the cleaning that first kept them."),
    D("min.insync.replicas", "int", 1, "Replicas that must have a write for acks=all.", _at_least(1), "[1,...]"),
    D("unclean.leader.election.enable", "bool", False, "Allow an out-of-sync replica to become leader."),
    D("compression.type", "string", "producer", "Topic compression (producer keeps the producer's).", _one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"), "[producer, uncompressed, gzip, snappy, lz4, zstd]"),
    D("offsets.topic.num.partitions", "int", 50, "Partitions of __consumer_offsets.", _at_least(1), "[1,...]"),
    D("offsets.topic.segment.bytes", "int", 104857600, "segment.bytes of __consumer_offsets (kept small so the log cleaner can compact it).", _at_least(1), "[1,...]"),
    D("offsets.topic.replication.factor", "short", 3, "Replication factor of __consumer_offsets (capped by live brokers).", _at_least(1), "[1,...]"),
    D("offsets.commit.timeout.ms", "int", 5000, "How long the group coordinator waits for a write to __consumer_offsets (offsets, group metadata) to reach every in-sync replica before it answers its timeout (REQUEST_TIMED_OUT for an offset commit, REBALANCE_IN_PROGRESS for a group's assignment).", _at_least(1), "[1,...]"),
    D("offsets.retention.minutes", "int", 10080, "Committed offsets of empty groups are kept this long."),
    D("offsets.retention.check.interval.ms", "long", 600000, "How often the group coordinator looks for expired offsets and empty groups.", _at_least(1), "[1,...]"),
    D("transaction.state.log.num.partitions", "int", 50, "Partitions of __transaction_state.", _at_least(1), "[1,...]"),
    D("transaction.state.log.replication.factor", "short", 3, "Replication factor of __transaction_state (capped by live brokers).", _at_least(1), "[1,...]"),
    D("transaction.state.log.min.isr", "int", 2, "min.insync.replicas of __transaction_state: the transaction coordinator's writes need this many in-sync replicas (a single broker needs 1, as Kafka).", _at_least(1), "[1,...]"),
    D("transaction.state.log.segment.bytes", "int", 104857600, "segment.bytes of __transaction_state (kept small so the log cleaner can compact it).", _at_least(1), "[1,...]"),
    D("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, "How often the transaction coordinator aborts the transactions open longer than their transaction.timeout.ms (fencing their producer's epoch).", _at_least(1), "[1,...]"),
    D("transactional.id.expiration.ms", "int", 604800000, "A transactional id with no transaction in progress and no update for this long is removed (a tombstone in __transaction_state).", _at_least(1), "[1,...]"),
    D("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, "How often the transaction coordinator removes expired transactional ids (transactional.id.expiration.ms).", _at_least(1), "[1,...]"),
    D("transaction.partition.verification.enable", "bool", True, "KIP-890 part 1: a partition leader asks the transaction coordinator (AddPartitionsToTxn v4+, verify_only) before it appends a producer's first transactional batch of a transaction, and refuses it (INVALID_TXN_STATE) unless the partition was added to the ongoing transaction."),
    D("transaction.max.timeout.ms", "int", 900000, "Largest transaction.timeout.ms a transactional producer may ask for (InitProducerId answers INVALID_TRANSACTION_TIMEOUT above it).", _at_least(1), "[1,...]"),
    D("group.initial.rebalance.delay.ms", "int", 3000, "Wait for more members before the first rebalance of a new group."),
    D("group.min.session.timeout.ms", "int", 6000, "Smallest session timeout a member may ask for."),
    D("max.request.partitions", "int", 10000, "Odradek: most partitions one CreateTopics or CreatePartitions request may create (Kafka's controller has this bound fixed at 10000); more: POLICY_VIOLATION for every topic of the request.", _at_least(1), "[1,...]"),
    D("max.broker.partitions", "int", 100000, "Most partitions this broker may host (KIP-578's name); creating more answers POLICY_VIOLATION. Creation is also refused when the new partitions' files would leave fewer than 1024 of the open-files limit free.", _at_least(1), "[1,...]"),
    D("group.max.session.timeout.ms", "int", 1800000, "Largest session timeout a member may ask for."),
    D("group.max.size", "int", 2147483647, "Most members a consumer group may have.", _at_least(1), "[1,...]"),
    D("producer.id.expiration.ms", "int", 86400000, "Idle producer ids are forgotten after this long."),
    D("zookeeper.connect", "string", None, "ZooKeeper connect string (host:port[,host:port][/chroot]); unset = single-node embedded metadata."),
    D("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout: a broker silent this long loses its registration (/brokers/ids/<id>) and re-registers with a new broker epoch.", _at_least(1), "[1,...]"),
    D("zookeeper.connection.timeout.ms", "int", None, "Longest wait for the ZooKeeper connection at start-up; default: zookeeper.session.timeout.ms."),
    D("controlled.shutdown.enable", "bool", True, "ZooKeeper mode only (not a single node): on SIGTERM, ask the controller to move this broker's leaderships to other replicas before stopping."),
    D("controlled.shutdown.max.retries", "int", 3, "ControlledShutdown attempts (each bounded by request.timeout.ms, ZooKeeper's lookup of the controller included) before stopping anyway.", _at_least(0), "[0,...]"),
    D("controlled.shutdown.retry.backoff.ms", "long", 5000, "Wait between ControlledShutdown attempts (the controller unreachable, or leaderships it could not move yet).", _at_least(0), "[0,...]"),
    D("leader.replication.throttled.rate", "long", LONG_MAX, "Dynamic (per broker or cluster default): bytes per second a leader serves to out-of-sync followers of the partitions its topics' leader.replication.throttled.replicas name (kafka-reassign-partitions --throttle sets it).", _at_least(0), "[0,...]"),
    D("follower.replication.throttled.rate", "long", LONG_MAX, "Dynamic (per broker or cluster default): bytes per second a follower fetches for the partitions its topics' follower.replication.throttled.replicas name while it is not caught up.", _at_least(0), "[0,...]"),
    D("replication.quota.window.num", "int", 11, "Windows over which replication throttle rates are measured.", _at_least(1), "[1,...]"),
    D("replication.quota.window.size.seconds", "int", 1, "Length of one replication throttle window.", _at_least(1), "[1,...]"),
    D("log.format", "string", "logfmt", "Odradek: the broker's log lines: logfmt (key=value) or json (one JSON object per line, structlog's JSONRenderer).", _one_of("logfmt", "json"), "[logfmt, json]"),
    D("metrics.port", "int", 0, "Odradek: port of the Prometheus /metrics endpoint (names as the JMX exporter's Kafka rules give them; docs/operations.md); 0 = off.", _at_least(0), "[0,...]"),
    D("metrics.host", "string", "0.0.0.0", "Odradek: address the /metrics endpoint binds."),
    D("quota.window.num", "int", 11, "Windows over which client quota rates (producer_byte_rate, consumer_byte_rate, request_percentage) are measured.", _at_least(1), "[1,...]"),
    D("quota.window.size.seconds", "int", 1, "Length of one client quota window.", _at_least(1), "[1,...]"),
    D("controller.quota.window.num", "int", 11, "Windows over which controller_mutation_rate is measured.", _at_least(1), "[1,...]"),
    D("controller.quota.window.size.seconds", "int", 1, "Length of one controller mutation quota window.", _at_least(1), "[1,...]"),
    D("replica.lag.time.max.ms", "long", 30000, "A follower that has not caught up with its leader for this long leaves the ISR (the leader asks the controller); one that catches up joins it again.", _at_least(1), "[1,...]"),
    D("num.replica.fetchers", "int", 1, "Fetchers per leader broker, each with its own connection; a followed partition goes to one of them by a hash of its name.", _at_least(1), "[1,...]"),
    D("replica.fetch.max.bytes", "int", 1048576, "Bytes a follower asks for per partition in one fetch from its leader (at least one batch is returned).", _at_least(0), "[0,...]"),
    D("replica.fetch.response.max.bytes", "int", 10485760, "Bytes a follower asks for in one fetch from its leader, all partitions together.", _at_least(0), "[0,...]"),
    D("replica.fetch.wait.max.ms", "int", 500, "Longest a follower's fetch waits at the leader for new records.", _at_least(0), "[0,...]"),
    D("replica.fetch.min.bytes", "int", 1, "Bytes a follower's fetch waits for at the leader before it is answered.", _at_least(1), "[1,...]"),
    D("replica.fetch.backoff.ms", "int", 1000, "Wait before a follower fetches again from a leader after an error.", _at_least(0), "[0,...]"),
    D("broker.rack", "string", None, "The broker's rack, registered in ZooKeeper, used by rack-aware replica assignment and by `replica.selector.class`'s rack-aware selector."),
    D("replica.selector.class", "class", None, "The replica a consumer with `client.rack` (Fetch v11+) is sent to fetch from (KIP-392). Unset: the leader, always. `" + RACK_AWARE_REPLICA_SELECTOR + "`: an in-sync replica in the client's rack (the leader if it is one), else the leader. Other classes are refused: Odradek cannot load Java classes.", _one_of(*SELECTORS), "[null, " + ", ".join(SELECTORS) + "] (Odradek loads no Java classes: Kafka's rack-aware selector is built in)"),
    D("authorizer.class.name", "string", "", "The authorizer: `kafka.security.authorizer.AclAuthorizer` checks every request against the ACLs (in ZooKeeper, or a single node's metadata file); empty: every request is allowed and the ACL APIs answer SECURITY_DISABLED. Other classes are refused: Odradek loads no Java classes.", _one_of("", "kafka.security.authorizer.AclAuthorizer"), "[, kafka.security.authorizer.AclAuthorizer]"),
    D("super.users", "string", None, "AclAuthorizer: principals allowed everything whatever the ACLs, separated by ';' (User:admin;User:broker)."),
    D("allow.everyone.if.no.acl.found", "bool", False, "AclAuthorizer: allow a request on a resource that no ACL applies to."),
    D("cluster.id", "string", None, "Cluster id written to meta.properties (generated when unset)."),
    D("listener.security.protocol.map", "string", "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "Listener name -> security protocol (NAME:PROTOCOL,...): PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL."),
    D("sasl.enabled.mechanisms", "list", ["GSSAPI"], "SASL mechanisms enabled on SASL listeners (per listener: listener.name.<listener>.sasl.enabled.mechanisms). Odradek builds PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; a SASL listener with any other mechanism enabled -- GSSAPI, Kafka's default, included -- is refused at start."),
    D("sasl.jaas.config", "password", None, "JAAS login context for SASL listeners, in Kafka's JAAS syntax (per listener and mechanism: listener.name.<listener>.<mechanism>.sasl.jaas.config). PLAIN: org.apache.kafka.common.security.plain.PlainLoginModule with user_<name>=\"<password>\" options for the users the broker accepts."),
    D("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "SASL mechanism of the broker's own connections to other brokers when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL (it must be enabled there; the credentials are the username/password options of that listener's JAAS entry for it)."),
    D("connection.failed.authentication.delay.ms", "int", 100, "Delay before a connection whose SASL authentication failed is answered and closed (slows down password guessing).", _at_least(0), "[0,...]"),
    D("connections.max.reauth.ms", "long", 0, "SASL session lifetime (KIP-368), per mechanism also listener.name.<listener>.<mechanism>.connections.max.reauth.ms: SaslAuthenticate v1+ answers it, a client re-authenticates on the connection before it ends, and a request on a connection whose session ended closes the connection. 0: sessions never end.", _at_least(0), "[0,...]"),
    D("inter.broker.listener.name", "string", None, "The listener other brokers (replica fetchers, the controller, the transaction marker sender) connect to; default: the listener named after security.inter.broker.protocol (a single node without a listener of that name: its first advertised listener, used by its own transaction marker sender with that listener's TLS and SASL). Only one of the two may be set."),
    D("security.inter.broker.protocol", "string", "PLAINTEXT", "The protocol brokers talk to each other with, when inter.broker.listener.name is not set (the listener of that name is used).", _one_of("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"), "[PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL]"),
    D("ssl.protocol", "string", "TLSv1.3", "The TLS protocol of the SSL context; the versions actually allowed are ssl.enabled.protocols.", _one_of("TLSv1.3", "TLSv1.2", "TLSv1.1", "TLSv1", "TLS"), "[TLSv1.3, TLSv1.2, TLSv1.1, TLSv1, TLS]"),
    D("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"], "TLS versions accepted on SSL listeners and used by the broker's own TLS connections (the lowest and highest listed bound them).", lambda v: bool(v) and all(p in ("TLSv1.3", "TLSv1.2", "TLSv1.1", "TLSv1") for p in v), "[TLSv1.3, TLSv1.2, TLSv1.1, TLSv1]"),
    D("ssl.cipher.suites", "list", [], "TLS 1.2 cipher suites allowed (Java/IANA names such as TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, or OpenSSL names); empty = OpenSSL's defaults. TLS 1.3 suite names are accepted, but Python's ssl module cannot restrict TLS 1.3 suites: all of OpenSSL's stay enabled."),
    D("ssl.keystore.type", "string", "JKS", "PKCS12 or PEM. JKS, Kafka's default, is read as PKCS12 when the file is one (as Java does); a real JKS file is refused at start naming PKCS12/PEM.", _one_of("JKS", "PKCS12", "PEM"), "[JKS, PKCS12, PEM]"),
    D("ssl.keystore.location", "string", None, "The keystore file (PKCS12, or PEM with the private key and the certificate chain). Per listener: listener.name.<listener>.ssl.keystore.location, dynamically updatable per broker (certificate reload)."),
    D("ssl.keystore.password", "password", None, "Password of a PKCS12 keystore."),
    D("ssl.key.password", "password", None, "Password of the private key (an encrypted PEM key; a PKCS12 key protected differently from its store)."),
    D("ssl.keystore.certificate.chain", "password", None, "PEM keystore given inline: the certificate chain (ssl.keystore.type=PEM)."),
    D("ssl.keystore.key", "password", None, "PEM keystore given inline: the private key, PKCS#8, encrypted with ssl.key.password or not (ssl.keystore.type=PEM)."),
    D("ssl.truststore.type", "string", "JKS", "PKCS12 or PEM (JKS as for ssl.keystore.type).", _one_of("JKS", "PKCS12", "PEM"), "[JKS, PKCS12, PEM]"),
    D("ssl.truststore.location", "string", None, "The truststore file: the CA certificates client certificates (and, for the broker's own TLS connections, other brokers' certificates) must chain to."),
    D("ssl.truststore.password", "password", None, "Password of a PKCS12 truststore."),
    D("ssl.truststore.certificates", "password", None, "PEM truststore given inline: the trusted certificates (ssl.truststore.type=PEM)."),
    D("ssl.client.auth", "string", "none", "Client certificates on SSL listeners: required (mTLS: a client without a trusted certificate is refused), requested (checked when sent), none.", _one_of("none", "requested", "required"), "[none, requested, required]"),
    D("ssl.principal.mapping.rules", "string", "DEFAULT", "How a client certificate's subject (RFC 2253 form) becomes the principal's name: RULE:pattern/replacement/[LU],... then DEFAULT (the whole subject), as Kafka's SslPrincipalMapper."),
    D("ssl.endpoint.identification.algorithm", "string", "https", "The broker's own TLS connections to other brokers: https checks the peer's certificate names the host connected to; empty disables the check."),
)
CONFIGS: dict[str, ConfigDef] = {d.key: d for d in DEFINITIONS}

_INT_RANGES = {
    "int": (-(2**31), 2**31 - 1),
    "short": (-(2**15), 2**15 - 1),
    "long": (-(2**63), 2**63 - 1),
}


def parse_value(d: ConfigDef, raw: Any) -> Any:
    """Parse and validate one value given as text (or already typed)."""
    if raw is None:
        return None
    try:
        if d.type in _INT_RANGES:
            v = raw if isinstance(raw, int) and not isinstance(raw, bool) else int(str(raw).strip())
            lo, hi = _INT_RANGES[d.type]
            if not lo <= v <= hi:
                raise ValueError(f"out of range for {d.type}")
        elif d.type == "bool":
            if isinstance(raw, bool):
                v = raw
            else:
                text = str(raw).strip().lower()
                if text not in ("true", "false"):
                    raise ValueError("expected true or false")
                v = text == "true"
        elif d.type == "double":
            v = float(raw)
        elif d.type == "list":
            if isinstance(raw, list | tuple):
                v = [str(x).strip() for x in raw]
            else:
                v = [x.strip() for x in str(raw).split(",") if x.strip()]
        else:
            v = str(raw).strip()
    except ValueError as e:
        raise ConfigError(f"Invalid value {raw!r} for configuration {d.key}: {e}") from None
    if d.validator is not None and not d.validator(v):
        raise ConfigError(
            f"Invalid value {raw!r} for configuration {d.key}: value must be in {d.valid_text}"
        )
    return v


def read_properties(text: str) -> dict[str, str]:
    """Java .properties as Kafka's files use them (broker.java_properties: `key=value` or
    `key: value`, `#`/`!` comments, backslash continuations and escapes), values trimmed as
    Kafka's ConfigDef trims them."""
    return {key: value.strip() for key, value in parse_properties(text).items()}


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_listener(uri: str) -> Listener:
    m = re.fullmatch(r"([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):(\d+)", uri.strip())
    if m is None:
        raise ConfigError(f"Invalid listener {uri!r}: expected NAME://host:port")
    host = m.group(2).strip("[]")
    port = int(m.group(3))
    if port > 65535:  # the OS would silently bind port % 65536 (uvloop) or fail later with a traceback
        raise ConfigError(f"Invalid listener {uri!r}: port {port} is not in [0, 65535]")
    return Listener(m.group(1).upper(), host, port)


# Kafka's default listener.security.protocol.map: a listener named after a protocol speaks it.
DEFAULT_SECURITY_PROTOCOL_MAP = {p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
# Keys that only mean something to a KRaft broker or controller.
KRAFT_ONLY_KEYS = ("process.roles", "controller.quorum.voters", "controller.quorum.bootstrap.servers",
                   "controller.listener.names")


def security_protocols(raw_map: Any) -> dict[str, str]:
    """listener.security.protocol.map (`NAME:PROTOCOL,...`) as a dict, Kafka's default when unset."""
    if raw_map is None or not str(raw_map).strip():
        return dict(DEFAULT_SECURITY_PROTOCOL_MAP)
    result: dict[str, str] = {}
    for item in str(raw_map).split(","):
        name, sep, protocol = item.strip().partition(":")
        if not sep or not name.strip() or not protocol.strip():
            raise ConfigError(
                f"Invalid value {raw_map!r} for configuration listener.security.protocol.map: "
                "expected NAME:PROTOCOL,..."
            )
        result[name.strip().upper()] = protocol.strip().upper()
    return result


SERVED_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
LISTENER_PREFIX = "listener.name."


def check_served_protocols(key: str, listeners: list[Listener], protocols: Mapping[str, str]) -> None:
    """Refuse a listener whose protocol is not served: serving plain text on a port the operator
    declared otherwise would be a silent downgrade."""
    for lst in listeners:
        protocol = protocols.get(lst.name)
        if protocol is None:
            raise ConfigError(
                f"Invalid value for configuration {key}: no security protocol defined for listener "
                f"{lst.name} (name it after its protocol or map it in listener.security.protocol.map)"
            )
        if protocol not in SERVED_PROTOCOLS:
            raise ConfigError(
                f"Invalid value for configuration {key}: listener {lst} uses security protocol "
                f"{protocol}, which is not supported; Odradek serves {', '.join(SERVED_PROTOCOLS)} listeners"
            )


def config_def(key: str) -> ConfigDef | None:
    """The definition of `key`, a listener-prefixed SSL key (`listener.name.<l>.ssl.*`) included
    (its base key's, under the prefixed name); a key only Kafka defines (broker/
    kafka_broker_configs: accepted, no effect) has Kafka's type and default, no validator
    beyond its type; None if unknown."""
    d = CONFIGS.get(key) or _kafka_def(key)
    if d is None and key.startswith(LISTENER_PREFIX):
        base = key[len(LISTENER_PREFIX):].partition(".")[2]
        if base.startswith("ssl.") and base in CONFIGS:
            d = dataclasses.replace(CONFIGS[base], key=key)
        elif base == "sasl.enabled.mechanisms":
            d = dataclasses.replace(CONFIGS[base], key=key)
        elif base.endswith(".sasl.jaas.config"):  # listener.name.<l>.<mechanism>.sasl.jaas.config
            d = dataclasses.replace(CONFIGS["sasl.jaas.config"], key=key)
    return d


def _kafka_def(key: str) -> ConfigDef | None:
    k = KAFKA_BROKER_CONFIGS.get(key)
    if k is None:
        return None
    return ConfigDef(key, k.type if k.type in _KNOWN_TYPES else "string", k.default,
                     k.doc or f"Kafka's {key}.")


_KNOWN_TYPES = ("int", "long", "short", "bool", "string", "list", "double", "password", "class")


def listener_config(originals: Mapping[str, Any], listener: str, key: str) -> tuple[str, Any]:
    """The value of `key` for `listener` and the key it came from: Kafka's per-listener override
    `listener.name.<listener lower case>.<key>` when set, else the broker-wide `key`."""
    prefixed = f"{LISTENER_PREFIX}{listener.lower()}.{key}"
    if prefixed in originals:
        return prefixed, originals[prefixed]
    return key, originals.get(key)


class KafkaConfig:
    """Typed view of the broker's settings. Attribute access uses Kafka's keys:
    `config["log.segment.bytes"]`; common ones also have properties."""

    def __init__(self, props: Mapping[str, Any] | None = None, *, warn: Callable[[str], None] | None = None) -> None:
        self.originals = dict(props or {})
        self.unknown: list[str] = []
        values: dict[str, Any] = {}
        for key in KRAFT_ONLY_KEYS:
            if key in self.originals:
                raise ConfigError(
                    f"Configuration {key} is for KRaft mode, which Odradek does not support: Odradek "
                    "runs in ZooKeeper mode (a single node with embedded metadata, or zookeeper.connect); "
                    f"remove {key}"
                )
        for key, raw in self.originals.items():
            if key == "node.id":  # KRaft's name for the id; Kafka requires both to agree when both are set
                continue
            d = CONFIGS.get(key)
            if d is None:
                if key not in KAFKA_BROKER_CONFIGS and not key.startswith(("ssl.", "sasl.", "metric.", "confluent.", LISTENER_PREFIX)):
                    self.unknown.append(key)
                continue
            values[key] = parse_value(d, raw)
        if "node.id" in self.originals:
            node_id = parse_value(ConfigDef("node.id", "int", -1, "", _at_least(0), "[0,...]"),
                                  self.originals["node.id"])
            if "broker.id" in values and values["broker.id"] != node_id:
                raise ConfigError(
                    f"You must set node.id ({node_id}) to the same value as broker.id ({values['broker.id']})"
                )
            values["broker.id"] = node_id
        self.values = {d.key: values.get(d.key, d.default) for d in DEFINITIONS}
        for key in self.unknown:
            if warn is not None:
                warn(f"Unknown configuration {key!r} is ignored")
        self.listeners = [parse_listener(u) for u in self.values["listeners"]]
        adv = self.values["advertised.listeners"]
        self.advertised_listeners = [parse_listener(u) for u in adv] if adv else list(self.listeners)
        names = [lst.name for lst in self.listeners]
        if len(set(names)) != len(names):
            raise ConfigError("Invalid value for configuration listeners: each listener name must be unique")
        protocols = self.security_protocols = security_protocols(self.originals.get("listener.security.protocol.map"))
        check_served_protocols("listeners", self.listeners, protocols)
        check_served_protocols("advertised.listeners", self.advertised_listeners, protocols)
        if "inter.broker.listener.name" in self.originals and "security.inter.broker.protocol" in self.originals:
            raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
        # Kafka: the listener named by inter.broker.listener.name, else the one named after
        # security.inter.broker.protocol
        self.inter_broker_listener_name: str = (
            (self.values["inter.broker.listener.name"] or self.values["security.inter.broker.protocol"]).upper())
        advertised = {a.name for a in self.advertised_listeners}
        if not self.values["zookeeper.connect"] and advertised and self.inter_broker_listener_name not in advertised:
            # a single node's own connections (the transaction marker sender, KIP-890's
            # AddPartitionsToTxn) reach itself: on its first advertised listener when the named
            # one is not among them, with that listener's TLS and SASL as a cluster's would
            self.inter_broker_listener_name = self.advertised_listeners[0].name
        if self.values["zookeeper.connect"] and self.inter_broker_listener_name not in advertised:
            # other brokers would find no endpoint to replicate from (a single node has none)
            raise ConfigError(
                f"inter.broker.listener.name must be a listener name defined in advertised.listeners. The valid "
                f"options based on currently configured listeners are "
                f"{','.join(a.name for a in self.advertised_listeners)}")
        # SASL listeners' mechanisms and JAAS entries: a bad one refuses the start before anything is
        # written (imported here: broker.sasl reads this module's listener helpers)
        from broker.sasl.listeners import SaslListeners, inter_broker_credentials
        SaslListeners(self)
        # the broker's own credentials on a SASL inter-broker listener
        self.inter_broker_sasl = inter_broker_credentials(self)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def broker_id(self) -> int:
        return self.values["broker.id"]

    @property
    def log_dirs(self) -> list[Path]:
        dirs = self.values["log.dirs"] or [self.values["log.dir"]]
        return [Path(d) for d in dirs]

    @property
    def retention_ms(self) -> int:
        v = self.values
        if v["log.retention.ms"] is not None:
            return v["log.retention.ms"]
        if v["log.retention.minutes"] is not None:
            return v["log.retention.minutes"] * 60_000
        return v["log.retention.hours"] * 3_600_000

    @property
    def roll_ms(self) -> int:
        v = self.values
        return v["log.roll.ms"] if v["log.roll.ms"] is not None else v["log.roll.hours"] * 3_600_000

    @property
    def roll_jitter_ms(self) -> int:
        v = self.values
        return v["log.roll.jitter.ms"] if v["log.roll.jitter.ms"] is not None else v["log.roll.jitter.hours"] * 3_600_000

    def topic_defaults(self) -> dict[str, str]:
        """The broker-level defaults of topic configs, under the topic-level key names."""
        v = self.values
        return {
            "segment.bytes": str(v["log.segment.bytes"]),
            "segment.ms": str(self.roll_ms),
            "segment.jitter.ms": str(self.roll_jitter_ms),
            "segment.index.bytes": str(v["log.index.size.max.bytes"]),
            "index.interval.bytes": str(v["log.index.interval.bytes"]),
            "retention.ms": str(self.retention_ms),
            "retention.bytes": str(v["log.retention.bytes"]),
            "file.delete.delay.ms": str(v["log.segment.delete.delay.ms"]),
            "flush.messages": str(v["log.flush.interval.messages"]),
            "flush.ms": str(v["log.flush.interval.ms"] if v["log.flush.interval.ms"] is not None else LONG_MAX),
            "max.message.bytes": str(v["message.max.bytes"]),
            "message.timestamp.type": v["log.message.timestamp.type"],
            "cleanup.policy": ",".join(v["log.cleanup.policy"]),
            "min.insync.replicas": str(v["min.insync.replicas"]),
            "unclean.leader.election.enable": str(v["unclean.leader.election.enable"]).lower(),
            "compression.type": v["compression.type"],
            "preallocate": str(v["log.preallocate"]).lower(),
            "min.cleanable.dirty.ratio": repr(float(v["log.cleaner.min.cleanable.ratio"])),
            "min.compaction.lag.ms": str(v["log.cleaner.min.compaction.lag.ms"]),
            "max.compaction.lag.ms": str(v["log.cleaner.max.compaction.lag.ms"]),
            "delete.retention.ms": str(v["log.cleaner.delete.retention.ms"]),
        }

    def replace(self, **overrides: Any) -> KafkaConfig:
        props = dict(self.originals)
        props.update(overrides)
        return KafkaConfig(props)


def read_properties_file(path: Path) -> dict[str, str]:
    """A server.properties file, refused when it is not one: a binary file (a wrong path, a
    jar, a core dump) or one that sets nothing would otherwise start a broker on defaults that
    the operator never chose."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"Configuration file {path} is not a text properties file: {e}") from None
    if "\x00" in text or any(ord(ch) < 32 and ch not in "\t\n\r\f" for ch in text):
        raise ConfigError(f"Configuration file {path} is not a text properties file (it holds control bytes)")
    try:
        props = read_properties(text)
    except ValueError as e:  # a malformed \uXXXX escape
        raise ConfigError(f"Configuration file {path}: {e}") from None
    if not props:
        raise ConfigError(f"Configuration file {path} sets no properties (it is empty or all comments)")
    return props


def load_config(
    path: Path | None, overrides: Iterable[str] = (), extra: Mapping[str, Any] | None = None,
    warn: Callable[[str], None] | None = None,
) -> KafkaConfig:
    """server.properties, then `key=value` overrides, then typed CLI flags (later wins)."""
    props: dict[str, Any] = {}
    if path is not None:
        props.update(read_properties_file(Path(path)))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--override expects key=value, got {item!r}")
        props[key.strip()] = value.strip()
    for key, value in (extra or {}).items():
        if value is not None:
            props[key] = value
    return KafkaConfig(props, warn=warn)


def reference_markdown() -> str:
    """The configuration reference table for docs/configuration.md."""
    rows = ["| key | type | default | valid values | description |", "|---|---|---|---|---|"]
    for d in DEFINITIONS:
        default = ",".join(d.default) if isinstance(d.default, list) else d.default
        rows.append(f"| `{d.key}` | {d.type} | `{default}` | {d.valid_text} | {d.doc} |")
    return "\n".join(rows)


__all__ = [
    "CONFIGS",
    "DEFINITIONS",
    "ConfigDef",
    "ConfigError",
    "KafkaConfig",
    "Listener",
    "config_def",
    "listener_config",
    "load_config",
    "parse_listener",
    "read_properties",
    "read_properties_file",
    "reference_markdown",
]
