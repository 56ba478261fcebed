"""``chaos.deterministic.poller.ReadPoller``, what the scheduler's loop waits on, keeps what
``selectors`` gave it: an event of a batch whose file an earlier event unregistered or re-registered
is not current; a file closed since its registration is still found (by identity) to unregister;
registering a file twice is an error. Real sockets and pipes."""

from __future__ import annotations

import os
import socket

import pytest

from chaos.deterministic.poller import ReadPoller


def test_ready_files_their_keys_and_what_is_current():
    poller = ReadPoller()
    a, a_peer = socket.socketpair()
    b, b_peer = socket.socketpair()
    try:
        poller.register(a, ("thread", "a"))
        poller.register(b, ("hello", "b"))
        assert poller.select(0) == []                      # nothing to read yet: no wait
        a_peer.sendall(b"x\n")
        b_peer.close()                                     # a closed peer reads as ready (EOF)
        keys = poller.select(1.0)
        assert sorted(k.data[1] for k in keys) == ["a", "b"]
        assert all(poller.current(k) for k in keys)
        old = next(k for k in keys if k.data[1] == "b")
        poller.modify(b, ("thread", "b"))                  # new data: the batch's key is no longer current
        assert not poller.current(old)
        poller.unregister(a)
        assert not poller.current(next(k for k in keys if k.data[1] == "a"))
        assert [k.data for k in poller.select(0)] == [("thread", "b")]
        with pytest.raises(KeyError):
            poller.unregister(a)
        with pytest.raises(KeyError):
            poller.register(b, ("thread", "b"))
    finally:
        poller.close()
        for s in (a, a_peer, b):
            s.close()


def test_a_file_closed_since_it_was_registered_is_unregistered_by_identity():
    poller = ReadPoller()
    r, w = os.pipe()
    reader = os.fdopen(r, "rb")
    conn, peer = socket.socketpair()
    try:
        poller.register(reader, ("control", None))
        poller.register(conn, ("thread", None))
        conn.close()                      # fileno() is -1 now
        poller.unregister(conn)
        reader.close()                    # fileno() raises now
        poller.unregister(reader)
        assert poller.select(0) == []
        fd, other = os.pipe()
        try:
            poller.register(fd, ("exit", None))       # an int, as a pidfd is
            poller.unregister(int(str(fd)))           # the same number, another int object
        finally:
            os.close(fd)
            os.close(other)
    finally:
        poller.close()
        os.close(w)
        peer.close()
