"""Progress of a long CLI operation (a reassignment, the leaders of a topic of many partitions, a
perf run) on standard error, so standard output keeps only the results.

On a terminal it is a rich progress bar, gone when the operation ends. Anywhere else (a CI log, a
pipe, `nohup`) a bar is noise, and silence looks like a hang: a line

    <what>: <done>/<total> <unit> (<percent>%), <elapsed> s elapsed

goes out every `--progress-interval` seconds (default 5) from a timer thread -- also while the
operation waits and `done` does not move, which is when an operator most wants to know it is
alive. An operation shorter than the interval prints none (its result says the rest), so a quick
command's standard error stays its one `Error: ...` line when it fails. The operation only calls
`update(done)` (or `update(done, total)` once it learns the total); it never prints.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from clients.common import F

DEFAULT_PROGRESS_INTERVAL_S = 5.0
Update = Callable[..., None]  # update(done: int, total: int | None = None)


def progress_interval_option(f: F) -> F:
    """`--progress-interval` (parameter `progress_interval_s`)."""
    return click.option("--progress-interval", "progress_interval_s", type=click.FloatRange(min=0.1),
                        default=DEFAULT_PROGRESS_INTERVAL_S, show_default=True,
                        help="Seconds between progress lines on standard error when it is not a terminal "
                             "(a terminal gets a progress bar).")(f)


def progress_line(what: str, done: int, total: int, unit: str, elapsed_s: float) -> str:
    """`<what>: <done>/<total> <unit> (<percent>%), <elapsed> s elapsed`; `?` for a total not known yet."""
    share = f"{done}/{total} {unit} ({100.0 * done / total:.0f}%)" if total else f"{done}/? {unit}"
    return f"{what}: {share}, {elapsed_s:.1f} s elapsed".replace("  ", " ").replace(" ,", ",")


@contextmanager
def progress(total: int, what: str, interval_s: float = DEFAULT_PROGRESS_INTERVAL_S,
             unit: str = "") -> Iterator[Update]:
    """Report `done` of `total` while the block runs; yields `update(done, total=None)`."""
    if sys.stderr.isatty():
        with _bar(total, what) as update:
            yield update
        return
    with _lines(total, what, interval_s, unit) as update:
        yield update


@contextmanager
def _bar(total: int, what: str) -> Iterator[Update]:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TaskProgressColumn(), TimeElapsedColumn(), console=Console(stderr=True),
                  transient=True) as bar:
        task = bar.add_task(what, total=total)

        def update(done: int, new_total: int | None = None) -> None:
            bar.update(task, completed=done, total=new_total)

        yield update


@contextmanager
def _lines(total: int, what: str, interval_s: float, unit: str) -> Iterator[Update]:
    started = time.monotonic()
    state = {"done": 0, "total": total}
    stop = threading.Event()

    def emit() -> None:
        click.echo(progress_line(what, state["done"], state["total"], unit, time.monotonic() - started), err=True)

    def tick() -> None:
        while not stop.wait(interval_s):
            emit()

    def update(done: int, new_total: int | None = None) -> None:
        if new_total is not None:
            state["total"] = new_total
        state["done"] = done

    ticker = threading.Thread(target=tick, name="progress", daemon=True)
    ticker.start()
    try:
        yield update
    finally:
        stop.set()
        ticker.join()
