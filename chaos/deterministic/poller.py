"""What the scheduler's loop waits on: its listener, every controlled thread's connection, the workers'
control pipes and every process's pidfd, all for reading.

``selectors.EpollSelector`` did this, but its per-event bookkeeping (a key object made per event, a
lookup through ``get_map()`` to see that a key is still registered) cost about a tenth of the harness's
own CPU: the loop waits once per scheduling point, some 60,000 times in a 20-s sqlite run. This keeps
the same behaviour (a key per registration, a new one when its data changes, a closed file found by
identity) over one dict.
"""

from __future__ import annotations

import select
from dataclasses import dataclass


@dataclass(eq=False)
class Key:
    fileobj: object
    fd: int
    data: object


class ReadPoller:
    def __init__(self):
        self._epoll = select.epoll()
        self._keys: dict[int, Key] = {}

    def register(self, fileobj, data) -> None:
        fd = self._fd(fileobj)
        if fd in self._keys:
            raise KeyError(f"{fileobj!r} (fd {fd}) is already registered")
        self._epoll.register(fd, select.EPOLLIN)
        self._keys[fd] = Key(fileobj, fd, data)

    def modify(self, fileobj, data) -> None:
        """New data for a registered file: a new key (an event of the batch under way for the old one is
        no longer current)."""
        key = self._keys[self._registered_fd(fileobj)]
        self._keys[key.fd] = Key(fileobj, key.fd, data)

    def unregister(self, fileobj) -> None:
        """``KeyError`` if it is not registered; a file closed since is found by identity."""
        key = self._keys.pop(self._registered_fd(fileobj))
        try:
            self._epoll.unregister(key.fd)
        except OSError:   # closed already: the kernel dropped it from the epoll set
            pass

    def select(self, timeout: float) -> list[Key]:
        """The keys whose files are readable (or closed) within ``timeout`` seconds (rounded up to a
        millisecond by epoll's own conversion; 0 or less: no wait)."""
        keys = self._keys
        return [keys[fd] for fd, _ in self._epoll.poll(max(timeout, 0.0), max(len(keys), 1)) if fd in keys]

    def current(self, key: Key) -> bool:
        """Whether ``key`` is still its file's registration (an earlier event of the batch may have
        unregistered or modified it)."""
        return self._keys.get(key.fd) is key

    def close(self) -> None:
        self._keys.clear()
        self._epoll.close()

    @staticmethod
    def _fd(fileobj) -> int:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        if fd < 0:
            raise ValueError(f"{fileobj!r} has no file descriptor")
        return fd

    def _registered_fd(self, fileobj) -> int:
        try:
            fd = self._fd(fileobj)
            if fd in self._keys and (isinstance(fileobj, int) or self._keys[fd].fileobj is fileobj):
                return fd
        except (AttributeError, TypeError, ValueError, OSError):
            pass
        for key in self._keys.values():   # closed since it was registered, or its fd reused: by identity
            if key.fileobj is fileobj:
                return key.fd
        raise KeyError(f"{fileobj!r} is not registered")
