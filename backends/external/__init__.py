"""Drive any program that speaks the contract CLI convention.

``open_backend(spec, clock, hooks)``; spec keys:

* ``command`` (required): the command prefix, split with ``shlex`` (e.g.
  ``node path/to/bin/cli.js`` or ``python -m chaos.cli backend sqlite``);
* ``profile``: a profile YAML path or dict (``backends.external.profile``);
  default: the convention with no declared differences;
* ``ledger`` (one directory) or ``ledgers`` (``{namespace: directory}``;
  each request goes to the ledger of its ``ledger_namespace``, others to the
  first one);
* ``env``: extra environment for every invocation (e.g. the libfaketime and
  fsync-shim preloads from ``chaos.faults``). ``backend.env`` may be changed
  between calls by a harness;
* ``commit_lock``: the file the cooperating agents serialize their Git
  commits on (Git-backed profiles, ``items.commit``);
* ``write_root``: the one directory the program may write beneath (a run's
  directory); default: its ledger directories. Where Landlock is available
  (``backends.external.confine``) every invocation is confined to it, with
  ``TMPDIR`` pointed at a private directory inside it.

Besides the contract operations, ``call("commit", ...)`` is the cooperating
agent's Git step (``backends.external.git``): ``{ledger_namespace, item_id,
operation_id, committed_revision}`` commits one acknowledged publication's
item file; ``{ledger_namespace, "all": true, item_ids}`` commits every listed
item file that differs from ``HEAD``. Its reply is the harness's own record.

Each op maps to argv (profile ``argv`` templates) + the raw request on
stdin. The reply must be exactly one JSON object + LF (strict parse). A
crash (signal exit), a timeout or unparseable output raises
``backends.external.Indeterminate``: the harness records it as ``info``.
A busy reply the profile declares retryable (``busy``) is retried with the
declared backoff. Declared differences are normalised here and nowhere
else: extra capability members listed in ``capabilities_extra_members_allowed``
are removed, and an unwrapped publication-read outcome is wrapped as
``{exit, stdout}``.

The program's own clock is its process clock: the harness moves it with
libfaketime (this module never passes time in a request).
"""

from __future__ import annotations

import json
import os
import shlex
import time

from backends.api import BackendConfig, Clock, Hooks, Reply
from backends.contract import EXIT, compact_json
from backends.external.process import Indeterminate, ReplyProtocolError, parse_reply, run_cli
from backends.external.profile import ExternalProfile, ProfileMismatch, load_profile, outcome_wrapping_mismatch

__all__ = ["ExternalBackend", "Indeterminate", "ProfileMismatch", "ReplyProtocolError", "open_backend", "parse_reply",
           "load_profile"]


def _expand(template: list[str], ledger: str, namespaces: list[str], profile: ExternalProfile,
            extra: dict | None = None) -> list[str]:
    """Fill ``{ledger}`` (and ``extra`` keys) in each token; ``{namespaces}``
    alone expands to ``flag ns`` per namespace."""
    values = {"ledger": ledger, **(extra or {})}
    out: list[str] = []
    for token in template:
        if token == "{namespaces}":
            for ns in namespaces:
                out += [profile.provision_namespace_flag, ns]
            continue
        for key, value in values.items():
            token = token.replace("{" + key + "}", str(value))
        out.append(token)
    return out


def _remove_pointer(doc: dict, pointer: str) -> None:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.lstrip("/").split("/")]
    node = doc
    for p in parts[:-1]:
        if not isinstance(node, dict) or p not in node:
            return
        node = node[p]
    if isinstance(node, dict):
        node.pop(parts[-1], None)


class ExternalBackend:
    """A ``Backend`` whose every call is one invocation of the program."""

    def __init__(self, spec: dict, clock: Clock | None = None, hooks: Hooks | None = None):
        if not spec.get("command"):
            raise ValueError('an "external" backend needs "command"')
        self.prefix = shlex.split(spec["command"])
        self.profile = load_profile(spec["profile"]) if spec.get("profile") else ExternalProfile(name="convention")
        ledgers = spec.get("ledgers") or {"": spec["ledger"]}
        self.ledgers: dict[str, str] = dict(ledgers)
        self.env: dict[str, str] = dict(spec.get("env") or {})
        # the calls' working directory; a ledger beneath it is named relative to it in the argv (the
        # deterministic mode: Node's randomness shifts with its argv's length, and the store path's varies)
        self.cwd: str | None = spec.get("cwd")
        self.commit_lock: str | None = spec.get("commit_lock")
        root = spec.get("write_root")
        self.write_roots = (root,) if root else tuple(self.ledgers.values())
        self.tmpdir = os.path.join(root, "tmp", "program") if root else os.path.join(self.write_roots[0], ".program-tmp")
        self.config = BackendConfig(name=self.profile.backend_name or self.profile.name,
                                    namespaces=[ns for ns in self.ledgers if ns])
        self.invocations = 0

    # ------------------------------------------------------------------ plumbing

    def ledger_for(self, request) -> str:
        doc = request
        if not isinstance(request, dict):
            try:
                doc = json.loads(bytes(request))
            except (ValueError, UnicodeDecodeError):
                doc = None
        ns = doc.get("ledger_namespace") if isinstance(doc, dict) else None
        return self.ledgers.get(ns) if ns in self.ledgers else next(iter(self.ledgers.values()))

    def argv(self, template: list[str], ledger: str, namespaces: list[str] | None = None, **extra) -> list[str]:
        if self.cwd and ledger.startswith(self.cwd.rstrip("/") + "/"):
            ledger = os.path.relpath(ledger, self.cwd)
        return self.prefix + _expand(template, ledger, namespaces or [], self.profile, extra)

    def run(self, argv: list[str], stdin: bytes, op: str) -> tuple[int, dict]:
        """One confined invocation (the ``write_root`` of the module docstring)."""
        os.makedirs(self.tmpdir, exist_ok=True)
        return run_cli(argv, stdin, {"TMPDIR": self.tmpdir, **self.env}, self.profile.timeout_s, op,
                       write_roots=self.write_roots, cwd=self.cwd)

    def invoke(self, argv: list[str], stdin: bytes, op: str = "") -> tuple[int, dict]:
        """One invocation, retrying a declared busy reply."""
        busy = self.profile.busy
        attempts = busy.attempts if busy else 1
        for attempt in range(attempts):
            self.invocations += 1
            code, envelope = self.run(argv, stdin, op)
            if busy is None or not busy.matches(code, envelope) or attempt == attempts - 1:
                return code, envelope
            time.sleep(busy.backoff_ms / 1000.0)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ Backend protocol

    def call(self, op: str, request: bytes | dict) -> Reply:
        if op == "commit":
            return self.commit(request if isinstance(request, dict) else json.loads(bytes(request)))
        template = self.profile.argv.get(op)
        if template is None:
            raise ValueError(f"profile {self.profile.name!r} has no command for {op!r}")
        raw = b"" if op == "verify" else (bytes(request) if not isinstance(request, dict) else compact_json(request))
        code, envelope = self.invoke(self.argv(template, self.ledger_for(request)), raw, op)
        return Reply(code, self.normalise(op, envelope))

    # ------------------------------------------------------------------ the cooperating agent (git)

    def item_relpath(self, ledger: str, item_id: str, repo: str) -> str:
        return os.path.relpath(os.path.join(ledger, self.profile.items.path.replace("{item_id}", item_id)), repo)

    def commit(self, request: dict) -> Reply:
        """One Git step of the cooperating agent (see the module docstring)."""
        from backends.external import git

        if not self.commit_lock:
            raise ValueError("commit needs a spec with commit_lock (a Git-backed profile)")
        ledger = self.ledgers.get(request.get("ledger_namespace")) or next(iter(self.ledgers.values()))
        try:
            repo = git.top_level(ledger)
            if request.get("all"):
                rel = [self.item_relpath(ledger, i, repo) for i in request.get("item_ids") or []]
                result = git.commit_all(repo, rel, "claim-chaos: commit the remaining publications", self.commit_lock)
            else:
                rel = self.item_relpath(ledger, request["item_id"], repo)
                result = git.commit_item(repo, rel, request["committed_revision"],
                                         f"claim-chaos: publication {request.get('operation_id')}", self.commit_lock)
        except git.GitFailed as e:
            return Reply(1, {"ok": False, "error": {"code": "git-failed", "message": str(e)}})
        return Reply(0, {"ok": True, "result": result})

    def normalise(self, op: str, envelope: dict) -> dict:
        """Apply the profile's declared differences (and only those). A reply
        that shows the profile declared the wrong one raises ``ProfileMismatch``
        (the profile's error, one line naming its member, not the program's)."""
        if op == "publication-read":
            wrong = outcome_wrapping_mismatch(self.profile, envelope)
            if wrong:
                raise ProfileMismatch(wrong)
        if op == "capabilities":
            for pointer in self.profile.capabilities_extra_members_allowed:
                _remove_pointer(envelope, pointer)
        if op == "publication-read" and not self.profile.publication_read_outcome_wrapped:
            result = envelope.get("result")
            if isinstance(result, dict) and isinstance(result.get("outcome"), dict):
                inner = result["outcome"]
                err = inner.get("error") if isinstance(inner.get("error"), dict) else None
                result["outcome"] = {"exit": EXIT.get(err.get("code"), 6) if err else 0, "stdout": inner}
        return envelope

    def provision(self, ledger: str, namespaces: list[str], write_paths: dict | None = None) -> dict:
        template = self.profile.argv.get("provision")
        if template is None:
            raise ValueError(f"profile {self.profile.name!r} cannot provision")
        argv = self.argv(template, ledger, namespaces)
        if write_paths is not None:
            argv += ["--write-paths", json.dumps(write_paths)]
        code, out = self.invoke(argv, b"", "provision")
        if code != 0:
            raise RuntimeError(f"provision failed (exit {code}): {out}")
        return out

    def admin(self, what: str, ledger: str, stdin: bytes = b"", **extra) -> dict:
        template = self.profile.admin.get(what)
        if template is None:
            raise ValueError(f"profile {self.profile.name!r} has no admin {what!r}")
        code, out = self.run(self.argv(template, ledger, **extra), stdin, f"admin {what}")
        if code != 0:
            raise RuntimeError(f"admin {what} failed (exit {code}): {out}")
        if what == "export":
            out = self.unwrap_export(out)
        return out

    def unwrap_export(self, out: dict) -> dict:
        """The durable object of an export reply (``export.unwrap``: a JSON
        pointer into a printed envelope), with outcomes as stored."""
        from backends.contract.jsonstrict import pointer_get

        pointer = self.profile.export.unwrap
        if pointer:
            try:
                out = pointer_get(out, pointer)
            except KeyError:
                raise RuntimeError(f"admin export: reply has no {pointer} (profile export.unwrap)") from None
        if not isinstance(out, dict):
            raise RuntimeError(f"admin export: not an object: {str(out)[:200]}")
        return out

    def close(self) -> None:
        return None


def open_backend(spec: dict, clock: Clock | None = None, hooks: Hooks | None = None) -> ExternalBackend:
    return ExternalBackend(spec, clock, hooks)
