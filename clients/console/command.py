"""`odradek console`: the web console's command (the server is clients.console.server)."""

from __future__ import annotations

import asyncio

import click

from clients.client_properties import ClientProperties
from clients.common import admin_client, bootstrap_option

READY = "Odradek console on"  # the line the command prints once it serves (tests wait for it)


@click.command()
@bootstrap_option
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="The console's HTTP port (0: any free port, printed at start).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to listen on; give 0.0.0.0 to serve other machines too.")
@click.option("--metrics", "metrics", default="", metavar="URL[,URL]",
              help="The brokers' Prometheus /metrics URLs, scraped for throughput sparklines.")
@click.option("--refresh", "refresh_s", type=click.FloatRange(0.5, 60), default=2.0, show_default=True,
              help="Seconds between the live numbers' refreshes in the browser.")
@click.option("--allow-writes", is_flag=True,
              help="Accept requests that change the cluster (none exists yet: the console is read-only).")
def console(bootstrap: str, timeout_s: float, client_config: ClientProperties, port: int, host: str, metrics: str, refresh_s: float,
            allow_writes: bool) -> None:
    """Serve a web console for the cluster: brokers, topics, messages, consumer groups and lag.

    It is a Kafka client over the wire (it works against Apache Kafka too), read-only unless
    --allow-writes, and listens on 127.0.0.1 unless --host says otherwise.

    \b
    Examples:
      odradek console --bootstrap-server localhost:9092 --port 8080
      odradek console -b localhost:9092 --metrics http://localhost:9404/metrics
    """
    import logging

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    urls = [u.strip() for u in metrics.split(",") if u.strip()]
    with admin_client(bootstrap, timeout_s, client_config) as admin:
        asyncio.run(_serve(admin, bootstrap, timeout_s, client_config, host, port, urls, refresh_s, allow_writes))


async def _serve(admin: object, bootstrap: str, timeout_s: float, client_config: ClientProperties, host: str, port: int, urls: list[str],
                 refresh_s: float, allow_writes: bool) -> None:
    """Serve until interrupted (SIGINT/SIGTERM end asyncio.run), then close the server."""
    import signal

    from aiohttp import web

    from broker.background import BackgroundTasks
    from clients.console.server import Console, make_app
    from clients.console.throughput import Sampler

    sampler = Sampler(urls) if urls else None
    app = make_app(Console(admin, bootstrap, timeout_s, allow_writes=allow_writes, refresh_s=refresh_s,
                           client_config=client_config,
                           sampler=sampler))
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    tasks = BackgroundTasks()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        bound = runner.addresses[0]
        if sampler is not None:
            tasks.spawn(sampler.run())
        click.echo(f"{READY} http://{bound[0]}:{bound[1]}/ (cluster {bootstrap}, "
                   f"{'writes allowed' if allow_writes else 'read-only'})", err=True)
        await stop.wait()
    finally:
        await tasks.cancel_all()
        await runner.cleanup()
