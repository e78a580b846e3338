"""The handler registry: api key -> (version range, handler).

Why: ApiVersions must advertise exactly what the broker implements (kfake's `regKey`), so the
advertised table is built from what handler modules register, never from what the decoder could
parse. Each module under `broker/apis/` registers itself with `@api(key, min, max)`; the network
layer dispatches by key and version through `REGISTRY`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.primitives import ApiMessage

if TYPE_CHECKING:
    from broker.context import RequestContext

Handler = Callable[["RequestContext", Any], Awaitable[ApiMessage | None]]


@dataclass(frozen=True)
class ApiHandler:
    api_key: int
    min_version: int
    max_version: int
    handle: Handler
    # only a ZooKeeper-mode broker serves (and advertises) it: the controller-to-broker requests,
    # whose Kafka specs list only the "zkBroker" listener
    zk_only: bool = False
    # run at once in the connection's read callback, and on without a task (broker.network's
    # _start_eagerly and _Driven): only for handlers that need no current task anywhere (no
    # asyncio.timeout, no network_client call) and whose code after a purgatory wait may run
    # inside the call that completed the operation
    eager: bool = False

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


REGISTRY: dict[int, ApiHandler] = {}


def api(api_key: int, min_version: int, max_version: int, *, zk_only: bool = False,
        eager: bool = False) -> Callable[[Handler], Handler]:
    """Register the decorated coroutine as the handler of `api_key` for the version range;
    `zk_only`: served and advertised by a ZooKeeper-mode broker only; `eager`: see ApiHandler."""

    def register(fn: Handler) -> Handler:
        if api_key in REGISTRY:
            raise RuntimeError(f"api key {api_key} registered twice")
        REGISTRY[api_key] = ApiHandler(api_key, min_version, max_version, fn, zk_only, eager)
        return fn

    return register


def advertised(zk_mode: bool = False) -> list[tuple[int, int, int]]:
    """(api_key, min, max) for ApiVersions, sorted by key: a single node leaves out the
    ZooKeeper-mode-only keys."""
    return sorted((h.api_key, h.min_version, h.max_version) for h in REGISTRY.values()
                  if zk_mode or not h.zk_only)


def load_all() -> dict[int, ApiHandler]:
    """Import every handler module so that each registers itself."""
    import importlib
    import pkgutil

    import broker.apis as pkg

    for mod in sorted(m.name for m in pkgutil.iter_modules(pkg.__path__)):
        if mod not in ("registry",) and not mod.startswith("_"):
            importlib.import_module(f"broker.apis.{mod}")
    return REGISTRY
