"""The console's web server: aiohttp serving Jinja2 pages and the JSON their scripts poll.

Why this stack: aiohttp is an asyncio server like the rest of Odradek (one event loop, no
second framework), Jinja2 renders the pages on the server so there is no front-end build, and a
few lines of JavaScript in the base template refresh the live numbers from the JSON endpoints.
The cluster is asked through one kafka-python admin client, whose calls block: they run in a
worker thread, one at a time (the lock), never on the event loop. Only GET and HEAD are served
unless the console was started with --allow-writes (no page changes the cluster yet; the gate
is there so the first one that does is off by default).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import jinja2
from aiohttp import web

from clients.client_properties import ClientProperties
from clients.common import error_text
from clients.console import cluster_view, records
from clients.console.throughput import ALL_TOPICS, Sampler

T = TypeVar("T")
log = logging.getLogger("odradek.console")
LAG_HISTORY = 120  # samples of each group's total lag kept for its sparkline


@dataclass
class Console:
    """What the request handlers share: the admin client and where the brokers are."""

    admin: Any
    bootstrap: str
    timeout_s: float
    allow_writes: bool = False
    refresh_s: float = 2.0
    sampler: Sampler | None = None
    client_config: ClientProperties = field(default_factory=ClientProperties)  # --command-config
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    lag_history: dict[str, deque[tuple[float, int]]] = field(default_factory=dict)

    async def ask(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run a blocking cluster call in a worker thread, one at a time."""
        async with self.lock:
            return await asyncio.to_thread(fn, *args, **kwargs)

    def note_lags(self, groups: list[dict[str, Any]]) -> None:
        """Keep each group's total lag over time (at most one sample a second)."""
        now = time.time()
        for g in groups:
            series = self.lag_history.setdefault(g["group"], deque(maxlen=LAG_HISTORY))
            if not series or now - series[-1][0] >= 1.0:
                series.append((now, g["lag"]))
            g["lag_history"] = [lag for _, lag in series]

    def throughput(self, topic: str = ALL_TOPICS) -> dict[str, Any]:
        """Rates per second for the sparklines, or why there are none."""
        if self.sampler is None:
            return {"enabled": False}
        return {"enabled": True, "errors": dict(self.sampler.errors),
                **{kind: self.sampler.series(kind, topic) for kind in ("messages_in", "bytes_in", "bytes_out")}}


CONSOLE: web.AppKey[Console] = web.AppKey("console", Console)
_templates = jinja2.Environment(loader=jinja2.PackageLoader("clients.console", "templates"),
                                autoescape=jinja2.select_autoescape(["html"]), undefined=jinja2.StrictUndefined)
_templates.filters["when"] = lambda ms: datetime.fromtimestamp(ms / 1000).astimezone().isoformat(
    timespec="milliseconds") if ms is not None and ms >= 0 else "-"
_templates.filters["size"] = lambda n: "-" if n is None else f"{n:,} B"


def render(request: web.Request, template: str, status: int = 200, **context: Any) -> web.Response:
    console = request.app[CONSOLE]
    html = _templates.get_template(template).render(
        bootstrap=console.bootstrap, allow_writes=console.allow_writes, refresh_ms=int(console.refresh_s * 1000),
        path=request.path, **context)
    return web.Response(text=html, content_type="text/html", status=status)


@web.middleware
async def guard(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    """Read-only unless --allow-writes; a cluster call that fails shows as a page saying why."""
    if request.method not in ("GET", "HEAD") and not request.app[CONSOLE].allow_writes:
        raise web.HTTPForbidden(text="this console is read-only: start it with --allow-writes to change the cluster")
    try:
        return await handler(request)
    except web.HTTPException:
        raise
    except Exception as e:  # a broker error is the page's content, not a crash
        log.warning("%s failed: %s", request.path, error_text(e), exc_info=True)
        if request.path.startswith("/api/"):
            return web.json_response({"error": error_text(e)}, status=502)
        return render(request, "error.html", status=502, error=error_text(e))


async def overview_page(request: web.Request) -> web.Response:
    c = request.app[CONSOLE]
    return render(request, "overview.html", view=await c.ask(cluster_view.overview, c.admin),
                  throughput=c.throughput())


async def overview_api(request: web.Request) -> web.Response:
    c = request.app[CONSOLE]
    return web.json_response(await c.ask(cluster_view.overview, c.admin))


async def topics_page(request: web.Request) -> web.Response:
    c = request.app[CONSOLE]
    view = await c.ask(cluster_view.topics, c.admin)
    rates = {t["name"]: c.throughput(t["name"]) for t in view["topics"]}
    return render(request, "topics.html", view=view, rates=rates, throughput=c.throughput())


async def topic_page(request: web.Request) -> web.Response:
    c = request.app[CONSOLE]
    name = request.match_info["name"]
    view = await c.ask(cluster_view.topics, c.admin, [name], with_configs=True)
    topic = view["topics"][0]
    if topic["error_code"] == 3:
        raise web.HTTPNotFound(text=f"topic '{name}' does not exist")
    return render(request, "topic.html", topic=topic, sizes_failed=view["sizes_failed"],
                  throughput=c.throughput(name))


def _int(request: web.Request, name: str, default: int | None = None) -> int | None:
    raw = request.query.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise web.HTTPBadRequest(text=f"{name} must be an integer, got {raw!r}") from None


def _timestamp_ms(raw: str) -> int | None:
    """Milliseconds since the epoch, or an ISO 8601 time (local time when it has no zone)."""
    raw = raw.strip()
    if not raw:
        return None
    if raw.lstrip("-").isdigit():
        return int(raw)
    try:
        return int(datetime.fromisoformat(raw).timestamp() * 1000)
    except ValueError:
        raise web.HTTPBadRequest(text=f"timestamp must be milliseconds or ISO 8601, got {raw!r}") from None


async def messages_page(request: web.Request) -> web.Response:
    c = request.app[CONSOLE]
    name = request.match_info["name"]
    view = await c.ask(cluster_view.topics, c.admin, [name])
    topic = view["topics"][0]
    if topic["error_code"] == 3:
        raise web.HTTPNotFound(text=f"topic '{name}' does not exist")
    fmt = request.query.get("format", "auto")
    if fmt not in records.FORMATS:
        raise web.HTTPBadRequest(text=f"format must be one of {', '.join(records.FORMATS)}")
    partition = _int(request, "partition", 0)
    if partition not in [p["partition"] for p in topic["partitions"]]:
        raise web.HTTPNotFound(text=f"topic '{name}' has no partition {partition}")
    page = await asyncio.to_thread(
        records.read_page, c.bootstrap, name, partition, offset=_int(request, "offset"),
        timestamp_ms=_timestamp_ms(request.query.get("timestamp", "")), limit=_int(request, "limit", 20) or 20,
        fmt=fmt, timeout_s=c.timeout_s, client_config=c.client_config)
    return render(request, "messages.html", topic=topic, page=page, formats=records.FORMATS,
                  timestamp=request.query.get("timestamp", ""))


async def _groups(c: Console) -> tuple[list[dict[str, Any]], dict[int, str]]:
    found, failed = await c.ask(cluster_view.groups, c.admin)
    c.note_lags(found)
    return found, failed


async def groups_page(request: web.Request) -> web.Response:
    found, failed = await _groups(request.app[CONSOLE])
    return render(request, "groups.html", groups=found, groups_failed=failed)


async def group_page(request: web.Request) -> web.Response:
    c = request.app[CONSOLE]
    g = await c.ask(cluster_view.group_lags, c.admin, request.match_info["name"])
    if g["state"] == "Dead":
        raise web.HTTPNotFound(text=f"consumer group '{g['group']}' does not exist")
    c.note_lags([g])
    return render(request, "group.html", g=g)


def _by_name(groups: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Groups keyed by name for the pages' scripts (a position would move as groups come and go)."""
    return {g["group"]: g for g in groups}


async def groups_api(request: web.Request) -> web.Response:
    return web.json_response(_by_name((await _groups(request.app[CONSOLE]))[0]))


async def live_page(request: web.Request) -> web.Response:
    c = request.app[CONSOLE]
    found, failed = await _groups(c)
    return render(request, "live.html", view=await c.ask(cluster_view.overview, c.admin),
                  groups=found, groups_failed=failed, throughput=c.throughput())


async def live_api(request: web.Request) -> web.Response:
    """What the live view refreshes: the overview's counts, every group's lag, throughput."""
    c = request.app[CONSOLE]
    view = await c.ask(cluster_view.overview, c.admin)
    found, failed = await _groups(c)
    return web.json_response({"overview": view, "groups": _by_name(found), "groups_failed": failed,
                              "throughput": c.throughput(),
                              "at": time.time()}, dumps=lambda o: json.dumps(o, default=str))


def make_app(console: Console) -> web.Application:
    app = web.Application(middlewares=[guard])
    app[CONSOLE] = console
    app.add_routes([
        web.get("/", overview_page), web.get("/topics", topics_page), web.get("/topics/{name}", topic_page),
        web.get("/topics/{name}/messages", messages_page), web.get("/groups", groups_page),
        web.get("/groups/{name}", group_page), web.get("/live", live_page),
        web.get("/api/overview", overview_api), web.get("/api/groups", groups_api), web.get("/api/live", live_api),
    ])
    return app
