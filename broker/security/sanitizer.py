"""Kafka's Sanitizer (org.apache.kafka.common.utils.Sanitizer): how a user or client id becomes a
ZooKeeper node name and back. Here, not in controller.zk, because the broker's SCRAM code needs it
too (/config/users/<user>) and broker modules import no concrete controller."""

from __future__ import annotations

from urllib.parse import unquote_plus

_URL_SAFE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")


def sanitize(name: str) -> str:
    """Sanitizer.sanitize: java.net.URLEncoder, then `*` -> %2A and space -> %20. Topic names
    need none."""
    out = []
    for ch in name:
        if ch in _URL_SAFE:
            out.append(ch)
        else:
            out.extend(f"%{b:02X}" for b in ch.encode("utf-8"))
    return "".join(out)


def desanitize(name: str) -> str:
    """Sanitizer.desanitize (java.net.URLDecoder: %XX sequences back to UTF-8, `+` to a space)."""
    return unquote_plus(name, encoding="utf-8", errors="strict")
