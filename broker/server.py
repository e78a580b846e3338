"""Broker lifecycle: startup, serve, graceful shutdown (uvicorn's `Server.serve()` shape).

Startup binds the listeners first, without accepting yet: a busy port must fail the start before
anything in the log dirs is touched (loading a log dir consumes its clean-shutdown marker, so a
start that failed after loading would make the next one recover as after a crash). Then it loads
the log dirs (recovering after an unclean shutdown), opens the metadata store (the embedded
single-node controller unless `zookeeper.connect` is set), adopts as topics the partition logs the
store does not know (dirs copied from an Apache Kafka broker), creates the ReplicaManager, then the
GroupCoordinator (which reloads groups and offsets from `__consumer_offsets`), and only then
starts accepting, so no client sees a half-loaded broker. A start that cannot succeed (busy port,
unusable or locked log dir, node id mismatch) raises `StartupError`: `run()` logs it as one line
and returns exit code 1.

ZooKeeper mode (`zookeeper.connect` set) starts as Kafka 3.9's KafkaServer does: connect to
ZooKeeper (bounded by `zookeeper.connection.timeout.ms`) and create Kafka's persistent paths, take
the cluster id from /cluster/id (or write a new one), refuse a log dir whose meta.properties names
another cluster ("Invalid cluster.id in: ..."), load the logs and write the cluster id into
meta.properties, start the ReplicaManager (which hosts nothing until the controller's LeaderAndIsr
says so) and the GroupCoordinator with an empty MetadataCache (filled by UpdateMetadata), then
register `/brokers/ids/<id>` -- its czxid is the broker epoch that fences controller requests --,
start the broker's KafkaController (controller.zk.zk_controller: it runs for election, and admin
changes go through it to ZooKeeper) and only then accept connections. A new session after an
expiry registers again (controller.zk.broker_registration) before the controller re-elects.

Shutdown runs in the reverse order: stop accepting, let in-flight requests finish (bounded), close
connections, await the listeners' closing, then flush and checkpoint every log and write the
clean-shutdown marker. A second SIGTERM/SIGINT during shutdown kills the process at once (the
default action is restored after the first), so an operator can always get out of a stuck drain.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import resource
import signal
import socket
import uuid
from typing import Any

import structlog

from broker import loop_audit
from broker.add_partitions_to_txn_manager import AddPartitionsToTxnManager
from broker.apis.registry import load_all
from broker.background import BackgroundTasks
from broker.config import ConfigError, KafkaConfig, security_protocols
from broker.controlled_shutdown import ControlledShutdown
from broker.dynamic_config import ConfigRepository, dynamic_config_handlers
from broker.group import GroupCoordinator
from broker.metadata_cache import MetadataCache
from broker.metrics.loop_busy import LoopBusy
from broker.metrics.request_metrics import RequestMetrics
from broker.network_client import NetworkClient, NetworkClientConfig
from broker.partition_limits import raise_open_files_limit
from broker.quota.quotas import ClientQuotas
from broker.replica_manager import ReplicaManager
from broker.sasl.credential_store import ScramCredentialStore
from broker.sasl.listeners import SaslListeners
from broker.sasl.scram import CredentialCache
from broker.security.authorizer import AclAuthorizer, AclStore, parse_super_users
from broker.tls.handshake import TlsHandshake
from broker.tls.listeners import TlsListeners
from broker.txn.coordinator import TransactionCoordinator, TransactionTimeouts
from broker.txn.markers import TransactionMarkerChannelManager
from broker.txn.state_manager import TransactionStateManager
from controller.image import BrokerEndpoint, BrokerInfo, MetadataImage
from controller.metadata import EmbeddedAclStore, EmbeddedController, EmbeddedScramCredentialStore
from controller.zk.acl_store import ZkAclStore
from controller.zk.broker_registration import ZkBrokerRegistration, advertised_endpoints
from controller.zk.client import ZooKeeperClientError
from controller.zk.config_manager import ZkConfigManager, ZkConfigRepository
from controller.zk.controller import KafkaControllerConfig
from controller.zk.scram_store import ZkScramCredentialStore
from controller.zk.zk_controller import ZkController
from protocol.errors import KafkaProtocolError
from storage.checkpoints import (
    CheckpointFormatError,
    MetaProperties,
    kafka_uuid_str,
    read_meta_properties,
    write_meta_properties,
)
from storage.cleaner.log_cleaner import CleanerConfig, LogCleaner
from storage.cleaner.manager import LogCleanerManager
from storage.log_manager import LogDirError, LogManager, LogsOnDisk

log = structlog.get_logger("odradek.server")

DRAIN_SECONDS = 10.0
# Past zookeeper.session.timeout.ms: ZooKeeper expires a dead session within a tick or two of it.
STALE_REGISTRATION_MARGIN_S = 5.0


class StartupError(Exception):
    """The broker cannot start; the message names the problem, for a one-line log and exit 1."""


class BrokerServer:
    """Owns every long-lived object of a broker process; everything runs on one event loop."""

    def __init__(self, config: KafkaConfig) -> None:
        self.config = config
        self.connections: set[Any] = set()
        self.metrics_exporter: Any = None  # broker/metrics/exporter.py when metrics.port is set
        self.loop_busy: LoopBusy | None = None  # sampled once a second while metrics are served
        # request counts and phase times: only when served (metrics.port), to cost nothing otherwise
        self.request_metrics: RequestMetrics | None = RequestMetrics() if config["metrics.port"] else None
        self.servers: list[asyncio.base_events.Server] = []
        self.tasks = BackgroundTasks()
        self.started = asyncio.Event()
        self.should_exit = asyncio.Event()
        self.log_manager: LogManager | None = None
        self.controller: EmbeddedController | ZkController | None = None
        self.controller_channel: NetworkClient | None = None  # ZooKeeper mode: to every broker
        self.replica_manager: ReplicaManager | None = None
        self.group_coordinator: GroupCoordinator | None = None
        self.transaction_coordinator: TransactionCoordinator | None = None
        self.txn_marker_channel_manager: TransactionMarkerChannelManager | None = None
        self.log_cleaner: LogCleaner | None = None
        self.tls: TlsListeners | None = None  # SSL listeners' contexts; built by bind_listeners
        self.sasl: SaslListeners | None = None  # SASL listeners' mechanisms; built by bind_listeners
        # SCRAM users (ZooKeeper mode: /config/users/<user>, kept by the users config handler; a
        # single node: its metadata file) and where the KIP-554 APIs read and write them
        self.scram_credentials = CredentialCache()
        self.scram_store: ScramCredentialStore | None = None
        self.zk_registration: ZkBrokerRegistration | None = None
        self.config_manager: ZkConfigManager | None = None  # ZooKeeper mode: applies /config overrides
        self.config_repository: ConfigRepository | None = None  # ZooKeeper mode: reads them
        self.authorizer: AclAuthorizer | None = None  # authorizer.class.name set: every request checked
        self.acl_store: ZkAclStore | None = None  # ZooKeeper mode with an authorizer: /kafka-acl
        # client quotas (broker/quota): configs from ZooKeeper's /config/users and /config/clients
        # or the single node's metadata store, and the sampled rates they bound
        self.quotas = ClientQuotas(config["quota.window.num"], config["quota.window.size.seconds"],
                                   config["controller.quota.window.num"],
                                   config["controller.quota.window.size.seconds"])
        self._zk_closed = False
        self.metadata_cache: MetadataCache = MetadataCache(MetadataImage(cluster_id="", controller_id=-1))
        self.started_callbacks: list[Any] = []  # run once serving (tests: broker.loop_audit)
        self.stopping_callbacks: list[Any] = []  # run when shutdown begins

    # -- lifecycle ----------------------------------------------------------------------------

    @property
    def zk_mode(self) -> bool:
        """ZooKeeper mode (`zookeeper.connect` set): a broker of a cluster, told by the elected
        controller what to host; otherwise the single node is its own controller."""
        return bool(self.config["zookeeper.connect"])

    @property
    def broker_epoch(self) -> int:
        """The czxid of this broker's current ZooKeeper registration (-1: single node, or not
        registered yet): controller requests carrying an older one are refused."""
        return self.zk_registration.broker_epoch if self.zk_registration is not None else -1

    async def start_components(self) -> None:
        """Everything but the listeners: logs, metadata, ReplicaManager, GroupCoordinator (which
        reloads `__consumer_offsets`). Unit tests drive a broker this far without sockets."""
        load_all()
        if self.zk_mode:
            await self._start_zk_components()
            return
        cfg = self.config
        adv = cfg.advertised_listeners[0]
        host = adv.host or socket.getfqdn()
        loop = asyncio.get_running_loop()
        self.log_manager = await self._load_logs()
        self.controller = EmbeddedController(
            cfg.log_dirs[0], BrokerInfo(cfg.broker_id, host, adv.port, listener=adv.name, endpoints=tuple(
                BrokerEndpoint(a.name, a.host or host, a.port, cfg.security_protocols.get(a.name, "PLAINTEXT"))
                for a in cfg.advertised_listeners)),
            cfg["cluster.id"] or self.log_manager.stored_cluster_id,  # for a new store: keep Kafka's id
        )
        self.metadata_cache = MetadataCache(self.controller.image)
        for entity, quota_config in self.controller.client_quotas.items():
            self.quotas.update(entity, quota_config)
        store = EmbeddedScramCredentialStore(self.controller, self.scram_credentials)
        store.load()
        self.scram_store = store
        self._adopt_topics(await loop.run_in_executor(None, self.log_manager.topics_on_disk))
        self.controller.reserve_producer_ids_through(self.log_manager.max_producer_id())
        if cfg["authorizer.class.name"]:
            self.authorizer = self._make_authorizer(EmbeddedAclStore(self.controller))
            await self.authorizer.load()
        self.log_cleaner = self._make_log_cleaner(self.log_manager)
        self.replica_manager = ReplicaManager(self, self._inter_broker_client_factory())
        self.controller.add_listener(self.replica_manager.on_metadata_change)
        await self.replica_manager.startup()
        self.group_coordinator = GroupCoordinator(self)
        await self.group_coordinator.startup()  # loads __consumer_offsets before clients connect
        await self._start_transaction_coordinator()  # loads __transaction_state likewise

    async def _load_logs(self) -> LogManager:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(None, self._open_log_manager)
        except (LogDirError, OSError) as e:
            hint = ""
            if isinstance(e, OSError) and e.errno == errno.EMFILE:
                soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
                hint = (f" (loading the logs needs about one open file per partition; the limit is "
                        f"{soft}, hard {hard}: raise it with ulimit -n and start again)")
            raise StartupError(f"{e}{hint}") from e

    async def _start_zk_components(self) -> None:
        """ZooKeeper mode, KafkaServer.startup's order: ZooKeeper session and persistent paths,
        cluster id, meta.properties checked against it (before any log is loaded), logs, the
        ReplicaManager and GroupCoordinator on an empty MetadataCache. Registration follows in
        `startup`, once the listeners are bound (a port 0 listener registers its real port)."""
        cfg = self.config
        try:
            self.zk_registration = await ZkBrokerRegistration.connect(
                cfg["zookeeper.connect"], cfg.broker_id,
                session_timeout_ms=cfg["zookeeper.session.timeout.ms"],
                connection_timeout_ms=cfg["zookeeper.connection.timeout.ms"])
            cluster_id = await self.zk_registration.get_or_generate_cluster_id()
        except ZooKeeperClientError as e:
            raise StartupError(f"{e} (zookeeper.connect={cfg['zookeeper.connect']})") from e
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._check_stored_cluster_id, cluster_id)
        self.log_manager = await self._load_logs()
        await loop.run_in_executor(None, self._store_cluster_id, cluster_id)
        self.metadata_cache = MetadataCache(MetadataImage(cluster_id=cluster_id, controller_id=-1))
        self.log_cleaner = self._make_log_cleaner(self.log_manager)
        self.replica_manager = ReplicaManager(self, self._inter_broker_client_factory())
        kafka_zk = self.zk_registration.kafka_zk
        self.scram_store = ZkScramCredentialStore(kafka_zk)
        # /config overrides applied now and at every change (the logs LeaderAndIsr creates take
        # their topic's /config/topics/<t> through the topic handler)
        self.config_repository = ZkConfigRepository(kafka_zk)
        self.config_manager = ZkConfigManager(kafka_zk, dynamic_config_handlers(
            cfg, self.metadata_cache, self.replica_manager, self.config_repository, self.quotas,
            (self.tls.reconfigure,) if self.tls is not None else (), self.scram_credentials))
        try:
            await self.config_manager.startup()
        except ZooKeeperClientError as e:
            raise StartupError(f"Reading the config overrides from ZooKeeper failed: {e}") from e
        if cfg["authorizer.class.name"]:
            self.acl_store = ZkAclStore(kafka_zk)
            self.authorizer = self._make_authorizer(self.acl_store)
            try:
                await self.acl_store.start(self.authorizer)
            except ZooKeeperClientError as e:
                raise StartupError(f"Reading the ACLs from ZooKeeper failed: {e}") from e
        self.controller_channel = NetworkClient(NetworkClientConfig(
            client_id=str(cfg.broker_id), ssl_context=self.client_ssl_context(self.inter_broker_listener_name),
            sasl=cfg.inter_broker_sasl))
        self.controller = ZkController(
            kafka_zk, cfg.broker_id, self.controller_channel, lambda: self.metadata_cache.image,
            config=KafkaControllerConfig(
                cfg.broker_id,
                inter_broker_listener_name=self.inter_broker_listener_name,
                delete_topic_enable=cfg["delete.topic.enable"],
                unclean_leader_election_enable=cfg["unclean.leader.election.enable"],
                request_timeout_ms=cfg["request.timeout.ms"]),
            commit_timeout_ms=cfg["request.timeout.ms"])
        self.metadata_cache.listeners.append(self.controller.metadata_updated)  # after each UpdateMetadata
        await self.replica_manager.startup()
        self.group_coordinator = GroupCoordinator(self)
        await self.group_coordinator.startup()
        await self._start_transaction_coordinator()

    def _make_authorizer(self, store: AclStore) -> AclAuthorizer:
        """AclAuthorizer.configure: `super.users` and `allow.everyone.if.no.acl.found`."""
        cfg = self.config
        try:
            super_users = parse_super_users(cfg["super.users"])
        except ValueError as e:
            raise StartupError(f"super.users: {e}") from e
        return AclAuthorizer(super_users=super_users,
                             allow_everyone_if_no_acl_found=cfg["allow.everyone.if.no.acl.found"], store=store)

    async def _start_transaction_coordinator(self) -> None:
        """The TransactionCoordinator on its state manager (`__transaction_state`), with producer
        ids from the controller's blocks, durable before one is handed out."""
        controller = self.controller
        assert controller is not None and self.replica_manager is not None

        async def allocate_producer_id() -> int:
            producer_id = await controller.allocate_producer_id()
            await controller.committed()  # a StorageError is the client's KAFKA_STORAGE_ERROR
            return producer_id

        state_manager = TransactionStateManager(
            self.config, replica_manager=self.replica_manager, metadata_cache=self.metadata_cache,
            controller=controller, spawn=self._spawn, elections=self.zk_mode)
        # the markers go to each partition's leader over the network, this broker included (as
        # Kafka); a single node reaches itself on its inter-broker listener (KafkaConfig: its
        # first advertised one when the named one is not advertised), with its TLS and SASL
        cfg = self.config
        listener = self.inter_broker_listener_name

        def client(name: str) -> NetworkClient:
            """A client of the other brokers on `listener`: TLS when that listener is SSL, SASL
            when the inter-broker protocol is."""
            return NetworkClient(NetworkClientConfig(client_id=f"broker-{cfg.broker_id}-{name}",
                                                     request_timeout_ms=cfg["request.timeout.ms"],
                                                     ssl_context=self.client_ssl_context(listener),
                                                     sasl=cfg.inter_broker_sasl))

        markers = self.txn_marker_channel_manager = TransactionMarkerChannelManager(
            state_manager, self.metadata_cache, client("txn-marker-sender"), inter_broker_listener=listener,
            request_timeout_ms=cfg["request.timeout.ms"], spawn=self._spawn)
        # KIP-890: this broker as partition leader asks the coordinators over the same listener
        self.replica_manager.add_partitions_to_txn_manager = AddPartitionsToTxnManager(
            self.metadata_cache, client("add-partitions-to-txn-sender"), state_manager.partition_for,
            inter_broker_listener=listener, request_timeout_ms=cfg["request.timeout.ms"], spawn=self._spawn)
        self.transaction_coordinator = TransactionCoordinator(
            state_manager, allocate_producer_id, send_markers=markers.add_txn_markers_to_send,
            timeouts=TransactionTimeouts.from_config(cfg), spawn=self._spawn)
        replayed = await state_manager.startup(self.replica_manager.leadership_listeners)
        log.info("loaded transaction metadata", records=replayed)

    def _check_stored_cluster_id(self, cluster_id: str) -> None:
        """Kafka's MetaPropertiesEnsemble.verify: a log dir that belonged to another cluster
        refuses the start, before anything in it is touched."""
        for d in self.config.log_dirs:
            path = d / "meta.properties"
            try:
                stored = read_meta_properties(path).cluster_id
            except FileNotFoundError:
                continue
            except (CheckpointFormatError, OSError) as e:
                raise StartupError(str(e)) from e
            if stored is not None and stored != cluster_id:
                raise StartupError(f"Invalid cluster.id in: {path}. Expected {cluster_id}, but read {stored}")

    def _store_cluster_id(self, cluster_id: str) -> None:
        """Write the cluster id into every meta.properties without one (a ZooKeeper-mode Kafka
        writes version 0 with broker.id and cluster.id)."""
        for d in self.config.log_dirs:
            path = d / "meta.properties"
            meta = read_meta_properties(path)
            if meta.cluster_id is None:
                write_meta_properties(path, MetaProperties(version=meta.version, cluster_id=cluster_id,
                                                           node_id=meta.node_id, directory_id=meta.directory_id))

    async def _register_in_zookeeper(self) -> None:
        """/brokers/ids/<id> with the advertised endpoints (after the listeners are bound, so a
        port 0 listener registers the port it got); the czxid becomes the broker epoch."""
        assert self.zk_registration is not None
        cfg = self.config
        ports = {lst.name: srv.sockets[0].getsockname()[1] for lst, srv in zip(cfg.listeners, self.servers, strict=True)}
        endpoints = advertised_endpoints(
            [(a.name, a.host, a.port) for a in cfg.advertised_listeners],
            security_protocols(cfg.originals.get("listener.security.protocol.map")),
            lambda name: ports.get(name, 0))
        info = self.zk_registration.make_broker_info(endpoints, cfg["broker.rack"])
        try:
            await self.zk_registration.check_endpoints_free(info)
            # a registration of this id by an earlier session lasts at most its session timeout
            stale_wait_s = cfg["zookeeper.session.timeout.ms"] / 1000 + STALE_REGISTRATION_MARGIN_S
            await self.zk_registration.register_at_startup(stale_wait_s)
        except ValueError as e:
            raise StartupError(str(e)) from e
        except ZooKeeperClientError as e:
            raise StartupError(f"Registering broker {cfg.broker_id} in ZooKeeper failed: {e}") from e
        if isinstance(self.controller, ZkController):
            self.controller.startup()  # registered first: a controller elected here knows this broker

    async def _shutdown_zk_controller(self) -> None:
        """Stop the broker's KafkaController (resigning if elected) and its channel."""
        if isinstance(self.controller, ZkController):
            # bounded: an event waiting for an unreachable ZooKeeper would hold it up (the session
            # closed next fails what is left)
            try:
                await asyncio.wait_for(self.controller.shutdown(), DRAIN_SECONDS)
            except TimeoutError:
                log.warning("the controller did not stop in time (ZooKeeper unreachable?): closing the session",
                            timeout_s=DRAIN_SECONDS, zookeeper_connected=self.zk_registration is not None
                            and self.zk_registration.zk.connected)
            except Exception:
                log.exception("stopping the controller failed")
        if self.controller_channel is not None:
            await self.controller_channel.close()

    async def _close_zookeeper(self) -> None:
        """End the ZooKeeper session once (the registration goes with it)."""
        if self.zk_registration is not None and not self._zk_closed:
            self._zk_closed = True
            if self.config_manager is not None:
                await self.config_manager.shutdown()
            try:
                await self.zk_registration.close()
            except Exception:
                log.exception("closing the ZooKeeper session failed")

    async def bind_listeners(self) -> None:
        """Bind every listener without accepting (connections are refused until
        `start_serving`); a failure closes the ones already bound and raises StartupError."""
        loop = asyncio.get_running_loop()
        from broker.network import KafkaConnection

        if self.tls is None:
            try:  # reading the stores is file I/O; a bad one refuses the start, naming its key
                self.tls = await loop.run_in_executor(None, TlsListeners, self.config)
            except ConfigError as e:
                raise StartupError(str(e)) from e
        if self.sasl is None:
            try:
                self.sasl = SaslListeners(self.config)
            except ConfigError as e:
                raise StartupError(str(e)) from e
        for listener in self.config.listeners:
            try:
                context = self.tls.server_context(listener.name)
                server = await loop.create_server(
                    # an SSL listener runs the handshake itself, to log a failed one (broker/tls/handshake)
                    (lambda listener=listener: KafkaConnection(self, listener)) if context is None else
                    (lambda listener=listener, context=context: TlsHandshake(
                        KafkaConnection(self, listener), context, listener.name, self.tasks)),
                    host=listener.host or None,
                    port=listener.port,
                    reuse_address=True,
                    backlog=512,
                    start_serving=False,
                )
            except OSError as e:  # Kafka's words: "Socket server failed to bind to host:port: reason."
                await self._close_listeners()
                raise StartupError(
                    f"Socket server failed to bind to {listener.host or '0.0.0.0'}:{listener.port} "
                    f"(listener {listener}): {e.strerror or e}"
                ) from e
            self.servers.append(server)

    async def _close_listeners(self) -> None:
        for server in self.servers:
            server.close()
        for server in self.servers:
            await server.wait_closed()

    async def startup(self) -> None:
        await self.bind_listeners()
        try:
            await self.start_components()
            if self.zk_registration is not None:
                await self._register_in_zookeeper()
        except BaseException:
            await self._close_listeners()
            await self._shutdown_zk_controller()
            await self._close_zookeeper()
            raise
        cfg = self.config
        for listener, server in zip(cfg.listeners, self.servers, strict=True):
            await server.start_serving()
            for sock in server.sockets:
                log.info("listening", listener=listener.name, address=str(sock.getsockname()))
        self._spawn(self._reap_idle_connections())
        if cfg["metrics.port"]:
            self._start_metrics()
        if self.log_cleaner is not None:
            self.log_cleaner.startup()
        lm = self.log_manager
        self._spawn(self.tasks.every(cfg["log.retention.check.interval.ms"], self.replica_manager.cleanup_logs, "retention"))
        self._spawn(self.tasks.every(1000, lm.flush_dirty_logs, "flush"))
        self._spawn(self.tasks.every(cfg["log.flush.offset.checkpoint.interval.ms"], lm.checkpoint_recovery_points, "recovery-point checkpoint"))
        self._spawn(self.tasks.every(cfg["log.flush.start.offset.checkpoint.interval.ms"], lm.checkpoint_log_start_offsets, "log-start-offset checkpoint"))
        self._spawn(self.tasks.every(5000, lm.checkpoint_high_watermarks, "high-watermark checkpoint"))
        # deleted logs' renamed directories, file.delete.delay.ms after their deletion
        self._spawn(self.tasks.rescheduled(lm.delete_logs, "delete-logs",
                                           lambda: lm.default_config.file_delete_delay_ms))
        self.started.set()
        for callback in self.started_callbacks:
            callback()
        log.info(
            "broker started",
            broker_id=cfg.broker_id,
            cluster_id=self.metadata_cache.cluster_id,
            log_dirs=[str(d) for d in cfg.log_dirs],
            topics=len(self.metadata_cache.topics),
            **({"zookeeper": cfg["zookeeper.connect"], "broker_epoch": self.broker_epoch} if self.zk_mode else {}),
        )

    def _start_metrics(self) -> None:
        """/metrics on metrics.host:metrics.port (broker/metrics/exporter.py); a port in use
        stops the start as a listener's would."""
        from broker.metrics.exporter import MetricsExporter  # prometheus-client only when enabled

        exporter = MetricsExporter(self)
        try:
            exporter.start(self.config["metrics.host"], self.config["metrics.port"])
        except OSError as e:
            raise StartupError(f"cannot serve metrics on {self.config['metrics.host']}:{self.config['metrics.port']}: {e}") from e
        self.metrics_exporter = exporter
        busy = self.loop_busy = LoopBusy()
        self._spawn(self.tasks.every(1000, busy.sample, "event-loop busy ratio"))
        log.info("serving metrics", address=f"{self.config['metrics.host']}:{exporter.port}", path="/metrics")

    def _open_log_manager(self) -> LogManager:
        return LogManager.open(self.config)

    def _make_log_cleaner(self, lm: LogManager) -> LogCleaner | None:
        """The log cleaner (log.cleaner.enable), started with the listeners; the LogManager
        stops its cleaning of a log before deleting it."""
        cfg = self.config
        if not cfg["log.cleaner.enable"] or cfg["log.cleaner.threads"] == 0:
            return None
        manager = LogCleanerManager(lambda: lm, lm.cleaner_offsets, lm.checkpoint_cleaner_offset_of)
        cleaner = LogCleaner(CleanerConfig(
            num_threads=cfg["log.cleaner.threads"],
            dedupe_buffer_size=cfg["log.cleaner.dedupe.buffer.size"],
            dedupe_buffer_load_factor=cfg["log.cleaner.io.buffer.load.factor"],
            io_buffer_size=cfg["log.cleaner.io.buffer.size"],
            max_io_bytes_per_second=cfg["log.cleaner.io.max.bytes.per.second"],
            backoff_ms=cfg["log.cleaner.backoff.ms"],
        ), manager)
        lm.cleaner = cleaner
        return cleaner

    def _adopt_topics(self, on_disk: dict[str, LogsOnDisk]) -> None:
        """Partition logs whose topic the metadata store does not know become topics, under the
        topic id their `partition.metadata` names (a new one when they have none), with one
        partition per log up to the highest found: this is how partition dirs copied from an
        Apache Kafka broker are migrated. (Kafka itself would call them stray logs; here every
        log a topic delete leaves behind is gone before the delete returns, so a log without a
        topic can only have been put there.) Logs whose files disagree on the topic id are left
        unserved, with an error."""
        assert self.controller is not None
        for name, (partitions, ids, latest_epochs) in sorted(on_disk.items()):
            if name in self.controller.image.topics:
                continue
            if len(ids) > 1:
                log.error("not adopting logs found on disk: their partition.metadata files name different topic ids",
                          topic=name, topic_ids=sorted(kafka_uuid_str(i) for i in ids))
                continue
            topic_id = next(iter(ids)) if ids else uuid.uuid4()
            count = max(partitions) + 1
            try:
                self.controller.adopt_topic(name, topic_id, count, latest_epochs)
            except KafkaProtocolError as e:
                log.error("not adopting logs found on disk", topic=name, error=e.message)
                continue
            log.warning("adopted topic from logs found on disk", topic=name, topic_id=kafka_uuid_str(topic_id),
                        partitions=count, created_empty=sorted(set(range(count)) - partitions),
                        leader_epochs={p: e + 1 for p, e in sorted(latest_epochs.items())})

    async def serve(self) -> None:
        await self.startup()
        await self.should_exit.wait()
        await self.shutdown()

    async def shutdown(self) -> None:
        log.info("shutting down")
        await self._controlled_shutdown()  # still serving: the controller's requests reach us
        for callback in self.stopping_callbacks:
            callback()
        for server in self.servers:
            server.close()
        if self.group_coordinator is not None:
            self.group_coordinator.fail_pending_requests()  # parked joins would hold up draining
        loop = asyncio.get_running_loop()
        deadline = loop.time() + DRAIN_SECONDS  # handlers and sending share one bound
        for conn in list(self.connections):
            conn.drain()
        pending = [f for c in list(self.connections) for f in c.pending]
        if pending:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), DRAIN_SECONDS)
        # finished responses (a fetch streamed from its file) go out before their connection closes
        unsent = [c.wait_sent() for c in list(self.connections)]
        if unsent:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.gather(*unsent), max(0.0, deadline - loop.time()))
        for conn in list(self.connections):
            conn.close()
        with contextlib.suppress(asyncio.TimeoutError):  # wait_closed waits for the connections too
            await asyncio.wait_for(self._close_listeners(), DRAIN_SECONDS)
        log.info("listeners closed")
        if self.metrics_exporter is not None:
            await loop.run_in_executor(None, self.metrics_exporter.stop)
        await self.tasks.cancel_all()
        if self.group_coordinator is not None:
            await self.group_coordinator.shutdown()
        if self.txn_marker_channel_manager is not None:
            await self.txn_marker_channel_manager.shutdown()
        if self.replica_manager is not None and self.replica_manager.add_partitions_to_txn_manager is not None:
            await self.replica_manager.add_partitions_to_txn_manager.shutdown()
        if self.transaction_coordinator is not None:
            await self.transaction_coordinator.state_manager.shutdown()
        if self.controller is not None:  # metadata writes still queued land before the marker
            try:
                await self.controller.committed()
            except Exception:
                log.exception("metadata store write failed during shutdown")
        if self.acl_store is not None:
            await self.acl_store.close()
        if self.log_cleaner is not None:  # before the logs close: a cleaning in progress stops
            await loop.run_in_executor(None, self.log_cleaner.shutdown)
        if self.replica_manager is not None:
            await self.replica_manager.shutdown()
        if self.controller is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.controller.close)
        if self.log_manager is not None:
            clean = await asyncio.get_running_loop().run_in_executor(None, self.log_manager.shutdown)
            # as Kafka: the controller stops and the registration goes after the logs are closed
            await self._shutdown_zk_controller()
            await self._close_zookeeper()
            if not clean:  # e.g. a full disk: LogManager logged each step it could not do
                log.warning("shut down, but not cleanly: the next start recovers the logs")
                return
        await self._shutdown_zk_controller()
        await self._close_zookeeper()
        log.info("shut down cleanly")

    async def _controlled_shutdown(self) -> None:
        """ZooKeeper mode (controlled.shutdown.enable): the controller moves this broker's
        leaderships away before the listeners close (KafkaServer.shutdown's first step)."""
        cfg = self.config
        if self.zk_registration is None or not self.started.is_set() or not cfg["controlled.shutdown.enable"]:
            return
        await ControlledShutdown(
            self.zk_registration.kafka_zk, cfg.broker_id, self.broker_epoch, self.inter_broker_listener_name,
            ssl_context=self.client_ssl_context(self.inter_broker_listener_name), sasl=cfg.inter_broker_sasl,
            max_retries=cfg["controlled.shutdown.max.retries"],
            retry_backoff_ms=cfg["controlled.shutdown.retry.backoff.ms"],
            request_timeout_ms=cfg["request.timeout.ms"]).run()

    @property
    def inter_broker_listener_name(self) -> str:
        return self.config.inter_broker_listener_name

    def client_ssl_context(self, listener: str) -> Any:
        """The SSLContext of the broker's own connections to other brokers' `listener` (None:
        a PLAINTEXT listener, or no listeners bound: unit tests that start components only)."""
        return None if self.tls is None else self.tls.client_context(listener)

    def _inter_broker_client_factory(self) -> Any:
        """The ReplicaManager's connections to other brokers (fetchers, AlterPartition): over
        TLS when the inter-broker listener is SSL."""
        ssl_context = self.client_ssl_context(self.inter_broker_listener_name)
        sasl = self.config.inter_broker_sasl
        return lambda config: NetworkClient(dataclasses.replace(config, ssl_context=ssl_context, sasl=sasl))

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        return self.tasks.spawn(coro)

    async def _reap_idle_connections(self) -> None:
        idle_ms = self.config["connections.max.idle.ms"]
        if idle_ms < 0:
            return
        period = max(0.05, min(idle_ms / 1000 / 4, 30.0))
        while True:
            await asyncio.sleep(period)
            for conn in list(self.connections):
                if conn.idle_seconds * 1000 > idle_ms:
                    log.info("closing idle connection", peer=conn.peer, idle_ms=int(conn.idle_seconds * 1000))
                    conn.close()

    @property
    def bound_port(self) -> int:
        return self.servers[0].sockets[0].getsockname()[1]


def _install_loop() -> None:
    """uvloop when installed, asyncio otherwise (uvicorn's loops/auto.py)."""
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def run(config: KafkaConfig) -> int:
    """Run a broker until SIGTERM/SIGINT; returns the process exit code (1, after one log line,
    when it cannot start)."""
    _install_loop()
    was, soft, hard = raise_open_files_limit()  # every segment keeps files open, as Kafka's
    log.info("open files limit (ulimit -n)", soft=soft, raised_from=was if was != soft else None, hard=hard)

    async def main() -> None:
        server = BrokerServer(config)
        loop = asyncio.get_running_loop()

        def on_signal(sig: signal.Signals) -> None:
            """First signal: graceful shutdown. The default action comes back for both signals,
            so a second one ends the process even if the loop is stuck."""
            for s in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(s)
                signal.signal(s, signal.SIG_DFL)
            log.info("signal received: shutting down; a second SIGTERM/SIGINT forces exit", signal=sig.name)
            server.should_exit.set()

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
        if loop_audit.enabled():  # tests: report blocking file syscalls on this thread
            loop_audit.install()
            server.started_callbacks.append(loop_audit.arm)
            server.stopping_callbacks.append(loop_audit.disarm)
        await server.serve()

    try:
        asyncio.run(main())
    except StartupError as e:
        log.critical("fatal error during broker startup, exiting", error=str(e))
        return 1
    return 0
