"""An external implementation's profile: how to drive it and what differs.

A profile is a small YAML file (``profiles/<name>.yaml``); docs/backend-authors.md
documents every member with a worked example. Every member is optional except
``name``; the defaults are the contract CLI convention ``chaos backend NAME``
speaks. Loading is strict: an unknown member (at any depth), a wrong type or
an empty argv template is a ``ProfileError`` naming the member, one line.

    name: chaos-sqlite
    backend_name: null            # name its capabilities report (null: ask it)
    api_version: 1                # work-claim api_version it must advertise (1 or 2)
    profile: fenced               # or merge-coordinated
    namespaces_per_ledger: many   # or 1 (a Git ledger binds one namespace)
    git: false                    # ledgers must live inside a git work tree
    timeout_s: 30
    argv: {op: [template ...]}    # appended to the command prefix; {ledger} is the
                                  # ledger dir; "{namespaces}" expands to
                                  # provision_namespace_flag + ns, per ns; null: not mapped
    provision_namespace_flag: --namespace
    provision_mints_namespace: false   # true: provision picks the namespace, the suite adopts it
    provision_namespace_pointer: /result/ledger_namespace   # where the minted one is in the reply
    namespace_file: null          # documented file that binds a ledger's namespace (e.g. .wowbagger/namespace):
                                  # black-box conformance writes the case's namespace there
    admin: {seed|export|arm-floor-fault|enable-bypass: [template ...]}   # privileged scaffolding
    export: {requests: true, unwrap: null}   # stored outcomes carry the request; JSON pointer
                                             # to the durable object inside a printed envelope
    items: {path: "{item_id}.md", commit: false}   # black-box set-up: item files, git commits
    faults:                       # how the conformance runner makes each fault real
      clock_floor_persist: {admin: arm-floor-fault} | {fsync_match: "journal.jsonl"}
      publication-outcome-unknown: {fsync_match: "{ledger}/"}
    advisory_setup: bypass-admin  # or unprovisioned (advisory = no provision)
    provision_write_paths: false  # provision accepts --write-paths JSON (CFG cases)
    barrier_env: null             # env var naming a dir for the opt-in pre-commit barrier
    busy: {exit: 6, code: claim-store-unavailable, reason: claim-store-locked,
           retry: {attempts: 20, backoff_ms: 50}}
    capabilities_extra_members_allowed: [/result/backend/some_member]  # JSON pointers
    publication_read_outcome_wrapped: true
    refuses_before_reading: false
    known_deviations: [{id, anomaly, code?, match?, within?, reason, reference?}]   # checkers/known.py
"""

from __future__ import annotations

import copy
import math
import posixpath
import string
from dataclasses import dataclass, field
from pathlib import Path

from backends import safeload

CONVENTION_ARGV: dict[str, list[str]] = {
    "provision": ["provision", "--ledger", "{ledger}", "{namespaces}", "--json"],
    "capabilities": ["claim", "capabilities", "--ledger", "{ledger}", "--input", "-", "--json"],
    "read": ["claim", "read", "--ledger", "{ledger}", "--input", "-", "--json"],
    "acquire": ["claim", "acquire", "--ledger", "{ledger}", "--input", "-", "--json"],
    "renew": ["claim", "renew", "--ledger", "{ledger}", "--input", "-", "--json"],
    "release": ["claim", "release", "--ledger", "{ledger}", "--input", "-", "--json"],
    "publish": ["publish-claimed", "--ledger", "{ledger}", "--input", "-", "--json"],
    "publication-read": ["claim", "verify", "--ledger", "{ledger}", "--input", "-", "--json"],
    "verify": ["claim-verify", "--ledger", "{ledger}", "--json"],
}
#: ops a profile may map (legacy writes have no convention argv)
MAPPABLE = (*CONVENTION_ARGV, "legacy-transition", "legacy-create", "claim-adopt")
ADMIN = ("seed", "export", "arm-floor-fault", "enable-bypass")
FAULTS = ("clock_floor_persist", "publication-outcome-unknown")
#: ops a run cannot do without (argv: null is refused for these)
REQUIRED_OPS = ("capabilities", "read", "acquire", "renew", "release", "publish", "publication-read")
#: the placeholders a template token may hold ({namespaces} only as a whole token of argv)
ARGV_FIELDS = ("ledger",)
ADMIN_FIELDS = ("ledger", "namespace")
#: the longest wait for one call a profile may declare (a run's op deadline must cover it)
MAX_TIMEOUT_S = 3600.0


class ProfileError(ValueError):
    pass


class ProfileMismatch(ProfileError):
    """What the program itself printed contradicts a member of its profile:
    the profile (the user's input) is wrong, not the program; one line naming
    the member, never a finding about the program."""


@dataclass
class Busy:
    exit: int = 6
    code: str = "claim-store-unavailable"
    reason: str = "claim-store-locked"
    attempts: int = 20
    backoff_ms: int = 50

    def matches(self, exit_code: int, envelope: dict) -> bool:
        err = envelope.get("error") if isinstance(envelope, dict) else None
        return (exit_code == self.exit and isinstance(err, dict) and err.get("code") == self.code
                and isinstance(err.get("details"), dict) and err["details"].get("reason") == self.reason)


@dataclass
class Export:
    requests: bool = True           # stored outcomes carry the complete request (else digest only)
    unwrap: str | None = None       # JSON pointer to the durable object in the printed reply


@dataclass
class Items:
    path: str | None = "{item_id}.md"  # item file relative to its ledger directory (null: items are not files)
    commit: bool = False            # a cooperating agent commits each acknowledged publication


@dataclass
class ExternalProfile:
    name: str
    backend_name: str | None = None
    api_version: int = 1
    profile: str = "fenced"
    namespaces_per_ledger: str | int = "many"
    git: bool = False
    timeout_s: float = 30.0
    argv: dict[str, list[str] | None] = field(default_factory=lambda: copy.deepcopy(CONVENTION_ARGV))
    provision_namespace_flag: str = "--namespace"
    provision_mints_namespace: bool = False
    provision_namespace_pointer: str = "/result/ledger_namespace"
    namespace_file: str | None = None  # documented file binding a ledger's namespace (black-box conform)
    admin: dict[str, list[str]] = field(default_factory=dict)
    export: Export = field(default_factory=Export)
    items: Items = field(default_factory=Items)
    faults: dict[str, dict] = field(default_factory=dict)
    advisory_setup: str | None = None
    provision_write_paths: bool = False
    barrier_env: str | None = None
    busy: Busy | None = None
    capabilities_extra_members_allowed: list[str] = field(default_factory=list)
    publication_read_outcome_wrapped: bool = True
    refuses_before_reading: bool = False
    known_deviations: list[dict] = field(default_factory=list)

    @property
    def one_namespace_per_ledger(self) -> bool:
        return self.namespaces_per_ledger in (1, "1")

    @property
    def black_box(self) -> bool:
        """No privileged seed: set up and observed through public commands only."""
        return "seed" not in self.admin


# --------------------------------------------------------------------------- validation

def _fail(source, where: str, what: str):
    raise ProfileError(f"profile {source}: {where}: {what}")


def _type_name(t) -> str:
    return {str: "a string", bool: "true or false", int: "an integer", float: "a number", list: "a list",
            dict: "a mapping"}.get(t, str(t))


def _want(source, where: str, value, *types, null: bool = False):
    if value is None and null:
        return value
    ok = any(isinstance(value, t) and not (t in (int, float) and isinstance(value, bool)) for t in types)
    if not ok:
        _fail(source, where, f"must be {' or '.join(_type_name(t) for t in types)}{' or null' if null else ''}, "
                             f"not {value!r}")
    return value


def _keys(source, where: str, doc: dict, allowed) -> None:
    unknown = sorted(set(doc) - set(allowed))
    if unknown:
        _fail(source, where, f"unknown member{'s' if len(unknown) > 1 else ''} {', '.join(map(str, unknown))} "
                             f"(known: {', '.join(allowed)})")


def _argv(source, where: str, value, fields=ARGV_FIELDS) -> list[str]:
    _want(source, where, value, list)
    if not value:
        _fail(source, where, "an argv template must not be empty")
    for i, tok in enumerate(value):
        _want(source, f"{where}[{i}]", tok, str)
        if tok != "{namespaces}" or fields is not ARGV_FIELDS:
            _template_token(source, f"{where}[{i}]", tok, fields)
    return list(value)


def _template_token(source, where: str, token: str, fields) -> None:
    """A token holds literal text and only the placeholders ``fields`` (a
    malformed one is the profile's fault, never a false verdict about the program)."""
    shown = ", ".join("{" + f + "}" for f in fields)
    try:
        parts = list(string.Formatter().parse(token))
    except ValueError as e:
        _fail(source, where, f"{token!r} is not a valid template ({e}); placeholders: {shown}")
    for literal, name, spec, conversion in parts:
        if "{" in literal or "}" in literal or (name is not None and (name not in fields or spec or conversion)):
            _fail(source, where, f"{token!r}: unknown placeholder or stray brace; placeholders: {shown}")


def _item_path(source, value):
    """``items.path``: relative, inside the ledger directory (no ``..``), with ``{item_id}``."""
    if value is None:
        return None
    _want(source, "items.path", value, str)
    if "{item_id}" not in value:
        _fail(source, "items.path", "must contain {item_id}")
    _template_token(source, "items.path", value, ("item_id",))
    if value.startswith("/") or "\x00" in value or ".." in value.split("/"):
        _fail(source, "items.path", f"{value!r} must be a relative path inside the ledger directory (no '..')")
    if posixpath.normpath(value).startswith(".."):
        _fail(source, "items.path", f"{value!r} leaves the ledger directory")
    return value


def _one_of(source, where: str, value, choices):
    if value not in choices:
        _fail(source, where, f"must be one of {', '.join(map(str, choices))}, not {value!r}")
    return value


def _pointer(source, where: str, value) -> str:
    _want(source, where, value, str)
    if not value.startswith("/"):
        _fail(source, where, f"must be a JSON pointer starting with '/', not {value!r}")
    return value


def _known(source, value) -> list[dict]:
    _want(source, "known_deviations", value, list)
    out = []
    for i, dev in enumerate(value):
        w = f"known_deviations[{i}]"
        _want(source, w, dev, dict)
        _keys(source, w, dev, ("id", "anomaly", "code", "match", "within", "reason", "reference"))
        for k in ("id", "anomaly", "reason"):
            if k not in dev:
                _fail(source, w, f"'{k}' is required")
            _want(source, f"{w}.{k}", dev[k], str)
        for k in ("code", "within", "reference"):
            _want(source, f"{w}.{k}", dev.get(k), str, null=True)
        _want(source, f"{w}.match", dev.get("match", {}), dict)
        out.append(dict(dev))
    ids = [d["id"] for d in out]
    if len(set(ids)) != len(ids):
        _fail(source, "known_deviations", "ids must be unique")
    own = {d["id"] for d in out if not d.get("within")}
    for i, dev in enumerate(out):   # a consequence names a finding's own deviation (one level: checkers/known.py)
        if dev.get("within") and dev["within"] not in own:
            _fail(source, f"known_deviations[{i}].within",
                  f"{dev['within']!r} is not the id of a deviation without 'within'")
    return out


def parse_profile(doc, source="<profile>") -> ExternalProfile:
    """A validated profile from a parsed YAML document."""
    if not isinstance(doc, dict):
        raise ProfileError(f"profile {source}: a mapping with a 'name' is required")
    doc = copy.deepcopy(doc)
    if doc.get("protocol", "work-claim") != "work-claim":   # an issue-lock profile has its own loader
        raise ProfileError(f"profile {source}: protocol {doc.get('protocol')!r} is not a work-claim profile")
    doc.pop("protocol", None)
    _keys(source, "top level", doc, (*ExternalProfile.__dataclass_fields__, "protocol"))
    if not isinstance(doc.get("name"), str) or not doc["name"]:
        raise ProfileError(f"profile {source}: 'name' (a non-empty string) is required")
    kw: dict = {"name": doc["name"]}
    kw["backend_name"] = _want(source, "backend_name", doc.get("backend_name"), str, null=True)
    if "api_version" in doc:
        kw["api_version"] = _one_of(source, "api_version", _want(source, "api_version", doc["api_version"], int), (1, 2))
    if "profile" in doc:
        kw["profile"] = _one_of(source, "profile", doc["profile"], ("fenced", "merge-coordinated"))
    if "namespaces_per_ledger" in doc:
        kw["namespaces_per_ledger"] = _one_of(source, "namespaces_per_ledger", doc["namespaces_per_ledger"],
                                              ("many", 1, "1"))
    for key in ("git", "provision_write_paths", "publication_read_outcome_wrapped", "refuses_before_reading",
                "provision_mints_namespace"):
        if key in doc:
            kw[key] = _want(source, key, doc[key], bool)
    if "timeout_s" in doc:
        kw["timeout_s"] = float(_want(source, "timeout_s", doc["timeout_s"], int, float))
        if not (math.isfinite(kw["timeout_s"]) and 0 < kw["timeout_s"] <= MAX_TIMEOUT_S):
            _fail(source, "timeout_s", f"must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, "
                                       f"not {doc['timeout_s']!r}")
    for key in ("provision_namespace_flag",):
        if key in doc:
            kw[key] = _want(source, key, doc[key], str)
    kw["namespace_file"] = _want(source, "namespace_file", doc.get("namespace_file"), str, null=True)
    if "provision_namespace_pointer" in doc:
        kw["provision_namespace_pointer"] = _pointer(source, "provision_namespace_pointer",
                                                     doc["provision_namespace_pointer"])
    argv = copy.deepcopy(CONVENTION_ARGV)
    given = _want(source, "argv", doc.get("argv") or {}, dict)
    _keys(source, "argv", given, MAPPABLE)
    for op, tpl in given.items():
        argv[op] = None if tpl is None else _argv(source, f"argv.{op}", tpl)
    for op in REQUIRED_OPS:
        if argv.get(op) is None:
            _fail(source, f"argv.{op}", "is required (a run cannot do without it)")
    kw["argv"] = argv
    admin = _want(source, "admin", doc.get("admin") or {}, dict)
    _keys(source, "admin", admin, ADMIN)
    kw["admin"] = {k: _argv(source, f"admin.{k}", v, ADMIN_FIELDS) for k, v in admin.items()}
    exp = _want(source, "export", doc.get("export") or {}, dict)
    _keys(source, "export", exp, Export.__dataclass_fields__)
    kw["export"] = Export(requests=_want(source, "export.requests", exp.get("requests", True), bool),
                          unwrap=None if exp.get("unwrap") is None else _pointer(source, "export.unwrap", exp["unwrap"]))
    items = _want(source, "items", doc.get("items") or {}, dict)
    _keys(source, "items", items, Items.__dataclass_fields__)
    kw["items"] = Items(path=_item_path(source, items.get("path", "{item_id}.md")),
                        commit=_want(source, "items.commit", items.get("commit", False), bool))
    if kw["items"].commit and (kw["items"].path is None or not kw.get("git")):
        _fail(source, "items.commit", "needs git: true and an items.path")
    if kw.get("provision_mints_namespace") and kw.get("namespaces_per_ledger") not in (1, "1"):
        _fail(source, "provision_mints_namespace", "needs namespaces_per_ledger: 1 (one minted namespace per ledger)")
    faults = _want(source, "faults", doc.get("faults") or {}, dict)
    _keys(source, "faults", faults, FAULTS)
    for name, spec in faults.items():
        _want(source, f"faults.{name}", spec, dict)
        _keys(source, f"faults.{name}", spec, ("admin", "fsync_match"))
        if len(spec) != 1:
            _fail(source, f"faults.{name}", "exactly one of admin, fsync_match")
        for k, v in spec.items():
            _want(source, f"faults.{name}.{k}", v, str)
            if k == "admin" and v not in kw["admin"]:
                _fail(source, f"faults.{name}.admin", f"names no admin command ({v!r})")
    kw["faults"] = faults
    if doc.get("advisory_setup") is not None:
        kw["advisory_setup"] = _one_of(source, "advisory_setup", doc["advisory_setup"], ("bypass-admin", "unprovisioned"))
    kw["barrier_env"] = _want(source, "barrier_env", doc.get("barrier_env"), str, null=True)
    busy = doc.get("busy")
    if busy is not None:
        _want(source, "busy", busy, dict)
        _keys(source, "busy", busy, ("exit", "code", "reason", "retry"))
        retry = _want(source, "busy.retry", busy.get("retry") or {}, dict)
        _keys(source, "busy.retry", retry, ("attempts", "backoff_ms"))
        b = Busy()
        b.exit = _want(source, "busy.exit", busy.get("exit", b.exit), int)
        b.code = _want(source, "busy.code", busy.get("code", b.code), str)
        b.reason = _want(source, "busy.reason", busy.get("reason", b.reason), str)
        b.attempts = _want(source, "busy.retry.attempts", retry.get("attempts", b.attempts), int)
        b.backoff_ms = _want(source, "busy.retry.backoff_ms", retry.get("backoff_ms", b.backoff_ms), int)
        if b.attempts < 1 or b.backoff_ms < 0:
            _fail(source, "busy.retry", "attempts >= 1 and backoff_ms >= 0")
        kw["busy"] = b
    extra = _want(source, "capabilities_extra_members_allowed", doc.get("capabilities_extra_members_allowed") or [], list)
    kw["capabilities_extra_members_allowed"] = [
        _pointer(source, f"capabilities_extra_members_allowed[{i}]", p) for i, p in enumerate(extra)]
    kw["known_deviations"] = _known(source, doc.get("known_deviations") or [])
    return ExternalProfile(**kw)


def load_profile(source: str | Path | dict) -> ExternalProfile:
    """A profile from a YAML file path or an already-parsed dict."""
    if isinstance(source, dict):
        return parse_profile(source)
    try:
        doc = safeload.yaml_file(source, what="profile")   # bounded, one-line errors (issue 13)
    except safeload.LoadError as e:
        raise ProfileError(str(e)) from None
    return parse_profile(doc, source)


# --------------------------------------------------------------------------- the profile against the program


def _member(doc, *path):
    for key in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def capability_mismatches(profile: ExternalProfile, envelope, mode: bool = True) -> dict[str, str]:
    """One line per profile member the program's own capabilities reply
    contradicts (``api_version``, ``backend_name``, and with ``mode`` the
    ``profile``: an advisory endpoint reports ``advisory`` by design), keyed
    by the member. A member the reply does not state is not compared (the
    envelope checks judge it)."""
    work_claim = _member(envelope, "result", "operations", "work_claim")
    out: dict[str, str] = {}
    said = _member(work_claim, "api_version")
    if isinstance(said, int) and not isinstance(said, bool) and said != profile.api_version:
        out["api_version"] = (f"profile {profile.name}: member api_version is {profile.api_version}, but the program's "
                              f"capabilities report api_version {said} (result.operations.work_claim.api_version)")
    said = _member(work_claim, "mode")
    if mode and said in ("fenced", "merge-coordinated") and said != profile.profile:
        out["profile"] = (f"profile {profile.name}: member profile is {profile.profile}, but the program's "
                          f"capabilities report mode {said} (result.operations.work_claim.mode)")
    said = _member(envelope, "result", "backend", "name")
    if profile.backend_name and isinstance(said, str) and said != profile.backend_name:
        out["backend_name"] = (f"profile {profile.name}: member backend_name is {profile.backend_name!r}, but the "
                               f"program's capabilities report {said!r} (result.backend.name)")
    return out


def _looks_wrapped(outcome: dict) -> bool:
    return set(outcome) == {"exit", "stdout"} and isinstance(outcome.get("stdout"), dict)


def _looks_unwrapped(outcome: dict) -> bool:
    return isinstance(outcome.get("ok"), bool) and "namespace" in outcome and "exit" not in outcome


def outcome_wrapping_mismatch(profile: ExternalProfile, envelope) -> str | None:
    """The line naming ``publication_read_outcome_wrapped`` when a publication
    read's stored outcome has the other shape than the profile declares."""
    outcome = _member(envelope, "result", "outcome")
    if not isinstance(outcome, dict):
        return None
    if profile.publication_read_outcome_wrapped and _looks_unwrapped(outcome) and not _looks_wrapped(outcome):
        return (f"profile {profile.name}: member publication_read_outcome_wrapped is true, but the program's "
                "publication read prints the stored outcome unwrapped (the publish envelope itself, no {exit, stdout})")
    if not profile.publication_read_outcome_wrapped and _looks_wrapped(outcome):
        return (f"profile {profile.name}: member publication_read_outcome_wrapped is false, but the program's "
                "publication read prints the stored outcome wrapped as {exit, stdout}")
    return None
