"""Property: a random single mutation of a valid history is caught, or is
still valid by the exact claim model - and then no invariant flags it either.

Histories are real reference-backend replies on one tuple (so the claim
model, one register per tuple, sees everything a checker sees) without the
final durable export (which a mutated reply would contradict outside the
model's view). One reply value is changed the way a buggy backend might: a
decision time, an epoch, an owner, an expiry, a code, a revision, or the
reply dropped (``info``). If the model finds no linearization, the history
is invalid and is reported; if it finds one, the mutation was something a
correct backend could also have answered, and every invariant must accept it
(the invariants never cry wolf beyond the contract's model)."""

from __future__ import annotations

import copy
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_invariants_support import simulate

from backends.contract.values import format_instant, parse_instant
from checkers import default_checkers, run_checkers

#: invariants that judge only what the claim model judges too, on one tuple
SEMANTIC = ("dual_ownership", "decisions", "epochs", "floors", "idempotence", "stale_write", "durability")


def _replies(history):
    return [i for i, op in enumerate(history) if op.get("process") != "nemesis" and op["type"] in ("ok", "fail")
            and isinstance((op.get("value") or {}).get("envelope"), dict)]


def _places(env: dict) -> list[dict]:
    r, err = env.get("result") or {}, env.get("error") or {}
    out = [x for x in (r.get("read_back"), r.get("claim_read_back"), err.get("details")) if isinstance(x, dict)]
    for x in list(out):
        if isinstance(x.get("active"), dict):
            out.append(x["active"])
    out += [x for x in (r.get("claim"), r.get("released_claim")) if isinstance(x, dict)]
    return out


def mutate(history: list[dict], rnd: random.Random) -> tuple[list[dict], str] | None:
    h = copy.deepcopy(history)
    candidates = _replies(h)
    if not candidates:
        return None
    i = rnd.choice(candidates)
    op = h[i]
    env = op["value"]["envelope"]
    places = _places(env)
    kind = rnd.choice(["time", "epoch", "owner", "expiry", "code", "revision", "drop"])
    if kind == "drop":
        h[i] = {k: v for k, v in op.items() if k != "value"} | {"type": "info", "error": "reply lost"}
        return h, f"drop reply {i}"
    fields = {"time": ("observed_at", "issued_at"), "epoch": ("epoch", "last_epoch"), "owner": ("owner_id",),
              "expiry": ("expires_at",), "revision": ("committed_revision", "actual_revision")}
    if kind == "code":
        err = env.get("error")
        if not isinstance(err, dict) or err.get("code") not in ("claim-held", "claim-conflict", "claim-expired"):
            return None
        err["code"] = rnd.choice([c for c in ("claim-held", "claim-conflict", "claim-expired") if c != err["code"]])
        return h, f"code of reply {i} -> {err['code']}"
    spots = [(p, k) for p in places + [env.get("result") or {}] for k in fields[kind] if k in p]
    if not spots:
        return None
    place, key = rnd.choice(spots)
    value = place[key]
    if kind in ("time", "expiry"):
        place[key] = format_instant(parse_instant(value) + rnd.choice([-5000, -1000, -1, 1, 1000, 5000]))
    elif kind == "epoch":
        place[key] = str(max(0, int(value) + rnd.choice([-1, 1, 2])))
    elif kind == "owner":
        place[key] = value + "-x"
    else:
        others = sorted({o["value"].get("candidate_sha256") for o in h if o.get("f") == "publish"
                         and o["type"] == "invoke"} - {value, None})
        if not others:
            return None
        place[key] = rnd.choice(others)
    return h, f"{kind}: reply {i} {key} {value} -> {place[key]}"


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(seed=st.integers(0, 2**32 - 1), mseed=st.integers(0, 2**32 - 1), workers=st.integers(2, 4),
       lost=st.sampled_from([0.0, 0.1]), backstep=st.sampled_from([0.0, 0.2]))
def test_a_single_mutation_is_caught_or_valid_by_the_model(seed, mseed, workers, lost, backstep):
    history, ctx = simulate(seed, n_workers=workers, steps=160, n_items=1, p_lost=lost, p_backstep=backstep,
                            p_restart=0.0)
    history = [op for op in history if op.get("f") != "final-state"]
    got = mutate(history, random.Random(mseed))
    if got is None:
        return
    mutated, what = got
    result = run_checkers(mutated, dict(ctx, timeout=30), default_checkers())
    verdicts = {n: r["valid"] for n, r in result["checkers"].items()}
    assert "unknown" not in verdicts.values(), (what, {n: r.get("error") for n, r in result["checkers"].items()})
    if verdicts["linearizable"] is True:
        flagged = {n: [a["explanation"] for a in result["checkers"][n]["anomalies"][:1]]
                   for n in SEMANTIC if verdicts[n] is not True}
        assert not flagged, (what, flagged)
