"""What every operator command shares: where the brokers are, how failures read, how tables look.

The commands speak the Kafka wire protocol only (through kafka-python), so they work against
Apache Kafka as well as Odradek; nothing here reaches into broker internals. A failed command
exits non-zero with one line saying what went wrong, never a traceback: an operator reading
`Error: cannot reach a broker at ...` knows what to fix, one reading a stack trace does not.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from clients.client_properties import (
    COMMAND_CONFIG_ENV,
    ClientConfigError,
    ClientProperties,
    read_command_config,
)

BOOTSTRAP_ENV = "ODRADEK_BOOTSTRAP"
DEFAULT_BOOTSTRAP = "localhost:9092"

F = TypeVar("F", bound=Callable[..., Any])


def bootstrap_server_option(f: F) -> F:
    """`--bootstrap-server` / `-b` (parameter `bootstrap`), defaulting to $ODRADEK_BOOTSTRAP,
    then localhost:9092: the one definition every command that reaches a broker uses."""
    return click.option(
        "--bootstrap-server", "-b", "bootstrap", default=DEFAULT_BOOTSTRAP, show_default=True,
        envvar=BOOTSTRAP_ENV, show_envvar=True, metavar="HOST:PORT[,HOST:PORT]",
        help="Brokers to bootstrap from.",
    )(f)


def _command_config(ctx: click.Context, param: click.Parameter, path: str | None) -> ClientProperties:
    """The --command-config file read and checked before the command runs: an unreadable file
    or a key that cannot be honoured is a usage error naming the file and the key."""
    if not path:
        return ClientProperties()
    try:
        return read_command_config(path)
    except OSError as e:
        raise click.BadParameter(f"cannot read {path}: {e.strerror or e}", ctx=ctx, param=param) from None
    except ClientConfigError as e:
        raise click.BadParameter(f"{path}: {e}", ctx=ctx, param=param) from None


def command_config_option(f: F) -> F:
    """`--command-config FILE` (parameter `client_config`, a ClientProperties), defaulting to
    $ODRADEK_COMMAND_CONFIG: Kafka's client properties for every client the command builds."""
    return click.option(
        "--command-config", "client_config", metavar="FILE", envvar=COMMAND_CONFIG_ENV, show_envvar=True,
        callback=_command_config,
        help="Kafka client properties (security.protocol, ssl.*, sasl.mechanism, sasl.jaas.config, "
             "client.id, ...) for every client the command builds, as Kafka's tools take them.",
    )(f)


def bootstrap_option(f: F) -> F:
    """`--bootstrap-server` / `-b` as above, plus `--timeout` (parameter `timeout_s`) and
    `--command-config` (parameter `client_config`)."""
    f = command_config_option(f)
    f = click.option(
        "--timeout", "timeout_s", type=float, default=10.0, show_default=True,
        help="Seconds to wait for a broker to answer before giving up.",
    )(f)
    return bootstrap_server_option(f)


def error_text(exc: BaseException) -> str:
    """One readable line for a client-library exception (kafka-python's `str()` of a broker
    error dumps the whole request and response)."""
    from kafka import errors as Errors

    if isinstance(exc, Errors.KafkaTimeoutError) and "bootstrap" in str(exc).lower():
        return "no broker answered"
    if isinstance(exc, Errors.BrokerResponseError) and exc.message:
        return _name_and_text(type(exc))
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]


def broker_error(code: int, message: str | None = None) -> str:
    """`NAME: explanation` for a Kafka error code, preferring the broker's own message."""
    from kafka import errors as Errors

    return _name_and_text(Errors.for_code(code), message)


def named_error(name: str) -> str:
    """The same for an error kafka-python reports by class name only (e.g. delete_groups)."""
    from kafka import errors as Errors

    err = getattr(Errors, name, None)
    return _name_and_text(err) if getattr(err, "message", None) else name


def _name_and_text(err: Any, message: str | None = None) -> str:
    """`NAME: explanation` of a kafka-python error class, as every command prints errors."""
    return f"{err.message}: {message or err.description}"


class _BootstrapFailures(logging.Handler):
    """The last reason kafka-python gave for a failed bootstrap connection: it retries until the
    timeout and then says only that it timed out, while a broker that refused the client's
    credentials or certificate (a Java client's SaslAuthenticationException / SSLHandshakeException)
    must be named as such, not as a broker that is not running."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.last: object = None

    def emit(self, record: logging.LogRecord) -> None:
        if str(record.msg).startswith("Bootstrap connection to") and isinstance(record.args, tuple) \
                and len(record.args) >= 2:
            self.last = record.args[1]


def _refused(failure: object) -> str | None:
    """The refusal a bootstrap failure stands for (authentication, TLS handshake), or None."""
    from kafka import errors as Errors

    if isinstance(failure, (Errors.SaslAuthenticationFailedError, Errors.UnsupportedSaslMechanismError,
                            Errors.IllegalSaslStateError)):
        return error_text(failure) if not failure.args else f"{type(failure).message}: {failure.args[0]}"
    if isinstance(failure, Errors.KafkaConnectionError) and "Handshake failed" in str(failure):
        return str(failure)
    return None


def _sasl_refused(bootstrap: str, client: ClientProperties | None) -> str | None:
    """With SASL, a bootstrap server that answers ApiVersions (which needs no authentication)
    while the client could not bootstrap has refused the credentials: Kafka closes the
    connection after a failed authentication, which kafka-python reports only as a disconnect.
    Without SASL, a bootstrap server that answers only ApiVersions is a SASL listener."""
    from clients.reachability import WANTS_SASL, split_address, unanswered

    seeds = [split_address(a if ":" in a else f"{a}:9092") for a in bootstrap.split(",") if a.strip()]
    if not seeds:
        return None
    silent = unanswered(seeds, 5.0, client)
    if client is None or not client.sasl:
        wanting = [why.partition(WANTS_SASL)[0] + WANTS_SASL for why in silent.values() if WANTS_SASL in why]
        return wanting[0] if wanting and len(silent) == len(seeds) else None
    if len(silent) == len(seeds):
        return None
    mechanism, user, _ = client.sasl_credentials()
    return (f"SASL authentication failed ({mechanism} as {user!r}; the broker answers but closed the "
            "connection: a wrong username or password, or a mechanism it does not enable)")


@contextmanager
def kafka_errors(bootstrap: str, client: ClientProperties | None = None) -> Iterator[None]:
    """Turn client-library failures into a clean `Error: ...` and exit code 1; `client` (the
    command's --command-config) lets a refused authentication be told from a dead broker."""
    from kafka import errors as Errors

    failures = _BootstrapFailures()
    manager_log = logging.getLogger("kafka.net.manager")
    manager_log.addHandler(failures)
    try:
        yield
    except click.ClickException:
        raise
    except Errors.KafkaTimeoutError as e:
        if "bootstrap" in str(e).lower():
            refused = _refused(failures.last) or _sasl_refused(bootstrap, client)
            if refused is not None:
                raise click.ClickException(f"the broker at {bootstrap} refused the connection: {refused} "
                                           "(check --command-config)") from None
            raise click.ClickException(
                f"cannot reach a broker at {bootstrap} (is it running? set --bootstrap-server "
                f"or ${BOOTSTRAP_ENV})") from None
        raise click.ClickException(error_text(e)) from None
    except (Errors.KafkaConnectionError, Errors.NodeNotReadyError) as e:
        # the one broker a request must go to (a group's coordinator, a partition's leader)
        raise click.ClickException(
            f"the broker this request must go to does not answer ({type(e).__name__}: {e}); its "
            "partitions and groups move to other brokers when its ZooKeeper session expires") from None
    except Errors.KafkaError as e:
        raise click.ClickException(error_text(e)) from None
    except ValueError as e:  # kafka-python's client-side checks, e.g. an illegal topic name
        raise click.ClickException(str(e)) from None
    finally:
        manager_log.removeHandler(failures)


@functools.cache
def _make_operator_admin(base: type) -> type:
    """KafkaAdminClient that keeps away from brokers that do not answer (clients.reachability):
    they are named once on standard error and backed off for the whole command, so a request
    for "any broker" goes to a live one and per-broker fan-outs (ListGroups) skip them."""

    class OperatorAdmin(base):  # type: ignore[misc, valid-type]
        unreachable: dict[int, str]  # node id -> "host:port"

        def avoid_unreachable(self, bootstrap: str, timeout_s: float, client: ClientProperties) -> None:
            from clients.reachability import avoid_unreachable

            self.unreachable = avoid_unreachable(self._manager, bootstrap, timeout_s, client)

        def answering_broker_ids(self) -> list[int]:
            """The brokers of the cluster metadata but the unreachable ones: where a per-broker
            fan-out goes."""
            return [b.node_id for b in self._manager.cluster.brokers() if b.node_id not in self.unreachable]

        def list_groups(self, broker_ids: list[int] | None = None, **kwargs: Any) -> Any:
            if broker_ids is None:
                broker_ids = self.answering_broker_ids()
            return super().list_groups(broker_ids, **kwargs)

    return OperatorAdmin


@contextmanager
def admin_client(bootstrap: str, timeout_s: float, client: ClientProperties | None = None) -> Iterator[Any]:
    """A connected kafka-python KafkaAdminClient with the command's client properties (which win
    over the defaults here) that avoids brokers that do not answer (named on standard error;
    their ids in `.unreachable`), closed afterwards."""
    from kafka.admin import KafkaAdminClient

    client = client or ClientProperties()
    with kafka_errors(bootstrap, client):
        ms = int(timeout_s * 1000)
        settings = {"client_id": "odradek-cli", "bootstrap_timeout_ms": ms, "request_timeout_ms": max(ms, 1000),
                    **client.kafka_python("admin")}
        admin = _make_operator_admin(KafkaAdminClient)(bootstrap_servers=bootstrap, **settings)
        try:
            admin.avoid_unreachable(bootstrap, timeout_s, client)
            yield admin
        finally:
            admin.close()


def parse_pairs(items: Iterable[str], what: str = "KEY=VALUE") -> dict[str, str]:
    """`k=v` items (each may itself be a comma-separated list, as kafka-configs.sh accepts)."""
    out: dict[str, str] = {}
    for item in items:
        for part in item.split(","):
            if not part:
                continue
            key, sep, value = part.partition("=")
            if not sep or not key:
                raise click.BadParameter(f"expected {what}, got {part!r}")
            out[key.strip()] = value
    return out


def split_names(items: Iterable[str]) -> list[str]:
    """Names given repeated and/or comma-separated."""
    return [n for item in items for n in item.split(",") if n]


def console() -> Any:
    """A rich Console on stdout. Piped output gets unlimited width so tables are never
    truncated or wrapped: scripts can split rows on whitespace as with Kafka's tools."""
    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    return Console(width=100_000, no_color=True, highlight=False, soft_wrap=True)


def table(*headers: str) -> Any:
    """A borderless table laid out like the output of kafka-consumer-groups.sh."""
    from rich import box
    from rich.table import Table

    t = Table(box=box.SIMPLE_HEAD if sys.stdout.isatty() else None, pad_edge=False,
              show_edge=False, header_style="bold")
    for h in headers:
        t.add_column(h, no_wrap=True)
    return t
