"""A TCP fault proxy on 127.0.0.1 (notes §5b): the only way to lose a
*response* while the request really ran, and our only source of delay (the
kernel here has no netem). No root needed.

Usage::

    proxy = FaultProxy("127.0.0.1", pg.port)      # listens on 127.0.0.1:<proxy.port>
    dsn = f"host=127.0.0.1 port={proxy.port} user=postgres dbname=postgres"
    proxy.drop_responses = True   # requests reach the server, replies are discarded
    proxy.blackhole = True        # hold bytes both ways (flushed when cleared)
    proxy.blackhole_after = 3     # forward 3 more requests, then hold everything (mid-conversation)
    proxy.blackhole_after = b"COMMIT\x00"  # forward up to the next request with these bytes, then hold
    FaultProxy(host, port, scanner=FrontendScanner)  # ... or that runs a statement whose text has them
    proxy.delay = 0.2             # seconds added before forwarding each chunk
    proxy.reset_all()             # RST every open connection
    proxy.refuse()                # stop listening (connect: ECONNREFUSED) and RST every open connection
    proxy.accept()                # listen again on the same port
    proxy.close()

``held`` counts the chunks that waited in a blackhole, ``refused_since``
tells whether the listener is down; both are fault evidence.

Knobs are plain attributes, read by the event loop at each chunk, so they may
be flipped from any thread.

``scanner``: a factory of one protocol scanner per connection (its
``feed(chunk)`` returns the statement texts the chunk runs, or None when it
lost track); with it, a bytes ``blackhole_after`` matches the statements a
request runs, not its bytes (``chaos.faults.pgwire``: psycopg's prepared
COMMIT runs by name only, and the Parse that names it runs nothing).
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time


class FaultProxy:
    def __init__(self, target_host: str, target_port: int, listen_host: str = "127.0.0.1", scanner=None):
        self.target = (target_host, target_port)
        self.scanner = scanner
        self.drop_responses = False
        self.blackhole = False
        self.delay = 0.0
        self.held = 0
        self.refusing = False
        self.blackhole_after: int | bytes | None = None   # engage the blackhole after this many more
                                                           # requests, or after the next one holding these bytes
        self.blackholed_at: float | None = None   # time.monotonic() when the blackhole last engaged
        self._writers: set[asyncio.StreamWriter] = set()
        self._closing = False
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server: asyncio.base_events.Server | None = None
        self._thread = threading.Thread(target=self._run, args=(listen_host,), name="fault-proxy", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._server is None:
            raise RuntimeError("fault proxy did not start")
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    # ------------------------------------------------------------------ loop

    def _run(self, listen_host: str) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.set_exception_handler(self._on_loop_error)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, listen_host, 0))
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(*self.target)
        except OSError:
            client_w.close()
            return
        self._writers |= {client_w, server_w}
        try:
            await asyncio.gather(self._pump(client_r, server_w, reply=False),
                                 self._pump(server_r, client_w, reply=True), return_exceptions=True)
        finally:
            for w in (client_w, server_w):
                self._writers.discard(w)
                w.close()

    def _on_loop_error(self, loop, context: dict) -> None:
        """While ``close`` cancels the connection tasks, asyncio's stream callback
        (3.11) reports each cancelled one as an error with a traceback: expected
        then, so not printed. Anything else goes to the default handler."""
        if self._closing and isinstance(context.get("exception"), asyncio.CancelledError):
            return
        loop.default_exception_handler(context)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reply: bool) -> None:
        held = b""
        scan = self.scanner() if self.scanner is not None and not reply else None
        try:
            while True:
                chunk = await reader.read(65536)
                if not chunk:
                    break
                runs = scan.feed(chunk) if scan is not None else None   # every chunk: names are learned early
                if self.delay:
                    await asyncio.sleep(self.delay)
                if reply and self.drop_responses:
                    continue  # the server answered; the client never hears it
                if not reply and self.blackhole_after is not None and not self.blackhole:
                    if isinstance(self.blackhole_after, bytes):
                        # a scanner that follows the stream decides: psycopg's Parse of a named
                        # COMMIT (sent and answered before its Bind) carries the bytes but runs nothing
                        last = self.blackhole_after in chunk if runs is None else any(
                            self.blackhole_after in text + b"\0" for text in runs)
                    else:
                        self.blackhole_after -= 1
                        last = self.blackhole_after <= 0
                    if last:  # this request still goes through; what follows (its reply first) stalls
                        self.blackhole_after = None
                        self.engage_blackhole()   # before the write: the reply must not slip through
                        writer.write(held + chunk)
                        held = b""
                        await writer.drain()
                        continue
                held += chunk
                if self.blackhole:
                    self.held += 1
                while self.blackhole:
                    await asyncio.sleep(0.01)
                writer.write(held)
                held = b""
                await writer.drain()
        finally:
            try:
                writer.write_eof()
            except (OSError, RuntimeError):
                pass

    # ------------------------------------------------------------------ control

    def reset_all(self) -> None:
        """Abort every open connection with a TCP RST (SO_LINGER 0)."""
        def abort() -> None:
            for w in list(self._writers):
                sock = w.get_extra_info("socket")
                if sock is not None:
                    try:
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    except OSError:
                        pass
                w.transport.abort()
            self._writers.clear()
        self._loop.call_soon_threadsafe(abort)

    def engage_blackhole(self) -> None:
        self.blackhole = True
        self.blackholed_at = time.monotonic()

    def refuse(self) -> None:
        """Stop listening, so a connect gets ECONNREFUSED, and RST every open connection."""
        async def stop() -> None:
            self._server.close()
            await self._server.wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        self.refusing = True
        self.reset_all()

    def accept(self) -> None:
        """Listen again on the same address after ``refuse``."""
        if not self.refusing:
            return

        async def start() -> None:
            self._server = await asyncio.start_server(self._handle, self.host, self.port, reuse_address=True)

        asyncio.run_coroutine_threadsafe(start(), self._loop).result(5)
        self.refusing = False

    def heal(self) -> None:
        self.drop_responses = False
        self.blackhole = False
        self.blackhole_after = None
        self.delay = 0.0
        if self.refusing:
            self.accept()

    def close(self) -> None:
        """Stop listening, abort every connection, stop the thread. Idempotent."""
        if not self._thread.is_alive():
            return
        self._closing = True
        self.heal()
        self.reset_all()

        async def stop() -> None:
            self._server.close()
            await self._server.wait_closed()
            # cancel the connection tasks and let each finish here, again while new ones
            # appear (accepted just before the listener closed): a task the closed loop
            # still holds fails later, when its coroutine is collected
            for _ in range(20):
                tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                if not tasks:
                    break
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                await asyncio.sleep(0)  # the closed transports' callbacks run before the loop stops

        try:
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(5)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
