"""A TCP proxy that delays every chunk by a fixed time each way: a database on another host.

The benchmark's processes and the database share this machine's loopback, where a round trip
costs microseconds; a project's database is usually on another host, where it costs a fraction
of a millisecond, and what a change saves in round trips shows only there. Point
``DATABASE_URL`` at the proxy's port to run any section through it::

    python testproject/benchmarks/delay_proxy.py --delay-ms 0.25 --listen 5433 --to 5432

The delay is added to each chunk read, in order, on one event loop: a 0.25 ms delay makes a
statement's round trip 0.5 ms longer. The proxy's own CPU is on the same cores as the rest.
"""

from __future__ import annotations

import argparse
import asyncio


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    """Copy ``reader`` to ``writer``, each chunk ``delay`` seconds after it arrived."""
    loop = asyncio.get_running_loop()
    try:
        while data := await reader.read(65536):
            loop.call_later(delay, writer.write, data)
    finally:
        loop.call_later(delay * 2, writer.close)


async def serve(listen: int, to: int, delay: float) -> None:
    async def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", to)
        await asyncio.gather(
            pipe(reader, upstream_writer, delay),
            pipe(upstream_reader, writer, delay),
            return_exceptions=True,
        )

    server = await asyncio.start_server(connected, "127.0.0.1", listen)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--delay-ms", type=float, required=True, help="added each way")
    parser.add_argument("--listen", type=int, required=True, help="the port to listen on")
    parser.add_argument("--to", type=int, default=5432, help="the database's port")
    args = parser.parse_args()
    asyncio.run(serve(args.listen, args.to, args.delay_ms / 1000))


if __name__ == "__main__":
    main()
