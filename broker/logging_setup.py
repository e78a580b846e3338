"""One event per line, key=value (log.format=logfmt) or a JSON object (log.format=json, for log
shippers that parse JSON), for the broker's own events (structlog) and for stdlib `logging`
records from libraries and from storage/ alike."""

from __future__ import annotations

import logging
import sys

import structlog

# The level names `--log-level` accepts (stdlib logging's, which structlog filters by).
LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")


FORMATS = ("logfmt", "json")


def configure_logging(level: str = "INFO", fmt: str = "logfmt") -> None:
    shared = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer() if fmt == "json"
            else structlog.processors.KeyValueRenderer(key_order=["timestamp", "level", "logger", "event"]),
        ],
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
