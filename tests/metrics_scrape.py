"""Scrape a broker's /metrics with a real HTTP client and parse it with prometheus-client's
text parser (what Prometheus itself accepts): {(sample name, sorted label items): value}."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(host: str, port: int, timeout: float = 10.0) -> Samples:
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=timeout) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain")
        text = r.read().decode()
    out: Samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            assert key not in out, f"duplicate series {key}"
            out[key] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    """One series' value (KeyError naming it when it is not served)."""
    key = (name, tuple(sorted(labels.items())))
    if key not in samples:
        raise KeyError(f"{name}{labels} not served; served names: {sorted({n for n, _ in samples})}")
    return samples[key]


def series(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Every series of a name, by labels."""
    return {labels: v for (n, labels), v in samples.items() if n == name}
