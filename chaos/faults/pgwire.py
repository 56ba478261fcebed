"""Which SQL statements a PostgreSQL client's request stream runs (frontend
protocol v3), for the fault proxy's "cut after the next COMMIT".

A plain byte match on ``COMMIT\\0`` sees a statement only while its text is on
the wire. psycopg prepares a query it has run ``prepare_threshold`` (5) times
and from then on sends only ``Bind`` with the statement's name, so after a
connection's fifth COMMIT a byte match never fires again and the cut never
engages. ``FrontendScanner`` follows the message boundaries of one connection
from its start, remembers the text of every named statement its ``Parse``
messages define, and reports for each chunk the texts of the statements the
chunk's ``Query``, unnamed ``Parse`` and ``Bind`` messages run.

Untyped start-up packets come first (an ``SSLRequest`` or ``GSSENCRequest``
answered "no", then the ``StartupMessage``). A stream it cannot follow (TLS
after an accepted ``SSLRequest``, a malformed length) turns the scanner off:
``feed`` returns None from then on and the caller falls back to a byte match.
"""

from __future__ import annotations

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104
MAX_MESSAGE = 64 << 20


class FrontendScanner:
    """One connection's frontend messages, fed chunk by chunk."""

    def __init__(self):
        self.buf = b""
        self.startup = True
        self.named: dict[bytes, bytes] = {}   # prepared statement name -> its SQL text
        self.lost = False

    def feed(self, chunk: bytes) -> list[bytes] | None:
        """The SQL texts the complete messages of ``chunk`` (with what came
        before) run, in order; None once the stream cannot be followed."""
        if self.lost:
            return None
        self.buf += chunk
        out: list[bytes] = []
        while True:
            if self.startup:
                if len(self.buf) < 8:
                    break
                n = int.from_bytes(self.buf[:4], "big")
                if not 8 <= n <= MAX_MESSAGE:
                    return self._lose()
                if len(self.buf) < n:
                    break
                code = int.from_bytes(self.buf[4:8], "big")
                self.buf = self.buf[n:]
                if code not in (SSL_REQUEST, GSSENC_REQUEST):
                    self.startup = False
                continue
            if len(self.buf) < 5:
                break
            kind, n = self.buf[:1], int.from_bytes(self.buf[1:5], "big")
            if not 4 <= n <= MAX_MESSAGE:
                return self._lose()
            if len(self.buf) < 1 + n:
                break
            body, self.buf = self.buf[5:1 + n], self.buf[1 + n:]
            self._message(kind, body, out)
        return out

    def _message(self, kind: bytes, body: bytes, out: list[bytes]) -> None:
        parts = body.split(b"\0", 2)
        if kind == b"Q":                       # simple query: its text
            out.append(parts[0])
        elif kind == b"P" and len(parts) >= 2:  # Parse: name, text
            if parts[0]:
                self.named[parts[0]] = parts[1]
            else:
                out.append(parts[1])            # unnamed: bound and run right after
        elif kind == b"B" and len(parts) >= 2:  # Bind: portal, statement name
            if parts[1] and parts[1] in self.named:
                out.append(self.named[parts[1]])
        elif kind == b"C" and body[:1] == b"S":  # Close of a prepared statement
            self.named.pop(body[1:].split(b"\0", 1)[0], None)

    def _lose(self) -> None:
        self.lost, self.buf = True, b""
        return None
