"""Fixtures of tests/compose: the Docker engine (for this package only), the images built once,
and a compose project per module, brought down with its volumes by the fixture."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.broker_process import REPO
from tests.compose.docker import (
    ComposeProject,
    DockerEngine,
    DockerUnavailable,
    build_base_image,
    fail_or_skip_reason,
    require_compose_v2,
    run,
)

BROKERS = ["broker-1", "broker-2", "broker-3"]


@pytest.fixture(scope="package")
def docker_engine() -> Iterator[DockerEngine]:
    engine = DockerEngine(REPO / "build" / "docker")
    try:
        engine.start()
        require_compose_v2()
    except DockerUnavailable as e:
        engine.stop()
        fail, reason = fail_or_skip_reason(str(e))
        if fail:
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture(scope="package")
def images(docker_engine: DockerEngine) -> dict[str, float]:
    """The base image, then every image of docker-compose.yml (the spark profile's too), built
    once for the package; seconds each step took (printed for the closing notes)."""
    took = {}
    started = time.monotonic()
    build_base_image()
    took["base image"] = time.monotonic() - started
    started = time.monotonic()
    ComposeProject("odradek-build").compose("--profile", "spark", "build", timeout=1800)
    took["compose build"] = time.monotonic() - started
    # the images these replaced (a code change rebuilds the last layers) would pile up run after run
    run(["docker", "image", "prune", "-f", "--filter", "label=org.odradek.image"])
    sizes = run(["docker", "image", "ls", "--format", "{{.Repository}}:{{.Tag}} {{.Size}}"]).stdout
    print(f"\ncompose images built: {took}\n{sizes}")
    return took


@pytest.fixture(scope="module")
def cluster(images: dict[str, float]) -> Iterator[ComposeProject]:
    """`docker compose up -d --wait`: ZooKeeper and three healthy brokers, host ports of its own."""
    project = ComposeProject(f"odradek-test-{os.getpid()}")
    try:
        started = time.monotonic()
        project.compose("up", "-d", "--wait", timeout=300)
        print(f"\ncompose up -d --wait: all healthy in {time.monotonic() - started:.1f} s")
        yield project
    finally:
        down = project.compose("down", "-v", "--remove-orphans", "--timeout", "60", check=False, timeout=300)
        if down.returncode != 0:
            print(f"compose down failed: {down.stderr[-2000:]}")
