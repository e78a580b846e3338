"""A Docker engine and a compose project for tests/compose, driven through the real `docker` CLI.

The engine: Debian's `docker.io` (20.10) runs here, but nothing starts it (no systemd), so
`DockerEngine` starts `dockerd` when `docker info` does not answer, and stops it afterwards. The
engine turns on IPv4 forwarding and sets the iptables FORWARD policy to DROP; both are put back
as they were when it stops, because the netns fault tests route between their own namespaces.

The images: no registry is reachable here, so everything is built on a local base image made by
`scripts/docker-base-image` (debootstrap), passed as ODRADEK_BASE_IMAGE to docker-compose.yml.

Waits are bounded polls of another program's state (`docker info`, a container's health, a
topic's ISR): these are not events of ours to await.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.broker_process import REPO, free_port
from tests.kafka_specs import in_ci

BASE_IMAGE = "odradek-base:bookworm"
INSTALL_HINT = "run `make test-deps` (scripts/install-system-deps, scripts/install-docker-compose)"


class DockerUnavailable(Exception):
    """What is missing for the compose tests, in words an operator can act on."""


def run(cmd: list[str], *, timeout: float = 120, check: bool = True, env: dict[str, str] | None = None,
        input: str | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, input=input, cwd=REPO)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {proc.returncode}:\n"
                             f"stdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}")
    return proc


def _engine_answers() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


class DockerEngine:
    """The Docker engine for the tests: the running one, or a `dockerd` started (and stopped) here."""

    def __init__(self, log_dir: Path) -> None:
        self.log_path = log_dir / "dockerd.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._ip_forward: str | None = None
        self._forward_policy: str | None = None

    def start(self, timeout: float = 60.0) -> DockerEngine:
        if shutil.which("docker") is None:
            raise DockerUnavailable(f"the docker CLI is missing: {INSTALL_HINT}")
        if _engine_answers():
            return self  # someone else's engine: used, left running
        if shutil.which("dockerd") is None:
            raise DockerUnavailable(f"no Docker engine answers and dockerd is not installed: {INSTALL_HINT}")
        self._ip_forward = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
        self._forward_policy = _forward_policy()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(["dockerd"], stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not _engine_answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log_path.read_text(errors="replace").splitlines()[-20:]
                self.stop()
                raise DockerUnavailable("dockerd did not start (exit code "
                                        f"{self.proc.returncode}): " + "\n".join(tail))
            time.sleep(0.5)
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        if self._ip_forward is not None:
            Path("/proc/sys/net/ipv4/ip_forward").write_text(self._ip_forward + "\n")
        if self._forward_policy is not None:
            subprocess.run(["iptables", "-P", "FORWARD", self._forward_policy], capture_output=True, timeout=30)
        self.proc = None


def _forward_policy() -> str | None:
    """The iptables FORWARD chain's policy (ACCEPT/DROP), None without iptables."""
    try:
        out = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True, timeout=30).stdout
    except OSError:
        return None
    for line in out.splitlines():
        if line.startswith("-P FORWARD "):
            return line.split()[2]
    return None


def require_compose_v2() -> str:
    """`docker compose version`'s answer; DockerUnavailable without the v2 plugin."""
    proc = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0:
        raise DockerUnavailable(f"the docker compose v2 plugin is missing: {INSTALL_HINT} "
                                f"({proc.stderr.strip()[:200]})")
    return proc.stdout.strip()


def build_base_image() -> None:
    run(["bash", str(REPO / "scripts" / "docker-base-image"), BASE_IMAGE], timeout=900)


def fail_or_skip_reason(reason: str) -> tuple[bool, str]:
    """(fail?, message): in CI a missing engine fails the run, elsewhere the tests skip."""
    return in_ci(), f"compose tests cannot run: {reason}"


@dataclass
class ComposeProject:
    """docker-compose.yml of the repository as project `name`, with host ports of its own."""

    name: str
    ports: tuple[int, int, int] = field(default_factory=lambda: (free_port(), free_port(), free_port()))
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        env = {**os.environ, "ODRADEK_BASE_IMAGE": BASE_IMAGE, "COMPOSE_PROJECT_NAME": self.name}
        env.update({f"ODRADEK_PORT_{i}": str(p) for i, p in enumerate(self.ports, 1)})
        env.update(self.extra_env)
        return env

    @property
    def bootstrap(self) -> str:
        return ",".join(f"localhost:{p}" for p in self.ports)

    def compose(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(["docker", "compose", "-p", self.name, *args], timeout=timeout, check=check, env=self.env)

    def container(self, service: str) -> str:
        """The container id of `service` (also a stopped one)."""
        cid = self.compose("ps", "-a", "-q", service).stdout.strip()
        assert cid, f"no container for {service}"
        return cid

    def inspect(self, service: str) -> dict:
        return json.loads(run(["docker", "inspect", self.container(service)]).stdout)[0]

    def state(self, service: str) -> dict:
        return self.inspect(service)["State"]

    def logs(self, service: str) -> str:
        return self.compose("logs", "--no-color", "--no-log-prefix", service).stdout

    def wait_healthy(self, services: list[str], timeout: float = 120.0) -> float:
        """Until every service's container is healthy; seconds it took. Fails with the states."""
        started = time.monotonic()
        while True:
            states = {s: self.state(s) for s in services}
            if all(st.get("Health", {}).get("Status") == "healthy" for st in states.values()):
                return time.monotonic() - started
            if time.monotonic() - started > timeout:
                raise AssertionError("not healthy in time: " + json.dumps(
                    {s: (st["Status"], st.get("Health", {}).get("Status"),
                         (st.get("Health", {}).get("Log") or [{}])[-1].get("Output")) for s, st in states.items()}))
            time.sleep(0.5)
