"""The listening socket of `archsearch api` and `serve` hands asyncio (and so uvicorn)
connections with Nagle's algorithm off, as uvicorn's own sockets do: otherwise a small
response's body waits for the client's delayed ACK of its headers."""

from __future__ import annotations

import asyncio
import socket
from concurrent.futures import ThreadPoolExecutor

from archsearch.server.processes import bind_or_exit


def test_accepted_connections_send_without_delay() -> None:
    # A loop of its own in a thread of its own: a session fixture of the suite (Playwright's
    # sync API) may keep an event loop running in this one.
    with ThreadPoolExecutor(1) as thread:
        assert thread.submit(asyncio.run, nodelay_of_an_accepted_connection()).result() != 0


async def nodelay_of_an_accepted_connection() -> int:
    """TCP_NODELAY of a connection accepted by an asyncio server on the socket."""
    sock = bind_or_exit("127.0.0.1", 0)
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_connection(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        served = writer.get_extra_info("socket")
        accepted.set_result(served.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(on_connection, sock=sock)
    async with server:
        _, writer = await asyncio.open_connection(*sock.getsockname())
        nodelay = await asyncio.wait_for(accepted, 10)
        writer.close()
    return nodelay
