"""The history, read once: classification, and one ``History`` type shared by
every checker and by the reports.

``history.jsonl`` (docs/architecture.md, "History") is one JSON object per
line: ``index, time, process, type, f, value`` and, on harness-side failures,
``error``. ``History.read(path)`` streams it from disk once; ``History.of(records)``
builds the same thing from records already in memory (the runner's, a test's).
Either way every client invoke is paired with the next completion of its
process, instants are parsed to integer milliseconds, tuples, owners and
revisions are interned, and the raw dicts are dropped: each client operation
is one compact ``Op`` holding exactly what the checkers read (a million ops
fit in about 1.1 GB, with the checkers' own tables). What needs the raw reply
is done while it is in hand: the envelope shape check (``envelope_problems``),
the request check of publish, acquire, renew and release and the candidate
check (``request_problems``), the identity
of stored envelopes (``env_id``, a digest of canonical JSON) and the worker's
reply-protocol evidence (``protocol``). ``History.read(path, jobs=2)`` does the
two raw-reply checks in a helper process reading the same file
(``raw_findings``, ``_RawHelper``) while this one builds the ops.

Real-time order is the order of the file: op A *precedes* op B when A's
completion was appended before B's invocation (``A.cp < B.ip``).
"""

from __future__ import annotations

import base64
import binascii
import gc
import hashlib
import json
import os
import pickle
import signal
import subprocess
import tempfile
import sys
import weakref
from array import array
from typing import Any, Iterable, Iterator

import orjson

from backends import safeload
from backends.contract.digests import operation_digest
from checkers.raw.envelopes import envelope_problems
from checkers.raw.requests import CHECKED_OPS, request_problems
from checkers.wire import epoch_int, instant_ms

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
COMPLETIONS = (OK, FAIL, INFO)

#: How a reply is recorded, by the contract's own words (§4, §5, §6, §8). The
#: first matching row wins; this table is the rule, ``classify`` applies it, and
#: docs/architecture.md ("Classification") prints it.
CLASSIFICATION = (
    ("exit 0, `ok: true`, any `state` but `unknown` (`committed`; none for capabilities; the issue lock's "
     "`changed` / `unchanged`)", OK),
    ("exit != 0, `ok: false`, `state: \"unchanged\"`: every semantic refusal, and exit 6 "
     "`clock-floor-persistence-failed`, `claim-store-unavailable`, `epoch-exhausted` (the reply says "
     "nothing changed)", FAIL),
    ("`state: \"unknown\"`: exit 6 `publication-outcome-unknown`, `claim-verify` findings (the reply says "
     "the outcome is unknown)", INFO),
    ("no reply: crash, timeout, lost reply, unparseable output, not a JSON object", INFO),
    ("anything else: a reply contradicting itself (exit 0 with `ok: false`, exit 4 with `state: "
     "\"committed\"`, ...) proves nothing; the `envelopes` checker reports it", INFO),
)


def classification_table() -> str:
    """``CLASSIFICATION`` as the table docs/architecture.md prints (a test keeps the two equal)."""
    rows = [f"| {reply} | `{kind}` |" for reply, kind in CLASSIFICATION]
    return "\n".join(["| reply | recorded |", "|---|---|", *rows])


def classify(exit_code: int | None, envelope: dict | None) -> str:
    """``ok`` / ``fail`` / ``info`` for one reply, by ``CLASSIFICATION``.

    ``fail`` means the reply itself says nothing changed (``state:
    "unchanged"``): a definite answer, which a checker may hold the backend
    to. ``info`` only when the reply says the outcome is unknown, or there is
    no (coherent) reply at all. ``None`` for either argument is no reply.
    """
    if not isinstance(exit_code, int) or isinstance(exit_code, bool) or not isinstance(envelope, dict):
        return INFO
    state, ok = envelope.get("state"), envelope.get("ok")
    if exit_code == 0:
        return OK if ok is True and state != "unknown" else INFO
    if ok is False and state == "unchanged":
        return FAIL
    return INFO


# --------------------------------------------------------------------------- values, parsed one way

#: an ``active`` member that is neither ``null`` nor an object (the envelopes checker reports it)
BAD = ("<malformed>",)

_json_decode = json.JSONDecoder().decode
_NAN = float("nan")
#: 19 digits in a row (found as 19 zeros once every digit is a zero): maybe an integer past 64 bits,
#: which orjson reads as a float; and ``{`` as ``[`` (one count of the brackets)
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789{", b"000000000[")
_LONG_NUMBER = b"0" * 19
_QUOTE, _ZERO = ord('"'), ord("0")


def _maybe_long_number(folded: bytes) -> bool:
    """Might a run of 19 digits (``folded``: every digit a zero) be a number?
    A number's digits never follow a quote; a string's may (the canonical
    epochs ``"18446744073709551614"`` of a busy history, one line in seven)."""
    at = folded.find(_LONG_NUMBER)
    while at >= 0:  # ``at`` starts a run: the search resumes past the end of the one before
        if at == 0 or folded[at - 1] != _QUOTE:
            return True
        end = at + len(_LONG_NUMBER)
        while end < len(folded) and folded[end] == _ZERO:
            end += 1
        at = folded.find(_LONG_NUMBER, end)
    return False


def decode_line(raw: bytes) -> Any:
    """One history line, exactly as ``json`` reads its UTF-8 text (bytes that
    are not UTF-8 surrogate-escaped). orjson reads most lines, about three
    times faster, and gives the same value for the lines it takes; the rest
    go to ``json``: orjson refuses NaN, infinities, lone surrogates, bytes
    that are not UTF-8 and nesting past 1024 levels (``json`` may refuse
    less deep), and reads integers past 64 bits as floats, so a line with 19
    digits in a row that do not follow a quote, or many brackets, never reaches it
    (tests/test_history_decode.py diffs the two)."""
    folded = raw.translate(_DIGITS_AS_ZERO)
    if folded.count(b"[") < 200 and (_LONG_NUMBER not in folded or not _maybe_long_number(folded)):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return _json_decode(raw.decode("utf-8", "surrogateescape"))


#: ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)``,
#: without building an encoder per call
canonical = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode


def envelope_id(exit_code: Any, envelope: Any) -> bytes:
    """The identity of a reply ``{exit, envelope}``: a digest of its canonical
    JSON. Two replies are the same stored envelope iff their ids are equal."""
    return hashlib.blake2b(canonical({"exit": exit_code, "envelope": envelope}).encode(), digest_size=16).digest()


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _Interner(dict):
    """Equal values share one object (tuples, owners, revisions, instants):
    ``intern(value)``, or ``intern.setdefault(value, value)`` where it is hot
    (no Python frame; ``None`` maps to itself either way)."""

    def __call__(self, value):
        return self.setdefault(value, value)


# --------------------------------------------------------------------------- one client operation


class Op:
    """One client operation: its invocation and (maybe) its completion, parsed.

    Where: ``ip``/``cp`` positions in the history (real-time order), ``i``/``c``
    the ``index`` members anomalies cite (the runner's ns and the worker's
    wall clock are columns of the ``History``: ``History.times(n)``).
    What: ``f``, ``key`` = ``(ledger_namespace, item_id)``, ``type`` (``info``
    while never completed), ``exit``, ``state``, ``code``.

    Request (by ``f``): ``owner`` (claim ops; the fence owner of a publish),
    ``lease``, the acquire witness ``w_le``/``w_active``, ``epoch`` (renew,
    release; the fence epoch of a publish), ``exp_expires`` (renew, release),
    ``oid``, ``digest``, ``exp_rev``, ``cand``, ``fence_key`` (publish).

    Reply: ``t`` (the decision / observation time the reply states), the
    record it shows, ``le``/``active`` (``le`` is ``None`` when it shows none),
    ``claim`` (``claim`` or ``released_claim``), ``committed`` and
    ``fence_echo`` (publish), ``det`` (code-specific details, read through the
    properties below) and ``env_id`` (publish replies). An active claim is
    ``(owner_id, epoch, issued_at_ms, expires_at_ms)`` with ``None`` for a
    malformed member; ``BAD`` when ``active`` is not an object or null.
    """

    __slots__ = ("i", "c", "ip", "cp", "process", "error",
                 "f", "key", "type", "exit", "state", "code",
                 "owner", "lease", "w_le", "w_active", "epoch", "exp_expires",
                 "oid", "digest", "exp_rev", "cand", "fence_key",
                 "t", "le", "active", "claim", "committed", "fence_echo", "det", "env_id", "definite")

    def __init__(self, ip: int, i: Any, process: Any, f: Any):
        self.ip = ip
        self.i = ip if i == ip else i  # one int object when they agree (they do in the runner's files)
        self.process = process
        self.f = f
        self.c = self.cp = self.error = None
        self.key = None
        self.type = INFO
        self.exit = self.state = self.code = None
        self.owner = self.lease = self.w_le = self.w_active = self.epoch = self.exp_expires = None
        self.oid = self.digest = self.exp_rev = self.cand = self.fence_key = None
        self.t = self.le = self.active = self.claim = self.committed = self.fence_echo = None
        self.det = self.env_id = None
        self.definite = False  # the reply proves what happened (ok or fail, with an envelope)

    # ------------------------------------------------------------------ status

    @property
    def indices(self) -> list[int]:
        return [self.i] if self.c is None else [self.i, self.c]

    @property
    def uncertain(self) -> bool:
        """It may or may not have taken effect (``info`` or never completed)."""
        return self.type != OK and self.type != FAIL

    def tuple(self) -> tuple[str, str] | None:
        return self.key

    def precedes(self, other: "Op") -> bool:
        """Real time: this op completed before ``other`` was invoked."""
        return self.cp is not None and self.cp < other.ip

    # ------------------------------------------------------------------ details by code

    @property
    def reason(self) -> str | None:
        """claim-fence-rejected: ``details.reason``."""
        return self.det[0] if self.code == "claim-fence-rejected" and self.det else None

    @property
    def fence_details(self) -> tuple:
        """claim-fence-rejected: ``(reason, supplied_owner_id, supplied_epoch,
        active_owner_id, active_epoch)`` (epochs as ints or ``None``)."""
        return self.det if self.code == "claim-fence-rejected" and self.det else (None,) * 5

    @property
    def conflict_revisions(self) -> tuple:
        """ledger-revision-conflict: ``(expected_revision, actual_revision)`` of the details."""
        return self.det if self.code == "ledger-revision-conflict" and self.det else (None, None)

    @property
    def conflict_digests(self) -> tuple:
        """idempotency-conflict: ``(expected_operation_digest, actual_operation_digest)``."""
        return self.det if self.code == "idempotency-conflict" and self.det else (None, None)

    @property
    def outcome(self) -> tuple:
        """publication-read ok: ``(operation_id, operation_digest, outcome exit,
        outcome env_id, outcome spec, outcome error code)`` (see ``outcome_spec``)."""
        return self.det if self.f == "publication-read" and self.type == OK and self.det else (None,) * 6

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Op({self.f} {self.type} i={self.i} c={self.c} p={self.process})"


def outcome_spec(exit_code: Any, env: Any) -> tuple | None:
    """What a publication reply decided, as a small tuple the claim model can
    compare with what the contract prescribes (``None``: not a decision):

    * ``("ok", committed_revision, (last_epoch, active), t)``
    * ``("claim-fence-rejected", reason, active_owner_id, active_epoch, t)``
    * ``("ledger-revision-conflict", expected_revision, actual_revision)``
    """
    env = _obj(env)
    if exit_code == 0 and env.get("ok") is True:
        r = _obj(env.get("result"))
        rb = _obj(r.get("claim_read_back"))
        return ("ok", _str(r.get("committed_revision")), (epoch_int(rb.get("last_epoch")), _active(rb)),
                instant_ms(rb.get("observed_at")))
    err = _obj(env.get("error"))
    d = _obj(err.get("details"))
    code = err.get("code")
    if code == "claim-fence-rejected":
        return (code, _str(d.get("reason")), _str(d.get("active_owner_id")), epoch_int(d.get("active_epoch")),
                instant_ms(d.get("observed_at")))
    if code == "ledger-revision-conflict":
        return (code, _str(d.get("expected_revision")), _str(d.get("actual_revision")))
    return None


def outcome_code(env: Any) -> str | None:
    """A stored outcome's error code (None for a success or a malformed envelope)."""
    code = _obj(_obj(env).get("error")).get("code")
    return code if isinstance(code, str) else None


_INTERN_ACTIVE = _Interner()


def _active_of(value: Any) -> tuple | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        return BAD
    return _INTERN_ACTIVE((_str(value.get("owner_id")), epoch_int(value.get("epoch")),
                           instant_ms(value.get("issued_at")), instant_ms(value.get("expires_at"))))


def _active(rb: dict) -> tuple | None:
    return _active_of(rb["active"]) if "active" in rb else BAD


# --------------------------------------------------------------------------- the final durable state


#: outcomes per ``final-state`` record: a big export is split over several
#: consecutive records, so no reader ever holds one huge line (``final_state_records``)
FINAL_CHUNK = 1000


def final_state_records(durable: dict, chunk: int = FINAL_CHUNK) -> list[dict]:
    """The runner's ``final-state`` history records for a durable export
    (manifest-shaped): the first holds the claims, floors and ledgers, each
    holds at most ``chunk`` publication outcomes; a reader merges them in order."""
    if "publication_outcomes" not in durable:  # another protocol's export: one record, as it is
        return [{"process": "nemesis", "type": "info", "f": "final-state", "value": {"durable": durable}}]
    outcomes = list(durable.get("publication_outcomes") or [])
    head = {k: v for k, v in durable.items() if k != "publication_outcomes"}
    parts = [outcomes[i:i + chunk] for i in range(0, len(outcomes), chunk)] or [[]]
    recs = []
    for n, part in enumerate(parts):
        value = dict(head) if n == 0 else {}
        value["publication_outcomes"] = part
        recs.append({"process": "nemesis", "type": "info", "f": "final-state",
                     "value": {"durable": value, "part": n, "parts": len(parts)}})
    return recs


class FinalState:
    """The runner's final durable export, compact (``final-state`` records, merged):

    * ``claims``: ``(ns, item) -> (last_epoch | None, active tuple | None | BAD)``;
    * ``floors``: ``ns -> (ms | None, text)``;
    * ``ledgers``: ``(ns, item) -> (revision, digest of the bytes | None)``;
    * ``outcomes``: ``[(operation_id, ns, item, operation_digest, exit, env_id, spec)]``
      (``spec`` as ``outcome_spec``; ``env_id`` of ``{exit, envelope: stdout}``);
    * ``index``: the history index of the first ``final-state`` record;
    * ``observed``: the arrays the export observed (a black-box export of
      item files: ``{"ledgers"}``; the others are not compared);
    * ``git_items``: ``(ns, item, commit) -> revision`` of a Git-backed black-box export.
    """

    def __init__(self, index: int) -> None:
        self.index = index
        self.observed = {"claims", "clock_floors", "ledgers", "publication_outcomes"}
        self.git_items: dict[tuple, Any] = {}
        self.claims: dict[tuple, tuple] = {}
        self.floors: dict[str, tuple] = {}
        self.ledgers: dict[tuple, tuple] = {}
        self.outcomes: list[tuple] = []

    def add(self, durable: dict) -> None:
        if isinstance(durable.get("observed"), list):
            self.observed = {x for x in durable["observed"] if isinstance(x, str)}
        for g in _obj(durable.get("git")).get("items") or ():
            g = _obj(g)
            self.git_items[(g.get("ledger_namespace"), g.get("item_id"), g.get("commit"))] = g.get("revision")
        for c in durable.get("claims") or ():
            c = _obj(c)
            self.claims[(c.get("ledger_namespace"), c.get("item_id"))] = (
                epoch_int(c.get("last_epoch")), _active_of(c.get("active")) if "active" in c else BAD)
        for f in durable.get("clock_floors") or ():
            f = _obj(f)
            self.floors[f.get("ledger_namespace")] = (instant_ms(f.get("observed_at")), f.get("observed_at"))
        for led in durable.get("ledgers") or ():
            led = _obj(led)
            try:
                data = base64.b64decode(led.get("source_base64", ""), validate=True)
                digest = "sha256:" + hashlib.sha256(data).hexdigest()
            except (binascii.Error, TypeError, ValueError):
                digest = None
            self.ledgers[(led.get("ledger_namespace"), led.get("item_id"))] = (led.get("revision"), digest)
        for rec in durable.get("publication_outcomes") or ():
            rec = _obj(rec)
            env = _obj(rec.get("envelope"))
            self.outcomes.append((rec.get("operation_id"), rec.get("ledger_namespace"), rec.get("item_id"),
                                  rec.get("operation_digest"), env.get("exit"),
                                  envelope_id(env.get("exit"), env.get("stdout")),
                                  outcome_spec(env.get("exit"), env.get("stdout")), outcome_code(env.get("stdout"))))


# --------------------------------------------------------------------------- the history


class History:
    """A history, read once. ``ops`` are the client operations in invoke order;
    ``events`` is real-time order (``op_number << 1 | is_completion`` per
    history line of a client op); ``nemesis`` the nemesis records (raw);
    ``final`` the runner's final durable state (``FinalState``, or ``None``);
    ``capabilities`` the raw envelopes of ok capabilities replies;
    ``envelope_problems`` the shape findings ``(op, [problem])``;
    ``request_problems`` what a publish reply accepted that its raw request
    should have been refused for ``(op, kind, data)`` (``checkers.invariants.requests``);
    ``problems`` what could not be read (torn tail, corrupt lines);
    ``protocol`` the raw ``protocol`` member of completions that carry an
    ``error`` (by op number: the worker's evidence of a reply-protocol breach);
    ``pins`` the ``clock_ms`` of pinned invokes (by the op's ``ip``: the
    instant the backend was made to decide at).

    ``derived`` is a per-history cache for what several checkers build from
    the same ops (``checkers.invariants.leases``)."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self._events: array | None = None
        self._done = array("q")  # op numbers in completion order
        # per op (by its number in ``ops``): the runner's ns at invoke and completion,
        # the worker's wall clock (ms) at completion; NaN when the record has none
        self.t_invoke, self.t_done, self.wall = array("d"), array("d"), array("d")
        self.nemesis: list[dict] = []
        self.final: FinalState | None = None
        self.capabilities: list[tuple[Op, dict]] = []
        self._envelope_problems: list[tuple[Op, list[str]]] = []
        self._request_problems: list[tuple[Op, str, dict]] = []  # checkers.invariants.requests, raw request in hand
        self._pending: Any = None  # the helper process of ``read(jobs=2)`` until its findings are in
        self.helper: dict | None = None  # that helper's resource use, once joined (``_RawHelper.usage``)
        self.problems: list[str] = []
        self.protocol: dict[int, Any] = {}  # op number -> the ``protocol`` member of its failed completion
        self.pins: dict[int, int] = {}  # op ``ip`` -> the invoke's ``clock_ms`` (the instant it was decided at)
        self.length = 0
        self.source: Any = None  # the records list, or the path read
        self.derived: dict = {}

    # ------------------------------------------------------------------ building

    @classmethod
    def of(cls, history: "History | Iterable[dict]") -> "History":
        """``history`` itself if it is a ``History``, else one built from the records."""
        if isinstance(history, History):
            return history
        h = _Builder(cls()).feed_all(history)
        h.source = history
        return h

    @classmethod
    def read(cls, path: str, tolerant: bool = False, jobs: int = 1) -> "History":
        """Stream ``history.jsonl`` once. A torn last line (the run was killed
        mid-write) is skipped; a line that is not JSON raises ``ValueError``
        unless ``tolerant`` (the reports), which records it in ``problems``.

        ``jobs=2`` (``chaos check``'s default) reads a large file with a
        helper process beside this one: the helper streams the same bytes and
        does the raw-reply checks (``envelope_problems``, ``request_problems``:
        the contract's candidate validation is most of the reading cost), this
        process builds the ``Op``s; their findings are attached by position.
        The helper holds no ``Op``s, so it adds little memory. A helper that
        fails is replaced by the same checks here, in a second pass."""
        b = _Builder(cls())
        # millions of small allocations and no cycles: the cyclic collector only costs time here
        collecting = gc.isenabled()
        gc.disable()
        try:
            with safeload.open_regular(path, "history") as raw:
                # the one bounded loader's rules: a regular file (never a FIFO), within the history size limit;
                # both readers stop at the size seen here, so they read the same bytes
                size, limit = os.fstat(raw.fileno()).st_size, safeload.HISTORY.max_bytes
                if size > limit:
                    raise safeload.LoadError(f"history {path}: larger than the {safeload.HISTORY.describe_bytes()} limit")
                helper = _RawHelper.start(raw.fileno(), size, tolerant) if jobs > 1 and size >= HELPER_MIN_BYTES else None
                try:
                    b.raw_checks = helper is None
                    feed = b.feed
                    for rec in _records(raw.fileno(), size, path, tolerant, b.h.problems):
                        feed(rec)
                except BaseException:
                    if helper is not None:
                        helper.stop()
                    raise
                if helper is not None:  # joined when a checker first asks for its findings
                    b.h._pending = helper.pending(b.h, os.dup(raw.fileno()), size, path, tolerant)
        finally:
            if collecting:
                gc.enable()
        b.h.source = path
        return b.h

    # ------------------------------------------------------------------ reading

    @property
    def envelope_problems(self) -> list[tuple[Op, list[str]]]:
        if self._pending is not None:
            self._pending()
        return self._envelope_problems

    @property
    def request_problems(self) -> list[tuple[Op, str, dict]]:
        if self._pending is not None:
            self._pending()
        return self._request_problems

    def _attach(self, shapes: list, requests: list) -> None:
        """A helper's raw-reply findings (``raw_findings``: by completion
        position, in file order) onto the ops completed there."""
        want = {pos for pos, _ in shapes} | {pos for pos, _, _ in requests}
        at = {op.cp: op for op in self.ops if op.cp in want} if want else {}
        self._envelope_problems += [(at[pos], problems) for pos, problems in shapes]
        self._request_problems += [(at[pos], kind, data) for pos, kind, data in requests]

    def __len__(self) -> int:
        return self.length

    @property
    def final_index(self) -> int | None:
        return None if self.final is None else self.final.index

    @property
    def events(self) -> array:
        """Real-time order of the client lines: ``op_number << 1 | is_completion``
        (built on first use from the positions: invokes are in op order, and
        completions sorted by position merge in)."""
        if self._events is None:
            ev = array("q")
            ops, done = self.ops, self._done  # completions are recorded in file order
            j, m = 0, len(done)
            for n, op in enumerate(ops):
                ip = op.ip
                while j < m and ops[done[j]].cp < ip:
                    ev.append(done[j] << 1 | 1)
                    j += 1
                ev.append(n << 1)
            for n in done[j:]:
                ev.append(n << 1 | 1)
            self._events = ev
        return self._events

    def times(self, n: int) -> tuple[float | None, float | None, float | None]:
        """Op number ``n``'s ``(invoke ns, completion ns, worker wall ms)``, ``None`` where unknown."""
        return tuple(None if x != x else x for x in (self.t_invoke[n], self.t_done[n], self.wall[n]))

    def completed(self) -> Iterator[Op]:
        """The completed client ops in completion order (the completions of ``in_order``)."""
        return map(self.ops.__getitem__, self._done)

    def in_order(self) -> Iterator[tuple[bool, Op]]:
        """``(is_completion, op)`` for every client history line, in real-time order."""
        ops = self.ops
        for v in self.events:
            yield bool(v & 1), ops[v >> 1]

    def raw(self, indices: Iterable[int]) -> dict[int, dict]:
        """The original records with these ``index`` values (for reports: a
        second pass over the file, or a lookup in the records list)."""
        want = set(indices)
        out: dict[int, dict] = {}
        if not want:
            return out
        if isinstance(self.source, str):
            with open(self.source, "rb") as f:
                for raw in f:
                    if not raw.endswith(b"\n"):
                        break
                    head = raw[:40]
                    try:
                        start = head.index(b'"index":') + 8
                        idx = int(head[start:head.index(b",", start)])
                    except ValueError:
                        idx = None
                    if idx is not None and idx not in want:
                        continue
                    try:
                        rec = json.loads(raw)
                    except ValueError:
                        continue
                    idx = rec.get("index") if isinstance(rec, dict) else None
                    if isinstance(idx, int) and idx in want:  # a malformed line's index may be any JSON
                        out[idx] = rec
            return out
        for pos, rec in enumerate(self.source or ()):
            idx = rec.get("index", pos) if isinstance(rec, dict) else None
            if isinstance(idx, int) and idx in want:
                out[idx] = rec
        return out


class _Builder:
    """Pairs and parses records one at a time, keeping only ``Op``s."""

    def __init__(self, h: History):
        self.h = h
        self.open: dict[Any, tuple[Op, Any, int]] = {}  # process -> (op, raw request, op number) in flight
        self.pos = 0
        self.intern = _Interner()
        self.keys = _Interner()
        self.shape = envelope_problems
        self.request_check = request_problems
        self.request_ops = CHECKED_OPS
        self.raw_checks = True  # False: a helper process does them (``History.read``, ``attach``)

    def feed_all(self, records: Iterable[dict]) -> History:
        for rec in records:
            if isinstance(rec, dict):
                self.feed(rec)
            else:
                self.pos += 1
        return self.h

    def feed(self, rec: dict) -> None:
        h, pos = self.h, self.pos
        self.pos += 1
        h.length = self.pos
        proc = rec.get("process")
        if proc == "nemesis":
            if rec.get("f") == "final-state":
                d = _obj(rec.get("value")).get("durable")
                if isinstance(d, dict):
                    if h.final is None:
                        h.final = FinalState(rec.get("index", pos))
                    h.final.add(d)
                rec = {k: v for k, v in rec.items() if k != "value"}  # the export lives on in ``final`` only
            h.nemesis.append(rec)
            return
        typ = rec.get("type")
        if typ == INVOKE:
            op = Op(pos, rec.get("index", pos), self.intern(proc) if isinstance(proc, int) else proc,
                    self.intern(rec.get("f")))
            req = rec.get("value")
            self._request(op, req)
            pin = rec.get("clock_ms")
            if type(pin) is int:
                h.pins[pos] = pin
            self.open[proc] = (op, req, len(h.ops))
            h.ops.append(op)
            t = rec.get("time")
            h.t_invoke.append(t if type(t) is int or type(t) is float else _NAN)
            h.t_done.append(_NAN)
            h.wall.append(_NAN)
        elif typ in COMPLETIONS:
            got = self.open.pop(proc, None)
            if got is None:
                return
            op, req, n = got
            h._done.append(n)
            c = rec.get("index", pos)
            op.cp, op.c = pos, pos if c == pos else c
            op.type = self.intern(typ)
            t, wall = rec.get("time"), rec.get("wall_ms")
            if type(t) is int or type(t) is float:
                h.t_done[n] = t
            if type(wall) is int or type(wall) is float:
                h.wall[n] = wall
            if rec.get("error") is not None:
                op.error = str(rec["error"])
                if "protocol" in rec:  # a worker's reply-protocol evidence (checkers.invariants.reply_protocol)
                    h.protocol[n] = rec["protocol"]
            v = rec.get("value")
            if isinstance(v, dict) and "envelope" in v:
                self._reply(op, _int(v.get("exit")), v.get("envelope"), _obj(req))
                op.definite = (typ == OK or typ == FAIL) and op.exit is not None

    # ------------------------------------------------------------------ parsing

    def _request(self, op: Op, req: Any) -> None:
        if not isinstance(req, dict):
            return
        s, it = _str, self.intern
        ns, item = req.get("ledger_namespace"), req.get("item_id")
        if isinstance(ns, str) and isinstance(item, str):
            op.key = self.keys((ns, item))
        f = op.f
        if f == "acquire":
            op.owner, op.lease = it(s(req.get("owner_id"))), _int(req.get("lease_duration_ms"))
            w = _obj(req.get("expected"))
            op.w_le, op.w_active = epoch_int(w.get("last_epoch")), _active(w)
        elif f == "renew" or f == "release":
            op.owner, op.epoch = it(s(req.get("owner_id"))), epoch_int(req.get("epoch"))
            op.exp_expires = instant_ms(req.get("expected_expires_at"))
            if f == "renew":
                op.lease = _int(req.get("lease_duration_ms"))
        elif f == "publish":
            op.oid = it(s(req.get("operation_id")))
            op.exp_rev, op.cand = it(s(req.get("expected_revision"))), it(s(req.get("candidate_sha256")))
            fence = _obj(req.get("claim_fence"))
            fns, fitem = fence.get("ledger_namespace"), fence.get("item_id")
            if isinstance(fns, str) and isinstance(fitem, str):
                op.fence_key = self.keys((fns, fitem))
            op.owner, op.epoch = it(s(fence.get("owner_id"))), epoch_int(fence.get("epoch"))
            try:
                op.digest = operation_digest(req)
            except (TypeError, ValueError):
                op.digest = None
        elif f == "publication-read":
            op.oid = it(s(req.get("operation_id")))

    def _reply(self, op: Op, exit_code: int | None, env: Any, req: dict) -> None:
        op.exit = exit_code
        if not isinstance(env, dict):
            return
        it = self.intern
        op.state = it(_str(env.get("state")))
        r, err = _obj(env.get("result")), _obj(env.get("error"))
        d = _obj(err.get("details"))
        op.code = it(_str(err.get("code")))
        rb = r.get("read_back") or r.get("claim_read_back")
        if not isinstance(rb, dict):
            rb = d if "last_epoch" in d and "observed_at" in d else None
        if rb is not None:
            op.t, op.le, op.active = instant_ms(rb.get("observed_at")), epoch_int(rb.get("last_epoch")), _active(rb)
            if op.le is None:
                op.le = -1  # shown, but not a canonical epoch (the envelopes checker says so)
        elif "observed_at" in d:
            op.t = instant_ms(d.get("observed_at"))
        elif "decided_at" in env:  # an issue-lock reply: the store's own decision time
            op.t = instant_ms(env.get("decided_at"))
        claim = r.get("claim") if "claim" in r else r.get("released_claim")
        if claim is not None or "claim" in r or "released_claim" in r:
            op.claim = _active_of(claim)
        f, code = op.f, op.code
        if f == "publish":
            op.env_id = envelope_id(exit_code, env)
            if exit_code == 0:
                op.committed = it(_str(r.get("committed_revision")))
                op.fence_echo = r.get("claim_fence") == req.get("claim_fence")
            elif code == "claim-fence-rejected":
                op.det = (it(_str(d.get("reason"))), it(_str(d.get("supplied_owner_id"))),
                          epoch_int(d.get("supplied_epoch")), it(_str(d.get("active_owner_id"))),
                          epoch_int(d.get("active_epoch")))
            elif code == "ledger-revision-conflict":
                op.det = (it(_str(d.get("expected_revision"))), it(_str(d.get("actual_revision"))))
            elif code == "idempotency-conflict":
                op.det = (_str(d.get("expected_operation_digest")), _str(d.get("actual_operation_digest")))
        elif f == "publication-read" and exit_code == 0:
            out = _obj(r.get("outcome"))
            stored = out.get("stdout", out.get("envelope"))
            op.det = (it(_str(r.get("operation_id"))), _str(r.get("operation_digest")), _int(out.get("exit")),
                      envelope_id(out.get("exit"), stored), outcome_spec(out.get("exit"), stored), outcome_code(stored))
        elif f == "capabilities" and exit_code == 0 and env.get("ok") is True:
            self.h.capabilities.append((op, env))
        if self.raw_checks:
            problems = self.shape(f, exit_code, env, req)
            if problems:
                self.h._envelope_problems.append((op, problems))
            if f in self.request_ops:
                self.h._request_problems += [(op, kind, data)
                                             for kind, data in self.request_check(exit_code, env, req, f)]



# --------------------------------------------------------------------------- reading the file

#: below this size ``History.read`` does everything in one process (a helper costs about 0.3 s to start);
#: ``CLAIM_CHAOS_HELPER_MIN_BYTES`` sets another (the tests use 0)
HELPER_MIN_BYTES = int(os.environ.get("CLAIM_CHAOS_HELPER_MIN_BYTES") or 32 << 20)


def _lines(fd: int, size: int, tail: list, chunk: int = 1 << 20) -> Iterator[bytes]:
    """The complete lines of the file's first ``size`` bytes, without their
    ``\\n``, read with ``pread`` (two processes can read one open file
    without sharing an offset); a last line without ``\\n`` is left in
    ``tail[0]``, for the caller to judge as torn."""
    off, rest = 0, b""
    while off < size:
        data = os.pread(fd, min(chunk, size - off), off)
        if not data:
            break
        off += len(data)
        parts = (rest + data if rest else data).split(b"\n")
        rest = parts.pop()
        yield from parts
    tail.append(rest)  # b"" when the file ends with a newline (or is empty)


def _records(fd: int, size: int, path: str, tolerant: bool, problems: list) -> Iterator[dict]:
    """The JSON objects of ``history.jsonl``, by the reader's rules: a torn
    last line (the run was killed mid-write) ends the history, a blank line
    is skipped, a line that is not JSON raises ``ValueError`` unless
    ``tolerant``, which notes it in ``problems``; values that are not
    objects are not records."""
    tail: list = []
    n = 0
    for n, line in enumerate(_lines(fd, size, tail), 1):
        try:
            rec = decode_line(line)
        except RecursionError:
            if not tolerant:
                raise safeload.LoadError(f"history {path}: line {n} is nested too deeply") from None
            problems.append(f"history.jsonl: line {n} is nested too deeply, skipped")
            continue
        except ValueError as e:
            if not line.decode("utf-8", "surrogateescape").strip():
                continue
            if not tolerant:
                raise safeload.LoadError(f"history {path}: line {n} is not JSON ({e})") from None
            problems.append(f"history.jsonl: line {n} is not JSON, skipped")
            continue
        if type(rec) is dict:
            yield rec
    if tail and tail[0]:
        _decode_torn(tail[0], n + 1, path, tolerant, problems)


def _decode_torn(line: bytes, n: int, path: str, tolerant: bool, problems: list) -> None:
    """A last line without LF is torn, whatever it holds; only one nested too
    deeply to decode is reported as that (as for any line)."""
    try:
        decode_line(line)
    except RecursionError:
        if not tolerant:
            raise safeload.LoadError(f"history {path}: line {n} is nested too deeply") from None
        problems.append(f"history.jsonl: line {n} is nested too deeply, skipped")
        return
    except ValueError:
        pass
    problems.append(f"history.jsonl: torn last line {n} skipped (the run was killed mid-write)")


def raw_findings(fd: int, size: int, path: str, tolerant: bool) -> tuple[list, list]:
    """The raw-reply checks of ``_Builder._reply`` over the file, without
    building ops: ``([(position, envelope problems)], [(position, kind,
    data)])`` by the completion's position among the records. Pairing is the
    builder's: a completion goes with the open invoke of its process."""
    shapes: list = []
    requests: list = []
    open_: dict = {}
    for pos, rec in enumerate(_records(fd, size, path, tolerant, [])):
        proc = rec.get("process")
        if proc == "nemesis":
            continue
        typ = rec.get("type")
        if typ == INVOKE:
            open_[proc] = (rec.get("f"), rec.get("value"))
        elif typ in COMPLETIONS:
            got = open_.pop(proc, None)
            v = rec.get("value")
            if got is None or not isinstance(v, dict) or "envelope" not in v:
                continue
            env = v.get("envelope")
            if not isinstance(env, dict):
                continue
            f, req = got[0], _obj(got[1])
            exit_code = _int(v.get("exit"))
            problems = envelope_problems(f, exit_code, env, req)
            if problems:
                shapes.append((pos, problems))
            if f in CHECKED_OPS:
                requests += [(pos, kind, data) for kind, data in request_problems(exit_code, env, req, f)]
    return shapes, requests


class _RawHelper:
    """``raw_findings`` in a child process (``python -m checkers.history FD
    SIZE TOLERANT``) reading the parent's open file; its findings come back
    pickled on stdout. Started with ``subprocess`` (no fork of a possibly
    threaded parent); killed if still running and reaped by ``stop``, which
    keeps its resource use (``usage``: peak RSS, CPU, exit status)."""

    def __init__(self, proc: subprocess.Popen):
        self.proc = proc
        self.usage: dict | None = None
        self.errors = None

    @classmethod
    def start(cls, fd: int, size: int, tolerant: bool) -> "_RawHelper":
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))))
        argv = [sys.executable, "-m", "checkers.history", str(fd), str(size), str(int(tolerant)), str(os.getpid())]
        errors = tempfile.TemporaryFile()  # a failed helper says why (in ``usage``), never on our stderr
        helper = cls(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=errors, pass_fds=(fd,), env=env, cwd=root))
        helper.errors = errors
        return helper

    def result(self) -> tuple[list, list] | None:
        """The helper's findings, or ``None`` when it failed."""
        data = self.proc.stdout.read()
        self.stop(kill=False)  # at end of output it has finished, or is about to
        if self.usage["status"] != 0:
            return None
        try:
            found = pickle.loads(data)
        except Exception:  # noqa: BLE001 - a torn result is the helper's failure
            return None
        return found if isinstance(found, tuple) and len(found) == 2 else None

    def stop(self, kill: bool = True) -> None:
        if self.usage is not None:
            return
        if kill:
            # not Popen.kill: it polls first, which would reap the status (and the resource use) wait4
            # reads; until reaped the pid is ours, alive or a zombie, so the signal reaches only the helper
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.stdout.close()
        _, status, ru = os.wait4(self.proc.pid, 0)
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.usage = {"pid": self.proc.pid, "status": self.proc.returncode, "max_rss_kb": ru.ru_maxrss,
                      "cpu_s": round(ru.ru_utime + ru.ru_stime, 3)}
        errors, self.errors = self.errors, None
        if errors is not None:
            if self.proc.returncode not in (0, -signal.SIGKILL):
                errors.seek(0)
                self.usage["stderr"] = errors.read()[-2000:].decode(errors="replace")
            errors.close()

    def pending(self, h: "History", fd: int, size: int, path: str, tolerant: bool):
        """A call that waits for the findings and attaches them to ``h``
        (``h.helper`` gets the helper's ``usage``); ``fd``, this process's own
        copy of the file, serves the same checks here if the helper failed.
        Never called, the helper is stopped and ``fd`` closed when ``h`` is
        collected, or at exit."""
        def join() -> None:
            try:
                found = self.result()
                h.helper = self.usage
                if found is None:
                    found = raw_findings(fd, size, path, tolerant)
                h._pending = None
                h._attach(*found)
            finally:
                done()

        done = weakref.finalize(h, _RawHelper._close, self, fd)
        return join

    @staticmethod
    def _close(helper: "_RawHelper", fd: int) -> None:
        helper.stop()
        os.close(fd)


def _helper_main(argv: list[str]) -> int:
    fd, size, tolerant, parent = int(argv[0]), int(argv[1]), argv[2] == "1", int(argv[3])
    _die_with(parent)
    gc.disable()
    try:
        found = raw_findings(fd, size, "history.jsonl", tolerant)
    except (OSError, ValueError):
        return 3  # the parent reads the same bytes and reports what is wrong with them
    sys.stdout.buffer.write(pickle.dumps(found, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()
    return 0


def _die_with(parent: int) -> None:
    """SIGKILL this helper when its parent dies (a SIGKILLed ``chaos check``
    leaves no reader behind); if it is already gone, stop now."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the helper ends at its first write to the closed pipe
    if os.getppid() != parent:
        os._exit(3)


def read_history(path: str) -> list[dict]:
    """Load ``history.jsonl`` as raw records (tools that want dicts). A torn
    last line (the run was killed mid-write) is skipped."""
    ops: list[dict] = []
    for n, raw in safeload.json_lines(path):
        if not raw.endswith(b"\n"):
            break  # torn tail of a crashed run
        raw = raw.strip()
        if raw:
            try:
                ops.append(safeload.json_line(raw))
            except ValueError as e:
                raise safeload.LoadError(f"history {path}: line {n} is not JSON ({e})") from None
    return ops


def client_ops(history: Iterable[dict]) -> list[dict]:
    return [op for op in history if op.get("process") != "nemesis"]


if __name__ == "__main__":  # the helper process of ``History.read(jobs=2)``
    sys.exit(_helper_main(sys.argv[1:]))
