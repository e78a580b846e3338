"""The ZooKeeper session, on the event loop: kazoo's client bridged into asyncio, shaped like Kafka's
`kafka.zookeeper.ZooKeeperClient` (handlers registered by path, state change handlers re-run after
a new session).

Why kazoo: it is the maintained, complete Python ZooKeeper client (multi/transactions, chroot,
session handling, SASL), tested against ZooKeeper 3.4-3.9; it runs its own I/O thread, so nothing
here blocks the loop. Every kazoo result and callback crosses into the loop with
`loop.call_soon_threadsafe` -- an operation is an awaitable future, a watch or a session change is
a callback run on the loop, in the order kazoo delivered them.

What this layer adds to kazoo, because Kafka's controller relies on it:
  * Kafka's watch model. A read with `watch=True` arms a ZooKeeper watch; when it fires, the
    handler registered for that path at that moment runs (`ZNodeChangeHandler.handle_creation /
    handle_deletion / handle_data_change`, `ZNodeChildChangeHandler.handle_child_change`). Watches
    are one-shot, as in ZooKeeper: a handler re-reads with `watch=True` to keep watching.
  * Watches survive a dropped connection. The Java client re-sends its watches on reconnect
    (SetWatches) and the server fires those whose znode changed meanwhile; kazoo instead drops
    them when the connection drops. So the watches armed when the connection dropped are re-armed
    on reconnect (same session) and their handlers run if the znode changed since it was read
    (by its mzxid / pzxid / existence) -- no change is missed, none is reported twice.
  * Sessions. `ZkState` changes (CONNECTED, SUSPENDED = connection lost but session maybe alive,
    LOST = session expired) go to state listeners; on expiry every `StateChangeHandler` gets
    `before_initializing_session()`, and once kazoo has a new session `after_initializing_session()`
    (where Kafka's broker re-registers and its controller re-elects). These run one event at a
    time, awaited when they return awaitables, so "before" always finishes before "after" starts.
    An expired session's watches are gone: re-arming is the after-handlers' work, as in Kafka.
  * Chroot: `host:port[,host:port]/chroot`, as Kafka's `zookeeper.connect`; `start()` can create
    the chroot first (Kafka's createChrootIfNecessary).
  * Errors as our own exceptions named after ZooKeeper's codes (`NoNodeError`, `BadVersionError`
    for a failed compare-and-set, ...), so callers never import kazoo.
  * Null data: `create(path, None)` stores null (length -1), as Kafka does for container znodes;
    kazoo's own `makepath` would create parents with b"".

Ordering caveat: kazoo completes operations and delivers watch events on two different threads, so
a watch event and the answer of a read issued before it may reach the loop in either order.
Handlers therefore re-read state (as Kafka's do) rather than trust an event's timing.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from kazoo import exceptions as kz
from kazoo.client import KazooClient
from kazoo.protocol.serialization import Create
from kazoo.protocol.states import EventType, KazooState, WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry
from kazoo.security import OPEN_ACL_UNSAFE

log = logging.getLogger(__name__)
T = TypeVar("T")

# How long close() waits for the session to end. Ending it is one request; with the server gone or
# paused it cannot be answered, and ZooKeeper expires the session (its ephemeral znodes with it)
# after the session timeout anyway, so a stopping process does not wait for it (issue #21 §2).
CLOSE_TIMEOUT_S = 5.0


# ---------------------------------------------------------------------------------------------
# errors


class ZooKeeperClientError(Exception):
    """A failed ZooKeeper operation; `code` is ZooKeeper's KeeperException.Code name."""

    code = "SYSTEMERROR"

    def __init__(self, message: str = "", path: str | None = None) -> None:
        self.path = path
        suffix = f" for {path}" if path else ""
        super().__init__(message or f"KeeperErrorCode = {self.code}{suffix}")


class NoNodeError(ZooKeeperClientError):
    code = "NONODE"


class NodeExistsError(ZooKeeperClientError):
    code = "NODEEXISTS"


class BadVersionError(ZooKeeperClientError):
    """A compare-and-set (set/delete/check with an expected version) lost: the znode's version
    was not the expected one."""

    code = "BADVERSION"


class NotEmptyError(ZooKeeperClientError):
    code = "NOTEMPTY"


class ConnectionLossError(ZooKeeperClientError):
    """The connection dropped before the answer came: the operation may or may not have been
    applied. The session may still be alive (kazoo is reconnecting)."""

    code = "CONNECTIONLOSS"


class SessionExpiredError(ZooKeeperClientError):
    code = "SESSIONEXPIRED"


class RolledBackError(ZooKeeperClientError):
    """An operation of a failed multi that was not itself the failure (ZooKeeper code OK inside
    a failed transaction; Kafka sees RUNTIMEINCONSISTENCY for those after the failing one)."""

    code = "ROLLEDBACK"


class NoAuthError(ZooKeeperClientError):
    code = "NOAUTH"


class ZooKeeperClientTimeoutError(ZooKeeperClientError):
    """Kafka's ZooKeeperClientTimeoutException: no connection within the allowed time."""

    code = "TIMEOUT"


class ZooKeeperClientClosedError(ZooKeeperClientError):
    code = "CLOSED"


_ERRORS: list[tuple[type[Exception], type[ZooKeeperClientError]]] = [
    (kz.NoNodeError, NoNodeError),
    (kz.NodeExistsError, NodeExistsError),
    (kz.BadVersionError, BadVersionError),
    (kz.NotEmptyError, NotEmptyError),
    (kz.ConnectionClosedError, ZooKeeperClientClosedError),  # before SessionExpiredError: a subclass
    (kz.SessionExpiredError, SessionExpiredError),
    (kz.ConnectionLoss, ConnectionLossError),
    (kz.ConnectionDropped, ConnectionLossError),
    (kz.RolledBackError, RolledBackError),
    (kz.RuntimeInconsistency, RolledBackError),
    (kz.NoAuthError, NoAuthError),
]


def _translate(exc: BaseException, path: str | None) -> BaseException:
    for kazoo_type, ours in _ERRORS:
        if isinstance(exc, kazoo_type):
            return ours(path=path)
    if isinstance(exc, kz.ZookeeperError):
        err = ZooKeeperClientError(f"{type(exc).__name__}: {exc}", path)
        return err
    return exc


# ---------------------------------------------------------------------------------------------
# values


class ZkState(enum.Enum):
    """The session as a client sees it (kazoo's KazooState)."""

    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"  # connection lost, the session may still be alive
    LOST = "LOST"  # session expired (or the client closed)


@dataclass(frozen=True)
class Stat:
    """ZooKeeper's Stat of a znode. `czxid` of a broker's registration is its broker epoch;
    `version` is what compare-and-set compares; `ephemeral_owner` the owning session (0: none)."""

    czxid: int
    mzxid: int
    ctime: int
    mtime: int
    version: int
    cversion: int
    aversion: int
    ephemeral_owner: int
    data_length: int
    num_children: int
    pzxid: int

    @staticmethod
    def of(s: ZnodeStat) -> Stat:
        return Stat(s.czxid, s.mzxid, s.ctime, s.mtime, s.version, s.cversion, s.aversion,
                    s.ephemeralOwner, s.dataLength, s.numChildren, s.pzxid)


@dataclass(frozen=True)
class CreateOp:
    path: str
    data: bytes | None = None
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True)
class SetDataOp:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True)
class DeleteOp:
    path: str
    version: int = -1


@dataclass(frozen=True)
class CheckOp:
    path: str
    version: int


Op = CreateOp | SetDataOp | DeleteOp | CheckOp


@dataclass(frozen=True)
class MultiResult:
    """The outcome of a multi: one entry per op, in order -- the created path (create), the new
    Stat (set), True (delete/check), or the op's error. If any op failed, none was applied: the
    failing op holds its real error and the others RolledBackError."""

    results: tuple[Any, ...]

    @property
    def ok(self) -> bool:
        return not any(isinstance(r, ZooKeeperClientError) for r in self.results)

    @property
    def error(self) -> ZooKeeperClientError | None:
        """The error that failed the multi (the first that is not RolledBackError)."""
        errors = [r for r in self.results if isinstance(r, ZooKeeperClientError)]
        real = [e for e in errors if not isinstance(e, RolledBackError)]
        return (real or errors or [None])[0]


class ZNodeChangeHandler(Protocol):
    """Kafka's ZNodeChangeHandler: told when the znode at `path` is created, deleted or changed
    (after a read of it with watch=True). Runs on the loop and must not block: enqueue work."""

    path: str

    def handle_creation(self) -> None: ...

    def handle_deletion(self) -> None: ...

    def handle_data_change(self) -> None: ...


class NodeHandler:
    """A ZNodeChangeHandler made of callbacks (each optional), for a watch of one znode."""

    def __init__(self, path: str, *, on_create: Callable[[], None] | None = None,
                 on_delete: Callable[[], None] | None = None, on_change: Callable[[], None] | None = None) -> None:
        self.path = path
        self._on_create, self._on_delete, self._on_change = on_create, on_delete, on_change

    def handle_creation(self) -> None:
        if self._on_create:
            self._on_create()

    def handle_deletion(self) -> None:
        if self._on_delete:
            self._on_delete()

    def handle_data_change(self) -> None:
        if self._on_change:
            self._on_change()


class ZNodeChildChangeHandler(Protocol):
    """Kafka's ZNodeChildChangeHandler: told when the children of `path` change (after a
    get_children with watch=True)."""

    path: str

    def handle_child_change(self) -> None: ...


class StateChangeHandler(Protocol):
    """Kafka's StateChangeHandler, keyed by `name`: called around a new session after the old one
    expired. May return an awaitable, which is awaited before the next session event -- so
    `before_initializing_session` must not wait for ZooKeeper (the session it would wait for is
    the next event); `after_initializing_session` runs once connected and may use it."""

    name: str

    def before_initializing_session(self) -> Awaitable[None] | None: ...

    def after_initializing_session(self) -> Awaitable[None] | None: ...


def split_chroot(connect_string: str) -> tuple[str, str]:
    """`h1:2181,h2:2181/kafka` -> ("h1:2181,h2:2181", "/kafka"); no chroot -> ""."""
    i = connect_string.find("/")
    if i < 0:
        return connect_string, ""
    chroot = connect_string[i:].rstrip("/")
    return connect_string[:i], chroot


# ---------------------------------------------------------------------------------------------
# the client


class ZooKeeperClient:
    """One ZooKeeper session for one process role (a broker, its controller), on the running loop.

    `session_timeout_ms` is Kafka's `zookeeper.session.timeout.ms` (the server may negotiate it
    into its [min, max] range); `connection_timeout_ms` (`zookeeper.connection.timeout.ms`,
    default: the session timeout) bounds `start()`. `request_timeout_ms`, when set, bounds how
    long `retry_until_connected` waits for a lost connection to come back (Kafka waits forever).
    """

    def __init__(self, connect_string: str, *, session_timeout_ms: int = 18_000,
                 connection_timeout_ms: int | None = None, request_timeout_ms: int | None = None,
                 name: str = "zk") -> None:
        self.connect_string = connect_string
        self.hosts, self.chroot = split_chroot(connect_string)
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms if connection_timeout_ms is not None else session_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kazoo: KazooClient | None = None
        self._state = ZkState.LOST
        self._session_id: int | None = None
        self._closing = False
        self._connected = asyncio.Event()
        self._znode_handlers: dict[str, ZNodeChangeHandler] = {}
        self._child_handlers: dict[str, ZNodeChildChangeHandler] = {}
        self._state_handlers: dict[str, StateChangeHandler] = {}
        self._state_listeners: list[Callable[[ZkState], None]] = []
        # watches armed on the server (path -> the Stat seen when arming, None: did not exist)
        self._armed_data: dict[str, Stat | None] = {}
        self._armed_child: dict[str, Stat | None] = {}
        # watches kazoo dropped with the connection, re-armed on reconnect (same session)
        self._dropped_data: dict[str, Stat | None] = {}
        self._dropped_child: dict[str, Stat | None] = {}
        self._session_events: asyncio.Queue[tuple[ZkState, int | None]] = asyncio.Queue()
        self._session_task: asyncio.Task[None] | None = None

    # --- lifecycle -----------------------------------------------------------------------------

    async def start(self, create_chroot: bool = False) -> ZooKeeperClient:
        """Connect and wait for the session (bounded by the connection timeout), like Kafka's
        `waitUntilConnected(connectionTimeoutMs)`: ZooKeeperClientTimeoutError if it does not come.
        With `create_chroot`, first create the chroot path (null data) through a chroot-less client."""
        if create_chroot and self.chroot:
            await _create_chroot(self.hosts, self.chroot, self.session_timeout_ms, self.connection_timeout_ms)
        self._loop = asyncio.get_running_loop()
        self._kazoo = KazooClient(
            hosts=self.connect_string,
            timeout=self.session_timeout_ms / 1000,
            # reconnect promptly (Kafka's Java client retries within a second); kazoo's default
            # backoff grows to a minute, which would outlive a short ZooKeeper restart
            connection_retry=KazooRetry(max_tries=-1, delay=0.05, backoff=2, max_delay=1.0, max_jitter=0.2),
            logger=logging.getLogger(f"kazoo.client.{self.name}"),
        )
        self._kazoo.add_listener(self._on_kazoo_state)
        self._session_task = asyncio.create_task(self._process_session_events(), name=f"{self.name}-session")
        self._kazoo.start_async()
        try:
            await asyncio.wait_for(self._connected.wait(), self.connection_timeout_ms / 1000)
        except TimeoutError:
            state = self._kazoo.client_state
            await self.close()
            raise ZooKeeperClientTimeoutError(
                f"Timed out waiting for connection while in state: {state}") from None
        return self

    async def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """End the session (its ephemeral znodes go at once) and stop kazoo's threads, waiting at
        most `timeout` seconds: kazoo's stop() waits for the server's answer to the close, which
        an unreachable or paused server never sends. It then goes on in a daemon thread (not the
        loop's executor: the interpreter joins those at exit) and the session expires."""
        self._closing = True
        kazoo_client, self._kazoo = self._kazoo, None
        if kazoo_client is not None:
            stopped = asyncio.get_running_loop().create_future()
            threading.Thread(target=_stop_kazoo, args=(kazoo_client, stopped), daemon=True,
                             name=f"{self.name}-close").start()
            try:
                await asyncio.wait_for(stopped, timeout)
            except TimeoutError:
                log.warning("ZooKeeper did not answer the close of session %s within %.1f s: leaving it to expire",
                            _hex(self._session_id), timeout)
        if self._session_task is not None:
            self._session_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._session_task
            self._session_task = None
        self._state = ZkState.LOST
        self._connected.clear()

    async def __aenter__(self) -> ZooKeeperClient:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def state(self) -> ZkState:
        return self._state

    @property
    def session_id(self) -> int | None:
        """The current session's id (what an ephemeral znode's `ephemeral_owner` names)."""
        return self._session_id

    @property
    def connected(self) -> bool:
        return self._state is ZkState.CONNECTED

    async def wait_until_connected(self, timeout: float | None = None) -> None:
        """Until the session is connected; ZooKeeperClientTimeoutError after `timeout` seconds,
        ZooKeeperClientClosedError if the client is closed."""
        if self._closing:
            raise ZooKeeperClientClosedError("client closed")
        try:
            await asyncio.wait_for(self._connected.wait(), timeout)
        except TimeoutError:
            raise ZooKeeperClientTimeoutError(
                f"Timed out waiting for connection while in state: {self._state.value}") from None

    # --- handlers --------------------------------------------------------------------------------

    def register_znode_change_handler(self, handler: ZNodeChangeHandler) -> None:
        self._znode_handlers[handler.path] = handler

    def unregister_znode_change_handler(self, path: str) -> None:
        self._znode_handlers.pop(path, None)

    def register_znode_child_change_handler(self, handler: ZNodeChildChangeHandler) -> None:
        self._child_handlers[handler.path] = handler

    def unregister_znode_child_change_handler(self, path: str) -> None:
        self._child_handlers.pop(path, None)

    def register_state_change_handler(self, handler: StateChangeHandler) -> None:
        self._state_handlers[handler.name] = handler

    def unregister_state_change_handler(self, name: str) -> None:
        self._state_handlers.pop(name, None)

    def add_state_listener(self, listener: Callable[[ZkState], None]) -> None:
        """`listener(state)` runs on the loop at every change of ZkState, in order."""
        self._state_listeners.append(listener)

    def remove_state_listener(self, listener: Callable[[ZkState], None]) -> None:
        with contextlib.suppress(ValueError):
            self._state_listeners.remove(listener)

    # --- operations ------------------------------------------------------------------------------

    async def get_data(self, path: str, watch: bool = False) -> tuple[bytes | None, Stat]:
        """The znode's data (None: null data) and Stat; NoNodeError if absent. With `watch`, the
        change handler of `path` hears of the next change or deletion."""
        k = self._client()
        data, stat = await self._bridge(k.get_async(path, self._data_watcher if watch else None), path)
        st = Stat.of(stat)
        if watch:
            self._armed_data[path] = st
        return data, st

    async def exists(self, path: str, watch: bool = False) -> Stat | None:
        """The znode's Stat, or None; with `watch`, also hears of its creation."""
        k = self._client()
        stat = await self._bridge(k.exists_async(path, self._data_watcher if watch else None), path)
        st = None if stat is None else Stat.of(stat)
        if watch:
            self._armed_data[path] = st
        return st

    async def get_children(self, path: str, watch: bool = False) -> list[str]:
        """Child names (in ZooKeeper's order); NoNodeError if absent. With `watch`, the child
        handler of `path` hears of the next change of the set of children."""
        k = self._client()
        children, stat = await self._bridge(
            k.get_children_async(path, self._child_watcher if watch else None, include_data=True), path)
        if watch:
            self._armed_child[path] = Stat.of(stat)
        return list(children)

    async def create(self, path: str, data: bytes | None = None, *, ephemeral: bool = False,
                     sequential: bool = False, makepath: bool = False) -> str:
        """Create a znode (null data when `data` is None); returns its path (with the sequence
        suffix for a sequential one). NodeExistsError / NoNodeError (parent missing) unless
        `makepath`, which creates missing parents with null data (Kafka's createRecursive)."""
        k = self._client()
        try:
            return await self._bridge(k.create_async(path, data, ephemeral=ephemeral, sequence=sequential), path)
        except NoNodeError:
            if not makepath:
                raise
        await self._create_parents(_parent(path))
        return await self._bridge(k.create_async(path, data, ephemeral=ephemeral, sequence=sequential), path)

    async def _create_parents(self, path: str) -> None:
        if path in ("", "/"):
            return
        try:
            await self._bridge(self._client().create_async(path, None), path)
        except NodeExistsError:
            return
        except NoNodeError:
            await self._create_parents(_parent(path))
            with contextlib.suppress(NodeExistsError):
                await self._bridge(self._client().create_async(path, None), path)

    async def set_data(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Set the data if the znode's version is `version` (-1: any) and return the new Stat;
        BadVersionError when another writer got there first, NoNodeError if absent."""
        stat = await self._bridge(self._client().set_async(path, data, version), path)
        return Stat.of(stat)

    async def delete(self, path: str, version: int = -1) -> None:
        """Delete the znode if its version is `version` (-1: any); NoNodeError, BadVersionError,
        NotEmptyError (it has children)."""
        await self._bridge(self._client().delete_async(path, version), path)

    async def multi(self, ops: Sequence[Op]) -> MultiResult:
        """All ops atomically (ZooKeeper's multi): all applied, or none and the failing op's error
        in its place. Connection loss raises (the multi may or may not have been applied)."""
        k = self._client()
        tx = k.transaction()
        for op in ops:
            if isinstance(op, CreateOp):
                if op.data is None:
                    # kazoo's builder refuses null data: add the protocol request itself
                    tx.operations.append(Create(k.chroot + op.path, None, k.default_acl or OPEN_ACL_UNSAFE,
                                                int(op.ephemeral) | (int(op.sequential) << 1)))
                else:
                    tx.create(op.path, op.data, ephemeral=op.ephemeral, sequence=op.sequential)
            elif isinstance(op, SetDataOp):
                tx.set_data(op.path, op.data, op.version)
            elif isinstance(op, DeleteOp):
                tx.delete(op.path, op.version)
            else:
                tx.check(op.path, op.version)
        raw = await self._bridge(tx.commit_async(), None)
        results: list[Any] = []
        for op, r in zip(ops, raw, strict=True):
            if isinstance(r, BaseException):
                results.append(_translate(r, op.path))
            elif isinstance(r, ZnodeStat):
                results.append(Stat.of(r))
            else:
                results.append(r)
        return MultiResult(tuple(results))

    async def retry_until_connected(self, op: Callable[[], Awaitable[T]]) -> T:
        """Run `op()`; after a ConnectionLossError wait for the connection to come back and run it
        again (Kafka's retryRequestUntilConnected). A session expiry ends the retries
        (SessionExpiredError); waiting is bounded by `request_timeout_ms` when set."""
        timeout = None if self.request_timeout_ms is None else self.request_timeout_ms / 1000
        while True:
            try:
                return await op()
            except ConnectionLossError:
                await self.wait_until_connected(timeout)

    # --- kazoo -> loop ---------------------------------------------------------------------------

    def _client(self) -> KazooClient:
        if self._kazoo is None:
            raise ZooKeeperClientClosedError("client not started or closed")
        return self._kazoo

    def _post(self, fn: Callable[..., Any], *args: Any) -> None:
        """From a kazoo thread: run fn(*args) on the loop (dropped if the loop is gone)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        with contextlib.suppress(RuntimeError):  # loop closed between the check and the call
            loop.call_soon_threadsafe(fn, *args)

    def _bridge(self, async_result: Any, path: str | None) -> asyncio.Future[Any]:
        """An asyncio future settled (on the loop) by kazoo's IAsyncResult, errors translated."""
        assert self._loop is not None
        fut: asyncio.Future[Any] = self._loop.create_future()

        def settle(value: Any, exc: BaseException | None) -> None:
            if fut.done():  # cancelled by the awaiting task
                return
            if exc is not None:
                fut.set_exception(exc)
            else:
                fut.set_result(value)

        def done(result: Any) -> None:  # a kazoo thread
            try:
                value = result.get(block=False)
            except BaseException as e:
                self._post(settle, None, _translate(e, path))
            else:
                self._post(settle, value, None)

        async_result.rawlink(done)
        return fut

    def _data_watcher(self, event: WatchedEvent) -> None:  # kazoo's callback thread
        self._post(self._on_data_event, event.type, event.path)

    def _child_watcher(self, event: WatchedEvent) -> None:  # kazoo's callback thread
        self._post(self._on_child_event, event.type, event.path)

    def _on_data_event(self, event_type: str, path: str | None) -> None:
        if event_type == EventType.NONE or path is None:
            return  # kazoo dropping watches with the connection: the SUSPENDED state handles it
        self._armed_data.pop(path, None)
        handler = self._znode_handlers.get(path)
        if handler is None:
            return
        if event_type == EventType.CREATED:
            handler.handle_creation()
        elif event_type == EventType.DELETED:
            handler.handle_deletion()
        elif event_type == EventType.CHANGED:
            handler.handle_data_change()

    def _on_child_event(self, event_type: str, path: str | None) -> None:
        if event_type == EventType.NONE or path is None:
            return
        self._armed_child.pop(path, None)
        # a deletion fires child watches too; Kafka's client tells only the znode change handler
        if event_type == EventType.CHILD and (handler := self._child_handlers.get(path)) is not None:
            handler.handle_child_change()

    def _on_kazoo_state(self, state: str) -> None:  # kazoo's connection thread: must not block
        k = self._kazoo
        session_id = None
        if state == KazooState.CONNECTED and k is not None:
            client_id = k.client_id
            session_id = client_id[0] if client_id else None
        self._post(self._session_events.put_nowait, (ZkState(state), session_id))

    async def _process_session_events(self) -> None:
        """One session event at a time, so state change handlers run in order and an awaited
        before-handler finishes before the after-handler of the next session begins."""
        while True:
            state, session_id = await self._session_events.get()
            if self._closing:
                continue
            try:
                await self._on_session_event(state, session_id)
            except Exception:
                log.exception("ZooKeeper session event %s failed", state.value)

    async def _on_session_event(self, state: ZkState, session_id: int | None) -> None:
        previous_session = self._session_id
        self._state = state
        if state is ZkState.CONNECTED:
            self._session_id = session_id
            self._connected.set()
        else:
            self._connected.clear()
        for listener in list(self._state_listeners):
            listener(state)
        if state is ZkState.SUSPENDED:
            # kazoo dropped every watch with the connection: re-arm them if the session survives
            self._dropped_data.update(self._armed_data)
            self._dropped_child.update(self._armed_child)
            self._armed_data.clear()
            self._armed_child.clear()
        elif state is ZkState.LOST:
            # the session expired: its watches and ephemeral znodes are gone on the server
            for d in (self._armed_data, self._armed_child, self._dropped_data, self._dropped_child):
                d.clear()
            log.info("ZooKeeper session %s expired", _hex(previous_session))
            for handler in list(self._state_handlers.values()):
                await _maybe_await(handler.before_initializing_session())
        elif previous_session is not None and session_id != previous_session:
            log.info("ZooKeeper session %s replaces expired %s", _hex(session_id), _hex(previous_session))
            for handler in list(self._state_handlers.values()):
                await _maybe_await(handler.after_initializing_session())
        else:
            await self._rearm_dropped_watches()

    async def _rearm_dropped_watches(self) -> None:
        """After a reconnect within the same session: re-arm the watches kazoo dropped and tell
        the handlers of znodes that changed meanwhile (what SetWatches does for the Java client)."""
        data, self._dropped_data = self._dropped_data, {}
        children, self._dropped_child = self._dropped_child, {}
        for path, seen in data.items():
            try:
                now = await self.exists(path, watch=True)
            except ZooKeeperClientError:
                self._dropped_data[path] = seen  # lost again: next reconnect
                continue
            if (seen is None) != (now is None) or (seen and now and seen.mzxid != now.mzxid):
                self._on_data_event(
                    EventType.CREATED if seen is None else EventType.DELETED if now is None else EventType.CHANGED,
                    path)
        for path, seen in children.items():
            try:
                await self.get_children(path, watch=True)
            except NoNodeError:
                continue  # deleted: the znode handler hears of it through the data watch, if any
            except ZooKeeperClientError:
                self._dropped_child[path] = seen
                continue
            now = self._armed_child.get(path)
            if seen is not None and now is not None and seen.pzxid != now.pzxid:
                self._on_child_event(EventType.CHILD, path)


def _parent(path: str) -> str:
    i = path.rfind("/")
    if i < 0:
        raise ValueError(f"Invalid path {path}")
    return path[:i]


def _hex(session_id: int | None) -> str:
    return "none" if session_id is None else f"0x{session_id:x}"


async def _maybe_await(value: Any) -> None:
    if inspect.isawaitable(value):
        await value


def _stop_kazoo(k: KazooClient, stopped: asyncio.Future[None]) -> None:
    """kazoo's stop() and close() join its threads: run off the loop; `stopped` is set when done."""
    try:
        k.stop()
    finally:
        k.close()
        loop = stopped.get_loop()
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(lambda: stopped.done() or stopped.set_result(None))


async def _create_chroot(hosts: str, chroot: str, session_timeout_ms: int, connection_timeout_ms: int) -> None:
    """Kafka's createChrootIfNecessary: create `chroot` (and its parents, null data) through a
    client without the chroot, then close it."""
    client = ZooKeeperClient(hosts, session_timeout_ms=session_timeout_ms,
                             connection_timeout_ms=connection_timeout_ms, name="chroot")
    await client.start()
    try:
        await client.create(chroot, None, makepath=True)
    except NodeExistsError:
        pass
    finally:
        await client.close()


async def gather_all(aws: Iterable[Awaitable[T]]) -> list[T | BaseException]:
    """Await many operations at once (kazoo pipelines them on the one connection, as Kafka's
    ZooKeeperClient pipelines its batches); each result or its error, in order."""
    return await asyncio.gather(*aws, return_exceptions=True)
