"""`--watch` for the views an operator keeps open (`cluster status`, `groups describe`): the
snapshot is taken again every `--interval` seconds until Ctrl-C, which ends the command with
exit code 0 (stopping a watch is how it is used, not a failure).

On a terminal the snapshot is redrawn in place with rich's `Live` (the cursor hidden while it
runs and shown again when it stops, whatever stops it). Piped to a file or a log collector,
redrawing means nothing: each snapshot is printed whole after a `--- <UTC timestamp> ---` line,
so the output is a readable history (`grep`, `less`) rather than escape codes.

A snapshot that fails (a broker restarting, the coordinator moving) is shown as its one-line
error in place of the view, and the next interval tries again: a watch outlives the troubles it
is there to show.
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from collections.abc import Callable
from typing import Any

import click

from clients.common import F, console

DEFAULT_INTERVAL_S = 2.0


def watch_options(f: F) -> F:
    """`--watch` (parameter `watch`) and `--interval` (parameter `interval_s`)."""
    f = click.option("--interval", "interval_s", type=click.FloatRange(min=0.1), default=DEFAULT_INTERVAL_S,
                     show_default=True, help="Seconds between refreshes with --watch.")(f)
    return click.option("--watch", "-w", "watch", is_flag=True,
                        help="Refresh every --interval seconds until Ctrl-C (in place on a terminal, "
                             "else one timestamped snapshot after another).")(f)


def stamp() -> str:
    """The line that separates snapshots when stdout is not a terminal."""
    return f"--- {dt.datetime.now(dt.UTC).isoformat(timespec='seconds')} ---"


def _safe(snapshot: Callable[[], Any]) -> Any:
    """The snapshot, or its error as one line (a ClickException's message, as the command
    without --watch would print it)."""
    from rich.text import Text

    try:
        return snapshot()
    except click.ClickException as e:
        return Text(f"Error: {e.format_message()}")


def watch(snapshot: Callable[[], Any], interval_s: float) -> None:
    """Show `snapshot()` (a rich renderable) every `interval_s` seconds until Ctrl-C."""
    out = console()
    try:
        if not out.is_terminal:
            while True:
                click.echo(stamp())
                out.print(_safe(snapshot))
                sys.stdout.flush()
                time.sleep(interval_s)
        from rich.live import Live

        with Live(_safe(snapshot), console=out, auto_refresh=False, redirect_stderr=False) as live:
            while True:
                time.sleep(interval_s)
                live.update(_safe(snapshot), refresh=True)
    except KeyboardInterrupt:
        return
