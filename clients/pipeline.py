"""`odradek pipeline`: the example Spark pipelines, with the operator commands' broker option.

The pipelines and their options are defined in spark_connector/pipelines/cli.py, where each has
its own `--bootstrap-server` (default 127.0.0.1:9092, as `python -m
spark_connector.pipelines.clickstream` has). Under `odradek` that option is replaced by the one
every other command takes (`--bootstrap-server/-b`, then $ODRADEK_BOOTSTRAP, then
localhost:9092) and every other option is taken over as defined there, so the two cannot drift.
PySpark is still imported only when a pipeline runs.
"""

from __future__ import annotations

from typing import Any

import click

from clients.common import bootstrap_server_option
from spark_connector.pipelines import cli as pipelines

OWN_BOOTSTRAP = "bootstrap_server"  # the parameter name of the pipelines' own option


def with_shared_bootstrap(command: click.Command) -> click.Command:
    """`command` with its own `--bootstrap-server` replaced by the shared option; a command
    without one is returned unchanged."""
    if not any(p.name == OWN_BOOTSTRAP for p in command.params):
        return command

    @bootstrap_server_option
    @click.pass_context
    def callback(ctx: click.Context, bootstrap: str, **kwargs: Any) -> Any:
        return ctx.invoke(command, **{OWN_BOOTSTRAP: bootstrap}, **kwargs)

    shared = click.command(command.name, help=command.help, short_help=command.short_help,
                           epilog=command.epilog)(callback)
    shared.params.extend(p for p in command.params if p.name != OWN_BOOTSTRAP)
    return shared


@click.group()
def pipeline() -> None:
    """Example Spark Structured Streaming pipelines over Odradek topics (PySpark needed:
    pip install 'odradek[spark]').

    \b
    Examples:
      odradek pipeline clickstream --available-now --events 600
      odradek pipeline clickstream -b broker1:9092 --rate 50 --events 3000
      ODRADEK_BOOTSTRAP=broker1:9092 odradek pipeline clickstream --output /tmp/clicks
    """


for _name, _command in sorted(pipelines.pipeline.commands.items()):
    pipeline.add_command(with_shared_bootstrap(_command), _name)
