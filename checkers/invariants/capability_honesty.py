"""Capability honesty: the backend keeps what its capability envelope says.

Contract §3 and design.md ("does it keep what it advertises?"):

* ``fenced`` / ``safe_exclusive_dispatch: true`` is a promise of zero stale
  writes and zero dual ownership under any schedule - so any ``stale_write``
  or ``dual_ownership`` anomaly makes that advertisement false; the profile's
  other members must also be the fenced ones (§3: scope, allowlist binding
  covering the namespaces used, enforcement point, write paths);
* ``advisory`` must refuse every ``publish-claimed`` with exit 2
  ``capability-unavailable`` (§3, §6): any other definite publish reply is a
  violation;
* ``merge-coordinated`` must report ``safe_exclusive_dispatch: false`` (§1, §3, §7).

The capabilities come from ``ctx["capabilities"]`` (an envelope, or
``{exit, envelope}``) and from capabilities replies in the history; every one
seen must agree. With none at all the verdict is ``unknown``.

An envelope reports ONE ledger's profile (§3: "reports one ledger's
provisioned claim profile"); the harness asks the same ledger each time. A
program with several ledgers (``ctx["ledger_of"]``: namespace -> ledger) may
bind each to its own namespaces, so the allowlist is held against the
namespaces served by its own ledger only, not those of the others.
"""

from __future__ import annotations

from backends.contract.capabilities import FENCED_SCOPE, REQUIRED_WRITE_PATHS

from . import dual_ownership, stale_write
from ._common import Findings, obj, once, prepare

PUBLISH_REFUSAL = "capability-unavailable"
PRE_CAPABILITY_CODES = frozenset(("invalid-request", "ledger-namespace-unbound"))


def _envelope(value: object) -> dict | None:
    v = obj(value)
    if isinstance(v.get("envelope"), dict):
        v = v["envelope"]
    return v if isinstance(v.get("result"), dict) else None


def check(history, ctx: dict | None = None) -> dict:
    ctx = ctx or {}
    prep = prepare(history)
    out = Findings()
    seen: list[tuple[dict, list[int]]] = []
    if _envelope(ctx.get("capabilities")):
        seen.append((_envelope(ctx["capabilities"]), []))
    for op, env in prep.capabilities:
        if op.type == "ok" and _envelope(env):
            seen.append((env, op.indices))
    if not seen:
        out.unknown("no capabilities envelope known (ctx['capabilities'] absent and none in the history)")
        return out.result({"mode": None})

    first, first_ops = seen[0]
    for env, ops in seen[1:]:
        if env.get("result") != first.get("result"):
            out.add("capabilities-changed",
                    "The backend reported two different capability envelopes during one run. A caller gates "
                    "publish-claimed on that ledger-specific response, so it must not change (contract §3).",
                    [*first_ops, *ops])
            break
    res = obj(first.get("result"))
    wc = obj(obj(res.get("operations")).get("work_claim"))
    backend = obj(res.get("backend"))
    mode, safe = wc.get("mode"), wc.get("safe_exclusive_dispatch")
    stats = {"mode": mode, "safe_exclusive_dispatch": safe}

    if mode == "fenced" or safe is True:
        _check_fenced_profile(out, wc, backend, prep, first_ops, ctx.get("ledger_of"))
        for name, checker in (("stale_write", stale_write.check), ("dual_ownership", dual_ownership.check)):
            r = once(prep, name, checker, ctx)
            if r["valid"] is False:
                a = r["anomalies"][0]
                out.add("fenced-but-unsafe",
                        f"The backend advertises mode {mode!r} with safe_exclusive_dispatch {safe!r}, yet the "
                        f"{name} checker found {r['stats'].get('anomalies_total', len(r['anomalies']))} "
                        f"violation(s), e.g.: {a['explanation']} A fenced capability promises that no stale "
                        "epoch ever writes (contract §1, §3).",
                        [*first_ops, *a["ops"]], checker=name, first=a["type"])
    if mode == "advisory":
        for op in prep.ops:
            if op.f != "publish" or not op.definite:
                continue
            code = op.code
            if code != PUBLISH_REFUSAL and code not in PRE_CAPABILITY_CODES:
                out.add("advisory-published",
                        f"The backend advertises mode 'advisory' but answered publish "
                        f"{op.oid} with exit {op.exit} {code or 'success'}. An advisory "
                        "endpoint has no atomic publication boundary and must refuse every publish-claimed with "
                        "exit 2 capability-unavailable (contract §3, §6).",
                        [*first_ops, *op.indices], operation_id=op.oid, code=code)
        if safe is not False or wc.get("claim_protected_publication") is not False:
            out.add("advisory-claims-safety",
                    "An advisory capability must report claim_protected_publication false and "
                    "safe_exclusive_dispatch false (contract §3).", first_ops, work_claim=wc)
    if mode == "merge-coordinated" and safe is not False:
        out.add("merge-coordinated-claims-exclusive",
                f"The backend reports mode 'merge-coordinated' with safe_exclusive_dispatch {safe!r}. The Git "
                "journal profile does not make the claim decision and the Git commit one atomic transaction, "
                "so it MUST report safe_exclusive_dispatch false (contract §1, §3, §7).",
                first_ops, work_claim=wc)
    if mode not in ("fenced", "advisory", "merge-coordinated"):
        out.add("unknown-capability-mode", f"The capability mode {mode!r} is none of fenced, merge-coordinated, "
                "advisory (contract §3).", first_ops, mode=mode)
    return out.result(stats)


def _check_fenced_profile(out: Findings, wc: dict, backend: dict, prep, ops: list[int],
                          ledger_of: object = None) -> None:
    problems = []
    if wc.get("mode") != "fenced" or wc.get("safe_exclusive_dispatch") is not True:
        problems.append(f"mode {wc.get('mode')!r} with safe_exclusive_dispatch {wc.get('safe_exclusive_dispatch')!r}")
    if wc.get("claim_protected_publication") is not True:
        problems.append("claim_protected_publication is not true")
    if wc.get("fencing_enforced_at") != "ledger-publication-commit-boundary":
        problems.append(f"fencing_enforced_at is {wc.get('fencing_enforced_at')!r}")
    if backend.get("coordination_scope") != FENCED_SCOPE:
        problems.append(f"coordination_scope is {backend.get('coordination_scope')!r}")
    if wc.get("write_paths") != REQUIRED_WRITE_PATHS:
        problems.append(f"write_paths are {wc.get('write_paths')!r}")
    binding = obj(backend.get("ledger_binding"))
    allow = binding.get("namespaces") if isinstance(binding.get("namespaces"), list) else []
    if binding.get("mode") != "explicit-allowlist" or not allow:
        problems.append("the ledger binding is not an explicit non-empty allowlist")
    else:
        used = {op.key[0] for op in prep.ops if op.type == "ok" and op.f != "capabilities" and op.key}
        stray = sorted(n for n in _same_ledger(used, allow, ledger_of) - set(allow) if isinstance(n, str))
        if stray:
            problems.append(f"namespaces {stray} were served but are not in the advertised allowlist")
    if problems:
        out.add("fenced-profile-inconsistent",
                "The backend advertises a strictly fenced capability, but " + "; ".join(problems) + ". "
                "safe_exclusive_dispatch may be true only with a shared transactional coordinator, an explicit "
                "allowlist covering the provisioned namespaces and the exact fenced write paths (contract §3).",
                ops, problems=problems)


def _same_ledger(used: set, allow: list, ledger_of: object) -> set:
    """The served namespaces the allowlist must cover: all of them for one
    ledger; with several (``ledger_of``), those of the ledger(s) its own
    namespaces live in - or all, when it names none of the run's (then it
    covers nothing its ledger served)."""
    if not isinstance(ledger_of, dict) or not ledger_of:
        return used
    own = {ledger_of[n] for n in allow if n in ledger_of}
    if not own:
        return used
    return {n for n in used if ledger_of.get(n, next(iter(own))) in own}
