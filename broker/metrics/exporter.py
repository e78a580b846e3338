"""`/metrics` over HTTP (metrics.port, metrics.host), served by prometheus-client's own
threaded WSGI server.

Why a thread and not an aiohttp handler on the loop: rendering the text of thousands of series
(a `kafka_log_log_size` per partition) and writing it to a slow scraper would take the loop away
from requests; in the thread only the snapshot of in-memory state (BrokerCollector) runs on the
loop, and the GIL is released while the thread waits on its sockets.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.process_collector import ProcessCollector

from broker.metrics.collector import BrokerCollector

if TYPE_CHECKING:
    from broker.server import BrokerServer


class MetricsExporter:
    """Started after the listeners (so a scrape sees a serving broker), stopped at shutdown."""

    def __init__(self, server: BrokerServer) -> None:
        self.server = server
        self.registry = CollectorRegistry(auto_describe=False)
        # process_open_fds, process_resident_memory_bytes, process_cpu_seconds_total... read
        # from /proc in the HTTP thread, not on the loop
        ProcessCollector(registry=self.registry)
        self._http: Any = None
        self._thread: threading.Thread | None = None

    def start(self, host: str, port: int) -> None:
        self.registry.register(BrokerCollector(self.server, asyncio.get_running_loop()))
        self._http, self._thread = start_http_server(port, addr=host or "0.0.0.0", registry=self.registry)

    @property
    def port(self) -> int:
        return int(self._http.server_port)

    def stop(self) -> None:
        """Stops the server (a scrape in progress finishes or fails); called from the loop, so
        the shutdown, which waits for the serving thread, runs in an executor by the caller."""
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
