"""The `odradek` command: `serve` runs a broker; the operator tools hang off the same group."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from clients.acls import acls
from clients.cluster import cluster
from clients.configs import configs
from clients.console.command import console
from clients.consume import consume
from clients.dump_log import dump_log
from clients.groups import groups
from clients.perf import perf
from clients.pipeline import pipeline
from clients.produce import produce
from clients.topics import topics
from clients.transactions import transactions


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="odradek", prog_name="odradek")
def main() -> None:
    """Odradek: a Kafka-wire-compatible message broker, and tools for any Kafka cluster.

    `serve` runs a broker; the other commands speak the Kafka protocol only, so they work
    against Apache Kafka too. They find the brokers with --bootstrap-server/-b, else
    $ODRADEK_BOOTSTRAP, else localhost:9092. `odradek COMMAND --help` shows each one's options.

    \b
    Examples:
      odradek serve --listeners PLAINTEXT://localhost:9092 --log-dirs ./data
      export ODRADEK_BOOTSTRAP=localhost:9092
      odradek topics create clicks --partitions 3
      echo hello | odradek produce clicks
      odradek consume clicks --from-beginning --max-messages 1
      odradek groups describe my-app
      odradek transactions list
      odradek perf produce bench --num-records 100000 --record-size 100
    """


def _key_value_items(ctx: click.Context, param: click.Parameter, items: tuple[str, ...]) -> tuple[str, ...]:
    """--override items must be KEY=VALUE: a usage error (exit 2) before any config is read."""
    for item in items:
        if not item.partition("=")[0].strip() or "=" not in item:
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", ctx=ctx, param=param)
    return items


@main.command()
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="server.properties in Kafka's format.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE", callback=_key_value_items,
              help="Set any broker config (repeatable); wins over the file.")
@click.option("--listeners", help="e.g. PLAINTEXT://localhost:9092 (listeners).")
@click.option("--advertised-listeners", help="advertised.listeners")
@click.option("--log-dirs", help="Comma-separated log directories (log.dirs).")
@click.option("--broker-id", type=int, help="broker.id")
@click.option("--config-env", is_flag=True,
              help="Also take every KAFKA_<KEY> environment variable as config <key> (the "
                   "convention of Kafka's container images: KAFKA_ZOOKEEPER_CONNECT -> "
                   "zookeeper.connect); they win over --config, --override wins over them.")
@click.option("--log-level", default="INFO", show_default=True)
def serve(config_path: Path | None, overrides: tuple[str, ...], listeners: str | None,
          advertised_listeners: str | None, log_dirs: str | None, broker_id: int | None,
          config_env: bool, log_level: str) -> None:
    """Run a broker (single node with embedded metadata unless zookeeper.connect is set).

    \b
    Examples:
      odradek serve --listeners PLAINTEXT://localhost:9092 --log-dirs ./data
      odradek serve --config config/server.properties --override num.partitions=6
      KAFKA_BROKER_ID=1 KAFKA_ZOOKEEPER_CONNECT=zk:2181 odradek serve --config-env
    """
    from broker.config import ConfigError, load_config
    from broker.logging_setup import LEVELS, configure_logging
    from broker.server import run

    if log_level.upper() not in LEVELS:  # before anything else: a typo must not start a broker
        raise click.ClickException(f"Invalid log level {log_level!r}: expected one of {', '.join(LEVELS)}")
    configure_logging(log_level)  # for what goes wrong before the config is read
    import structlog

    log = structlog.get_logger("odradek.config")
    # the config's own warnings wait for log.format: every line of a broker is in one format
    pending: list[str] = []
    from_env: dict[str, str] = {}
    if config_env:
        from broker.env_config import configs_from_env

        from_env = configs_from_env(os.environ)
        overrides = tuple(f"{key}={value}" for key, value in from_env.items()) + overrides
    try:
        config = load_config(
            config_path,
            overrides,
            {
                "listeners": listeners,
                "advertised.listeners": advertised_listeners,
                "log.dirs": log_dirs,
                "broker.id": broker_id,
            },
            warn=pending.append,
        )
    except (ConfigError, OSError) as e:
        raise click.ClickException(str(e)) from None
    configure_logging(log_level, config["log.format"])
    if config_env:
        log.info("configs from KAFKA_* environment variables", keys=sorted(from_env))
    for msg in pending:
        log.warning(msg)
    sys.exit(run(config))


for command in (topics, groups, configs, transactions, acls, produce, consume, perf, dump_log, pipeline,
                cluster, console):
    main.add_command(command)

if __name__ == "__main__":
    main()
