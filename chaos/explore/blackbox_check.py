# The final check of a black-box reproduction (written by ``chaos repro`` beside repro.sh as check.py).
# Python's standard library only: nothing of the claim-chaos harness. It reads what each program call
# of repro.sh printed (OUT/<n>.json, OUT/<n>.exit) and compares it with the reply the deterministic run
# recorded (expected.json; the run's namespace is @NS@; left out: its instants, because libfaketime
# pins only the millisecond the reply reports, and operation_digest, a digest over the request, whose
# namespace differs). Exit 1 and "BROKEN" with the rule in words when
# every call got the run's reply, i.e. the replies that the suite's checker judged, these calls alone in
# this order, as breaking the rule, and (for the rules in RULES) these replies break it by themselves,
# instants included; exit 0 "NOT SHOWN" otherwise.
import json
import os
import sys

KILLED = 128 + 9   # the shell's exit status of a program ended by SIGKILL


def without_instants(value, ns):
    """``value`` with the run's namespace as @NS@; every ``*_at`` instant, message and
    ``operation_digest`` (a digest of a request naming the namespace) left out."""
    if isinstance(value, dict):
        return {k: without_instants(v, ns) for k, v in value.items()
                if not k.endswith("_at") and k not in ("message", "operation_digest")}
    if isinstance(value, list):
        return [without_instants(v, ns) for v in value]
    if isinstance(value, str) and ns:
        return value.replace(ns, "@NS@")
    return value


def got(out, n):
    with open(os.path.join(out, f"{n}.exit")) as f:
        code = int(f.read().strip() or -1)
    try:
        with open(os.path.join(out, f"{n}.json")) as f:
            reply = json.loads(f.read())
    except (OSError, ValueError):
        reply = None
    return code, reply


def _result(reply):
    return (reply or {}).get("result") or {}


def _stale_fence(calls):
    """An accepted publish whose own claim_read_back shows its fence's claim expired or gone."""
    for c, code, reply in calls:
        back = _result(reply).get("claim_read_back") or {}
        if c["f"] == "publish" and code == 0 and back:
            active, fence = back.get("active") or {}, _result(reply).get("claim_fence") or {}
            if not active or (active.get("owner_id"), active.get("epoch")) != (fence.get("owner_id"), fence.get("epoch")):
                return f"publish {c['n']} was accepted, yet its claim_read_back shows no claim of its fence"
            if active.get("expires_at", "") <= back.get("observed_at", ""):
                return (f"publish {c['n']} was accepted at {back['observed_at']}, yet its claim_read_back shows the "
                        f"claim expired at {active['expires_at']}")
    return False


def _refused_acquire_in_effect(calls):
    """An acquire answered unchanged (exit 6), then a read showing that owner at the next epoch."""
    for i, (c, code, reply) in enumerate(calls):
        req = c.get("request") or {}
        if c["f"] != "acquire" or code != 6 or (reply or {}).get("state") != "unchanged":
            continue
        epoch = str(int((req.get("expected") or {}).get("last_epoch", "-1")) + 1)
        for later, _, r in calls[i + 1:]:
            active = (_result(r).get("read_back") or {}).get("active") or {}
            if later["f"] == "read" and active.get("owner_id") == req.get("owner_id") and active.get("epoch") == epoch:
                return (f"acquire {c['n']} by {req.get('owner_id')} answered exit 6 state unchanged, yet read "
                        f"{later['n']} shows {req.get('owner_id')} holding epoch {epoch}")
    return False


def _false_conflict(calls):
    """A publish refused as ledger-revision-conflict whose actual revision is the request's expected one."""
    for c, code, reply in calls:
        err = (reply or {}).get("error") or {}
        if c["f"] == "publish" and err.get("code") == "ledger-revision-conflict" and \
                (err.get("details") or {}).get("actual_revision") == (c.get("request") or {}).get("expected_revision"):
            return (f"publish {c['n']} was refused as ledger-revision-conflict although its actual_revision is the "
                    "request's own expected_revision")
    return False


#: anomaly type -> a check of the rule on this script's own replies (other types: the replies alone)
RULES = {"stale-fence-accepted": _stale_fence, "failed-acquire-took-effect": _refused_acquire_in_effect,
         "false-revision-conflict": _false_conflict}


def main(out, ns, expected_path):
    with open(expected_path) as f:
        spec = json.load(f)
    shown = True
    replies = []
    for call in spec["calls"]:
        n = call["n"]
        if call["f"] == "commit":
            continue
        code, reply = got(out, n)
        replies.append((call, code, reply))
        if call["killed"]:
            same = code == KILLED
            want = "killed by SIGKILL"
        else:
            same = code == call["exit"] and without_instants(reply, ns) == call["reply"]
            want = f"exit {call['exit']} {json.dumps(call['reply'], sort_keys=True)}"
        mark = "as in the run" if same else "NOT as in the run"
        print(f"check {n}. {call['f']}: exit {code}: {mark}{' (cited)' if call['cited'] else ''}")
        if not same:
            print(f"   the run's reply: {want[:600]}")
            shown = False
    rule = RULES.get(spec.get("type"))
    evidence = rule(replies) if rule else None
    if shown and evidence is False:
        print(f"NOT SHOWN ({spec['finding']}): every reply is the run's, but they do not break the rule themselves")
        return 0
    if shown:
        print(f"BROKEN ({spec['finding']}): {spec['rule']}")
        if evidence:
            print(f"  shown by these replies: {evidence}")
        if spec["explanation"] != spec["rule"]:
            print(f"  the suite's checker: {spec['explanation']}")
        return 1
    print(f"NOT SHOWN ({spec['finding']}): a reply differs from the run's")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
