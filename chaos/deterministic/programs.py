"""Can the scheduling shim control a black-box program? Decided up front, from the program file itself.

The shim is a preload library (``LD_PRELOAD``): it controls a program only if the kernel's dynamic
loader starts it and every wait of its threads goes through the C library the shim interposes. So the
program the command runs is read, not run: its ``#!`` line followed (an ``env NAME`` looked up on
``PATH``) to the ELF file the kernel executes, and that file's headers say whether it can be controlled:

* it has an interpreter (``PT_INTERP``): the dynamic loader runs it and loads the shim. A static binary
  has none (static-pie included), and no preload library ever loads into it;
* that interpreter is glibc's: the shim is built against glibc (a musl program would not load it);
* it is built for this machine (the ELF class and machine of the Python running the suite);
* it is not a Go program (a ``.go.buildinfo`` or ``.note.go.buildid`` section): Go's runtime starts its
  threads with ``clone`` and waits with ``futex`` system calls of its own, which no preload library sees.

What the file cannot show is found while the run goes on and said, never hidden: a thread that blocks
outside the shim's waits ends the run ``unknown`` with the kernel's wait channel (``SchedulerStuck``),
and a program started later that never says hello (a static binary a script runs) the same way.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import struct

#: section names a Go toolchain writes into every program it links
GO_SECTIONS = frozenset({".go.buildinfo", ".note.go.buildid", ".gopclntab"})
PT_INTERP = 3
#: how many ``#!`` lines are followed (the kernel itself follows a few)
MAX_SCRIPTS = 4


class _Unknown(Exception):
    """What runs cannot be told (its one line)."""


def control_command(command: str | None) -> tuple[bool, str]:
    """``control`` of a ``--command`` as the suite runs it (``chaos.sut.base.resolve_command``: ``chaos ...``
    and ``python ...`` are this interpreter); one that cannot be told is ``(False, its one line)``."""
    from chaos.errors import UsageError
    from chaos.sut.base import resolve_command

    try:
        return control(resolve_command(command) if command else None)
    except UsageError as e:
        return False, str(e)


def control(command: str | None, cwd: str | None = None) -> tuple[bool, str]:
    """``(True, what the program is)`` when the shim can control the program ``command`` runs, else
    ``(False, why not)``; one line each. ``cwd``: where a relative program path is looked up."""
    try:
        path, chain = _executed(command, cwd)
    except _Unknown as e:
        return False, str(e)
    ok, what = elf_controllable(path)
    via = f" (run by {' -> '.join(chain)})" if chain else ""
    return ok, f"{path}{via}: {what}"


def _executed(command: str | None, cwd: str | None) -> tuple[str, list[str]]:
    """The file the kernel executes for ``command``, and the scripts whose ``#!`` lines led there."""
    try:
        words = shlex.split(command or "")
    except ValueError as e:
        raise _Unknown(f"--command cannot be parsed: {e}") from None
    if not words:
        raise _Unknown("no --command: which program runs is not known")
    path = _find(words[0], cwd)
    if path is None:
        raise _Unknown(f"{words[0]}: not found (on PATH or as a path)")
    chain: list[str] = []
    for _ in range(MAX_SCRIPTS):
        try:
            with open(path, "rb") as f:
                head = f.read(256)
        except OSError as e:
            raise _Unknown(f"{path}: cannot be read ({e.strerror})") from None
        if not head.startswith(b"#!"):
            return path, chain
        chain.append(os.path.basename(path))
        path = _interpreter(head, path, cwd)
    raise _Unknown(f"{words[0]}: more than {MAX_SCRIPTS} #! lines in a row")


def _find(word: str, cwd: str | None) -> str | None:
    if "/" in word:
        path = os.path.join(cwd or os.getcwd(), word)
        return os.path.realpath(path) if os.path.isfile(path) else None
    found = shutil.which(word)
    return os.path.realpath(found) if found else None


def _interpreter(head: bytes, script: str, cwd: str | None) -> str:
    """The program a ``#!`` line names (an ``env [-S] NAME`` looked up on PATH)."""
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    words = line.split()
    if not words:
        raise _Unknown(f"{script}: an empty #! line")
    name = words[0]
    if os.path.basename(name) == "env":
        names = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        if not names:
            raise _Unknown(f"{script}: #!{line} names no program")
        name = names[0]
    found = _find(name, cwd)
    if found is None:
        raise _Unknown(f"{script}: #!{line}: {name} not found" + (" on PATH" if "/" not in name else ""))
    return found


def elf_controllable(path: str) -> tuple[bool, str]:
    """Read ``path``'s ELF headers (module docstring): ``(ok, one line)``."""
    try:
        with open(path, "rb") as f:
            elf = _Elf(f)
            if not elf.ok:
                return False, "neither an ELF program nor a #! script: what runs it is not known"
            bits, machine = _this_machine()
            if (elf.bits, elf.machine) != (bits, machine):
                return False, (f"a {elf.bits}-bit program for ELF machine {elf.machine}: the shim is built for "
                               f"this machine's {bits}-bit one ({machine})")
            if GO_SECTIONS & elf.section_names(f):
                return False, ("a Go program: its runtime starts threads with clone and waits with futex system "
                               "calls of its own, which no preload library sees")
            interp = elf.interpreter(f)
    except (OSError, struct.error) as e:
        return False, f"its ELF headers cannot be read ({e})"
    if interp is None:
        return False, "a static binary: it has no dynamic loader, so no preload library (the shim) loads into it"
    if "musl" in os.path.basename(interp):
        return False, f"a musl program ({interp}): the shim is built against glibc"
    return True, f"a dynamically linked program ({interp}): the shim loads into it"


@functools.cache
def _this_machine() -> tuple[int, int]:
    """The ELF class (bits) and machine of the Python running the suite: what the shim is built for."""
    with open("/proc/self/exe", "rb") as f:
        elf = _Elf(f)
    return elf.bits, elf.machine


class _Elf:
    """The few ELF header fields read here."""

    def __init__(self, f):
        head = f.read(64)
        self.ok = head[:4] == b"\x7fELF" and head[4] in (1, 2) and head[5] in (1, 2) and len(head) >= 52
        if not self.ok:
            return
        self.bits = 64 if head[4] == 2 else 32
        e = "<" if head[5] == 1 else ">"
        self.e = e
        (self.machine,) = struct.unpack_from(e + "H", head, 18)
        if self.bits == 64:
            self.phoff, self.shoff = struct.unpack_from(e + "QQ", head, 0x20)
            self.phentsize, self.phnum, self.shentsize, self.shnum, self.shstrndx = struct.unpack_from(e + "HHHHH",
                                                                                                     head, 0x36)
        else:
            self.phoff, self.shoff = struct.unpack_from(e + "II", head, 0x1C)
            self.phentsize, self.phnum, self.shentsize, self.shnum, self.shstrndx = struct.unpack_from(e + "HHHHH",
                                                                                                     head, 0x2A)

    def interpreter(self, f) -> str | None:
        """The ``PT_INTERP`` path, None when there is none."""
        for i in range(min(self.phnum, 512)):
            f.seek(self.phoff + i * self.phentsize)
            ph = f.read(self.phentsize)
            (p_type,) = struct.unpack_from(self.e + "I", ph, 0)
            if p_type != PT_INTERP:
                continue
            word, offset_at, size_at = ("Q", 8, 32) if self.bits == 64 else ("I", 4, 16)   # p_offset, p_filesz
            (offset,) = struct.unpack_from(self.e + word, ph, offset_at)
            (size,) = struct.unpack_from(self.e + word, ph, size_at)
            f.seek(offset)
            return f.read(min(size, 4096)).split(b"\0", 1)[0].decode("utf-8", "replace")
        return None

    def section_names(self, f) -> set[str]:
        if not self.shoff or not self.shnum or self.shstrndx >= self.shnum:
            return set()
        entries = []
        for i in range(min(self.shnum, 4096)):
            f.seek(self.shoff + i * self.shentsize)
            sh = f.read(self.shentsize)
            name = struct.unpack_from(self.e + "I", sh, 0)[0]
            offset, size = struct.unpack_from(self.e + ("QQ" if self.bits == 64 else "II"), sh,
                                              0x18 if self.bits == 64 else 0x10)
            entries.append((name, offset, size))
        _, str_off, str_size = entries[self.shstrndx]
        f.seek(str_off)
        table = f.read(min(str_size, 1 << 20))
        return {table[n:table.find(b"\0", n)].decode("utf-8", "replace") for n, _, _ in entries if n < len(table)}
