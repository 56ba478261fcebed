"""Bounded loading of every YAML and JSON file the suite reads.

Matrices, scenarios, profiles, ``test.yaml``, ``results.json``, histories,
manifests and the JSON that arrives on a command line all come through here,
so that no input can cost more than its limit: a file larger than
``max_bytes`` is refused after reading ``max_bytes + 1`` bytes (a 15 MB matrix
fails in milliseconds instead of parsing for a minute), and a YAML document is
first walked as an event stream that counts aliases, the nodes the aliases
would expand to, and the nesting depth, before anything is built (a 365-byte
billion-laughs file fails at once instead of expanding to hundreds of MB).

Every refusal is a ``LoadError``: one line that names the file and, when a
limit was hit, the limit. Only regular files are read (a FIFO or a device
would block or never end); opening never blocks.

PyYAML's C parser is used when it is installed (libyaml), its pure-Python
parser otherwise; both give YAML 1.1 ``safe_load`` semantics, as before.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass


def _yaml():
    """PyYAML and its loader, imported on first use: a per-call contract CLI
    (``chaos backend ...``) that never reads YAML does not pay for it."""
    import yaml

    return yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LoadError(ValueError):
    """A file (or text) that cannot be loaded within its limits; one line."""


@dataclass(frozen=True)
class Limits:
    max_bytes: int
    max_aliases: int = 100
    max_nodes: int = 200_000     # after alias expansion
    max_depth: int = 100

    def describe_bytes(self) -> str:
        return _size(self.max_bytes)


#: hand-written configuration: matrices, scenarios, profiles, test.yaml
CONFIG = Limits(max_bytes=1 << 20)
#: results.json and other machine-written summaries
RESULTS = Limits(max_bytes=256 << 20, max_depth=200)
#: a history (history.jsonl) as a whole
HISTORY = Limits(max_bytes=4 << 30, max_depth=200)
#: one conformance manifest (the largest of the 18 is 48 KB)
MANIFEST = Limits(max_bytes=4 << 20, max_depth=200)


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} bytes"


def _first_line(text: str, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def open_regular(path: str | os.PathLike, what: str = "file"):
    """A binary file object for a regular file at ``path``; never blocks on a FIFO."""
    shown = os.fspath(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise LoadError(f"{what} {shown}: no such file") from None
    except IsADirectoryError:
        raise LoadError(f"{what} {shown}: is a directory, not a file") from None
    except OSError as e:
        raise LoadError(f"{what} {shown}: cannot open ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise LoadError(f"{what} {shown}: is a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise LoadError(f"{what} {shown}: not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | os.PathLike, limits: Limits, what: str = "file") -> bytes:
    """The whole file, or ``LoadError`` if it holds more than ``limits.max_bytes``."""
    with open_regular(path, what) as f:
        try:
            data = f.read(limits.max_bytes + 1)
        except OSError as e:
            raise LoadError(f"{what} {os.fspath(path)}: cannot read ({e.strerror or e})") from None
    if len(data) > limits.max_bytes:
        raise LoadError(f"{what} {os.fspath(path)}: larger than the {limits.describe_bytes()} limit")
    return data


def _decode(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LoadError(f"{where}: not UTF-8 text (byte {e.start})") from None


# ------------------------------------------------------------------ YAML


def yaml_file(path: str | os.PathLike, limits: Limits = CONFIG, what: str = "file"):
    """``yaml.safe_load`` of a file, within ``limits``."""
    data = read_bytes(path, limits, what)
    return yaml_text(_decode(data, f"{what} {os.fspath(path)}"), limits, f"{what} {os.fspath(path)}")


def yaml_text(text: str, limits: Limits = CONFIG, where: str = "YAML"):
    """``yaml.safe_load`` of ``text`` after the event walk has checked the limits."""
    if len(text.encode("utf-8", "surrogatepass")) > limits.max_bytes:
        raise LoadError(f"{where}: larger than the {limits.describe_bytes()} limit")
    yaml, loader = _yaml()
    try:
        _check_events(text, limits, where)
        return yaml.load(text, Loader=loader)
    except yaml.YAMLError as e:
        raise LoadError(f"{where}: not valid YAML ({_yaml_problem(e)})") from None
    except RecursionError:
        raise LoadError(f"{where}: nested deeper than the {limits.max_depth}-level limit") from None


def _yaml_problem(e) -> str:
    """A one-line description of a ``yaml.YAMLError``."""
    problem = getattr(e, "problem", None)
    mark = getattr(e, "problem_mark", None)
    if problem and mark is not None:
        return _first_line(f"{problem} at line {mark.line + 1}, column {mark.column + 1}")
    return _first_line(str(e))


def _check_events(text: str, limits: Limits, where: str) -> None:
    """Count what construction would build, from the parser's events only.

    ``anchors`` holds the expanded node count of each finished anchored node;
    an alias adds that count. An alias to a collection still open (a recursive
    alias) would make the document infinite and is refused; so is a mapping
    that names the same plain key twice (``safe_load`` would keep the last
    silently, and a config that says ``seeds`` twice is a mistake).
    """
    from yaml.events import (AliasEvent, CollectionEndEvent, CollectionStartEvent, DocumentStartEvent,
                             MappingStartEvent, ScalarEvent)

    loader = _yaml()[1](text)
    try:
        nodes = aliases = documents = 0
        anchors: dict[str, int] = {}
        open_: list[_Open] = []
        while loader.check_event():
            event = loader.get_event()
            parent = open_[-1] if open_ else None
            if isinstance(event, DocumentStartEvent):
                documents += 1
                if documents > 1:
                    raise LoadError(f"{where}: more than one YAML document")
                continue
            if isinstance(event, CollectionEndEvent):
                done = open_.pop()
                if done.anchor is not None:
                    anchors[done.anchor] = nodes - done.start
                parent = None  # the parent's key/value turn moved when this collection started
            elif isinstance(event, ScalarEvent):
                nodes += 1
                if event.anchor is not None:
                    anchors[event.anchor] = 1
                if parent is not None and parent.keys is not None and parent.at_key:
                    if event.value in parent.keys:
                        mark = event.start_mark
                        raise LoadError(f"{where}: duplicate key {_first_line(event.value, 60)!r} at line "
                                        f"{mark.line + 1}")
                    parent.keys.add(event.value)
            elif isinstance(event, AliasEvent):
                aliases += 1
                if aliases > limits.max_aliases:
                    raise LoadError(f"{where}: more than the {limits.max_aliases}-alias limit")
                if any(o.anchor == event.anchor for o in open_):
                    raise LoadError(f"{where}: recursive alias *{event.anchor}")
                nodes += anchors.get(event.anchor, 1)
            elif isinstance(event, CollectionStartEvent):
                if len(open_) >= limits.max_depth:
                    raise LoadError(f"{where}: nested deeper than the {limits.max_depth}-level limit")
                if event.anchor is not None:
                    anchors.pop(event.anchor, None)
                if parent is not None and parent.keys is not None:
                    parent.at_key = not parent.at_key
                open_.append(_Open(event.anchor, nodes, set() if isinstance(event, MappingStartEvent) else None))
                nodes += 1
                parent = None
            if parent is not None and parent.keys is not None:
                parent.at_key = not parent.at_key
            if nodes > limits.max_nodes:
                raise LoadError(f"{where}: expands to more than the {limits.max_nodes:,}-node limit"
                                f"{' (aliases)' if aliases else ''}")
    finally:
        loader.dispose()


class _Open:
    """A collection being parsed: its anchor, the node count at its start and,
    for a mapping, the plain keys seen so far and whether a key comes next."""

    __slots__ = ("anchor", "start", "keys", "at_key")

    def __init__(self, anchor: str | None, start: int, keys: set | None):
        self.anchor, self.start, self.keys, self.at_key = anchor, start, keys, True


# ------------------------------------------------------------------ JSON


def json_file(path: str | os.PathLike, limits: Limits = RESULTS, what: str = "file"):
    """``json.loads`` of a file, within ``limits``."""
    data = read_bytes(path, limits, what)
    return json_text(data, limits, f"{what} {os.fspath(path)}")


def json_text(text: str | bytes, limits: Limits = CONFIG, where: str = "JSON"):
    """``json.loads`` of ``text``, bounded in size; deep nesting is a ``LoadError``."""
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > limits.max_bytes:
        raise LoadError(f"{where}: larger than the {limits.describe_bytes()} limit")
    if isinstance(text, bytes):
        text = _decode(text, where)
    try:
        return json.loads(text)
    except RecursionError:
        raise LoadError(f"{where}: nested too deeply to be JSON the suite reads") from None
    except ValueError as e:
        raise LoadError(f"{where}: not valid JSON ({_first_line(str(e))})") from None


def json_lines(path: str | os.PathLike, limits: Limits = HISTORY, what: str = "history"):
    """Yield ``(line_number, raw_line)`` of a JSON-lines file, within ``limits.max_bytes`` in all.

    Lines are handed out raw so each reader keeps its own policy for a torn
    tail or a corrupt line; parse each with ``json_line``.
    """
    total = 0
    with open_regular(path, what) as f:
        for n, raw in enumerate(f, 1):
            total += len(raw)
            if total > limits.max_bytes:
                raise LoadError(f"{what} {os.fspath(path)}: larger than the {limits.describe_bytes()} limit")
            yield n, raw


def json_line(raw: bytes):
    """One history line: ``json.loads``, with deep nesting a ``ValueError`` like any bad line."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("nested too deeply") from None
