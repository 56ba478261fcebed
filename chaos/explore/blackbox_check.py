# The final check of a black-box reproduction (written by ``chaos repro`` beside repro.sh as check.py).
# Python's standard library only: nothing of the claim-chaos harness. It reads what each program call
# of repro.sh printed (OUT/<n>.json, OUT/<n>.exit) and compares it with the reply the deterministic run
# recorded (expected.json; the run's namespace is @NS@; left out: its instants, because libfaketime
# pins only the millisecond the reply reports, and operation_digest, a digest over the request, whose
# namespace differs). Exit 1 and "BROKEN" with the rule in words when
# every call got the run's reply, i.e. the replies that the suite's checker judged, these calls alone in
# this order, as breaking the rule; exit 0 "NOT SHOWN" when a reply differs.
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


def main(out, ns, expected_path):
    with open(expected_path) as f:
        spec = json.load(f)
    shown = True
    for call in spec["calls"]:
        n = call["n"]
        if call["f"] == "commit":
            continue
        code, reply = got(out, n)
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
    if shown:
        print(f"BROKEN ({spec['finding']}): {spec['rule']}")
        print(f"  the suite's checker: {spec['explanation']}")
        return 1
    print(f"NOT SHOWN ({spec['finding']}): a reply differs from the run's")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3]))
