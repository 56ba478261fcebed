"""``chaos repro`` for a black-box program (``--backend external``): a finding as plain program calls.

From a deterministic run's history and fault evidence, ``write`` makes
``RUN/repro/<finding>/``: ``repro.sh`` (a fresh Git repository provisioned
by the program, the items the calls touch with the run's seeded bytes, then
each call of the finding's item(s) one at a time: the profile's argv, the
run's exact request on stdin with the fresh namespace put in, the wall clock
pinned by libfaketime at the instant the run's reply says the call was
decided, and the run's fault at its point through ``faultshim.c``, built with
gcc), ``check.py`` (the final check, standard library only) and a README.

The fault's point: the scheduler names the syscall and the file (its
``fault.point``), not which of that call's syscalls on that file it was, so
the n-th is searched (1..``MAX_NTH``): the n kept is the first with which the
most calls, in order, get the run's replies; then each call the finding
neither cites nor faults is dropped while the rest still show it
(``fewer_calls``). The script is kept only when every call gets the run's
reply (instants left out) on three runs of three; the suite's own checker,
given those calls alone in this order with the run's replies, reports the
rule broken (``judged``; a set of calls it does not judge broken is said).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time

from chaos.explore.repro import NotReproducible

HERE = os.path.dirname(__file__)
RUNS_TO_KEEP = 3
#: the n-th matching syscall of a faulted call tried when placing its fault
MAX_NTH = 6
#: how long dropping needless calls may take (each try runs the whole script once)
MINIMISE_S = 300.0
#: the ops of a claims run that are program calls (``commit`` is the cooperating agent's Git step)
PROGRAM_OPS = ("read", "acquire", "renew", "release", "publish", "publication-read", "verify", "capabilities")
#: the scheduler's fault actions the shim makes
ACTIONS = {"kill": "KILL", "EIO": "EIO"}
#: a random part of a file name (a lock candidate's uuid, a temp file's hex suffix)
RANDOM = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{16,}")


def findings(results: dict) -> list[tuple[str, str, dict]]:
    """(id, checker, anomaly) of every finding: a known one (acknowledged by the profile) by its
    deviation's id (``F5-refused-acquire-took-effect``), others as ``checker-type``; the findings a
    known one caused (a deviation ``within`` another) last."""
    own, caused = [], []
    for checker, res in (results.get("checkers") or {}).items():
        if not isinstance(res, dict):
            continue
        for a in res.get("anomalies") or [] if res.get("valid") is False else []:
            own.append((f"{checker}-{a.get('type', 'anomaly')}", checker, a))
        for a in res.get("known") or []:
            dev = a.get("known") or {}
            within = next((d.get("within") for d in results.get("known_deviations") or [] if d.get("id") == dev.get("id")), None)
            (caused if within else own).append((dev.get("id") or f"{checker}-{a.get('type')}", checker, a))
    out, seen = [], set()
    for f in own + caused:
        if f[0] not in seen:
            seen.add(f[0])
            out.append(f)
    return out


def _epoch_ms(ops: list[dict]) -> int:
    """The run's virtual epoch in Unix ms (its wall clock at virtual time 0)."""
    for op in ops:
        if isinstance(op.get("wall_ms"), int) and isinstance(op.get("time"), int):
            return op["wall_ms"] - op["time"] // 1_000_000
    raise NotReproducible("the history has no wall-clock stamp: not a deterministic run of this suite")


def _decided_ms(op: dict, invoked: dict, epoch_ms: int) -> int:
    """The instant to pin a call's clock at: the ``observed_at`` its reply reports (the program's own
    word), else the instant it was invoked (a killed call, or a reply without an instant, such as
    ``publication-outcome-unknown``: its decision came after the invocation, its reply much later)."""
    from chaos.explore.repro import decided_at

    value = op.get("value") if isinstance(op.get("value"), dict) else {}
    if isinstance(value.get("envelope"), dict) and '"observed_at"' in json.dumps(value["envelope"]):
        return decided_at(op)
    return epoch_ms + int(invoked.get("time", 0)) // 1_000_000


def _match(path: str, ns: str) -> str:
    """The shim's FAULT_MATCH for a fault's file: its name with the run's namespace as @NS@, cut
    before a random part (a lock candidate's uuid, a temp file's hex suffix)."""
    name = os.path.basename(path).replace(ns, "@NS@")
    m = RANDOM.search(name)
    return name[:m.start()] if m else name


def calls_of(ops: list[dict], cited: set[int], ns: str, epoch_ms: int) -> list[dict]:
    """The program calls (and Git steps) on the cited calls' items up to the last cited one, in
    completion order, each with its reply (or ``killed``) and its fault."""
    by_index = {op["index"]: op for op in ops}
    items = {(by_index[i].get("value") or {}).get("item_id") for i in cited
             if i in by_index and isinstance(by_index[i].get("value"), dict)} - {None}
    invoked, calls = {}, []
    for op in ops:
        if op["index"] > max(cited):
            break
        if not isinstance(op.get("process"), int):
            continue
        if op["type"] == "invoke":
            invoked[op["process"]] = op
            continue
        inv = invoked.pop(op["process"], None)
        if inv is None or op["f"] not in PROGRAM_OPS + ("commit",):
            continue
        req = inv["value"] if isinstance(inv["value"], dict) else {}
        touched = set(req.get("item_ids") or []) | {req.get("item_id")}
        if not touched & items and not {inv["index"], op["index"]} & cited:
            continue
        fault = op.get("fault") if isinstance(op.get("fault"), dict) and op["fault"].get("inside") else None
        point = (fault or {}).get("point") or {}
        value = op.get("value") if isinstance(op.get("value"), dict) else {}
        killed = op["type"] == "info" and not isinstance(value.get("envelope"), dict)   # no reply at all
        if killed and not (fault and point.get("action") == "kill"):
            raise NotReproducible(f"call #{op['index']} ({op['f']}) has no reply and no kill at a point: "
                                  f"{op.get('error', 'outcome unknown')}")
        shim = None
        if fault:
            if point.get("action") not in ACTIONS:
                raise NotReproducible(f"call #{op['index']}: fault {point.get('action')!r} has no shim yet")
            if point.get("call") in ("lock", "unlock", "flock"):
                raise NotReproducible(f"call #{op['index']}: a fault at a lock step has no shim yet")
            shim = {"call": point["call"], "match": _match(point.get("path", ""), ns),
                    "action": ACTIONS[point["action"]], "nth": 1, "path": point.get("path")}
        calls.append({"f": op["f"], "request": req, "at_ms": _decided_ms(op, inv, epoch_ms), "killed": killed,
                      "exit": value.get("exit"), "envelope": value.get("envelope"), "fault": shim,
                      "cited": bool({inv["index"], op["index"]} & cited), "index": op["index"]})
    return calls


def script_data(run_dir: str, finding: str | None) -> tuple:
    """(judge, data): the finding's calls and everything the script needs, from the stored run."""
    from backends.external.profile import load_profile
    from chaos.explore.repro import chosen_finding, judge_of

    cfg, results, (fid, checker, anomaly), ops, cited = chosen_finding(
        run_dir, finding, findings, "not a deterministic run: its calls' instants and fault points are not recorded exactly")
    ns = next(op["value"]["ledger_namespace"] for op in ops
              if isinstance(op.get("value"), dict) and isinstance(op["value"].get("ledger_namespace"), str))
    epoch_ms = _epoch_ms(ops)
    calls = calls_of(ops, cited, ns, epoch_ms)
    profile = load_profile(cfg["profile"])
    items = sorted({c["request"].get("item_id") for c in calls if c["request"].get("item_id")})
    dev = (anomaly.get("known") or {})
    rule = dev.get("reason") or ""
    return judge_of(cfg, results), {
        "finding": fid, "checker": checker, "type": anomaly.get("type"), "explanation": anomaly.get("explanation", ""),
        "rule": rule or anomaly.get("explanation", ""), "reference": dev.get("reference"),
        "command": cfg["backend_command"], "argv": {f: profile.argv.get(f) for f in PROGRAM_OPS},
        "namespace": ns, "epoch_ms": epoch_ms, "items": _seeded_items(run_dir, ns, items), "calls": calls}


def _seeded_items(run_dir: str, ns: str, items: list[str]) -> dict[str, str]:
    """item id -> the bytes the run seeded it with (the first Git commit of its ledgers, in the ledger
    bound to ``ns`` that holds it: a deterministic run's ledgers may all be bound to one name), as text."""
    repo = os.path.join(run_dir, "ledgers")
    first = subprocess.run(["git", "-C", repo, "rev-list", "--max-parents=0", "HEAD"], capture_output=True,
                           text=True).stdout.split()
    ledgers = [d for d in sorted(os.listdir(repo)) if _read(os.path.join(repo, d, ".wowbagger", "namespace")) == ns]
    if not first or not ledgers:
        raise NotReproducible(f"{repo}: no seed commit or no ledger bound to {ns}: its items' seeded bytes are unknown")
    out = {}
    for item in items:
        for ledger in ledgers:
            res = subprocess.run(["git", "-C", repo, "show", f"{first[-1]}:{ledger}/{item}.md"], capture_output=True)
            if res.returncode == 0:
                out[item] = res.stdout.decode()
                break
    return out


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _iso(ms: int) -> str:
    from datetime import datetime, timezone

    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def _faketime(ms: int) -> str:
    """libfaketime's frozen absolute form (``.mmm500``: ms-exact, as ``chaos.faults.faketime`` writes it)."""
    from chaos.faults.faketime import format_absolute

    return format_absolute(ms)


def render(data: dict, faketime_lib: str) -> str:
    """repro.sh: the set-up, then every call one at a time, then check.py."""
    q = shlex.quote
    lines = [
        "#!/usr/bin/env bash",
        f"# {data['finding']}: {sum(c['f'] != 'commit' for c in data['calls'])} calls of the program, one at a time,",
        "# each at the instant the deterministic run decided it (libfaketime, frozen), with the run's fault at its",
        "# point (faultshim.c, built here with gcc). Exit 1 (BROKEN) when every call gets the run's reply: the",
        "# rule is broken; 0 (NOT SHOWN) when a reply differs; 2 when the set-up fails.",
        "# WB: the program's command line; FAKETIME_LIB: a libfaketime.so.1 (e.g. Debian's libfaketime package).",
        "set -u",
        f"WB=${{WB:-{q(data['command'])}}}",
        f"FAKETIME_LIB=${{FAKETIME_LIB:-{q(faketime_lib)}}}",
        'HERE=$(cd "$(dirname "$0")" && pwd)',
        'T=$(mktemp -d); trap \'rm -rf "$T"\' EXIT',
        'gcc -shared -fPIC -O2 -o "$T/faultshim.so" "$HERE/faultshim.c" -ldl || exit 2',
        'R="$T/R"; L="$R/ledger"; OUT="$T/out"; mkdir -p "$L" "$OUT"; git -C "$R" init -q || exit 2',
        "# at INSTANT: the program's wall clock frozen there (UTC); FAULT_*: the shim's one fault, if any",
        'at() { local when=$1; shift; env TZ=UTC FAKETIME="$when" FAKETIME_DONT_FAKE_MONOTONIC=1 '
        'LD_PRELOAD="$T/faultshim.so $FAKETIME_LIB" "$@"; }',
        '# call N INSTANT ARGS...: one program call, the request on stdin (@NS@: the namespace provision minted)',
        'call() { local n=$1 when=$2; shift 2; sed "s/@NS@/$NS/g" | at "$when" $WB "$@" > "$OUT/$n.json" 2> "$OUT/$n.err";',
        '  echo $? > "$OUT/$n.exit"; head -c 2000 "$OUT/$n.json"; echo "   -> exit $(cat "$OUT/$n.exit")"; }',
        f"NS=$(at {q(_faketime(data['epoch_ms']))} $WB provision --ledger \"$L\" --json | "
        "python3 -c 'import json,sys; print(json.load(sys.stdin)[\"result\"][\"ledger_namespace\"])') || exit 2",
        'echo "provisioned $L: namespace $NS"',
    ]
    for item, text in sorted(data["items"].items()):
        lines += [f"cat > \"$L/{item}.md\" <<'ITEM'", text if text.endswith("\n") else text, "ITEM"]
        if not text.endswith("\n"):   # the seeded bytes end without LF: drop the here-doc's
            lines.append(f"truncate -s -1 \"$L/{item}.md\"")
    lines.append('git -C "$R" add -A && git -C "$R" -c user.name=u -c user.email=u@example.invalid commit -qm seed || exit 2')
    for n, c in enumerate(data["calls"], 1):
        c["n"] = n
        if c["f"] == "commit":
            lines += [f"echo '--- {n}. the cooperating agent commits the item files (git add, git commit)'",
                      'git -C "$R" add -A && git -C "$R" -c user.name=u -c user.email=u@example.invalid commit -qm step'
                      ' >/dev/null; true']
            continue
        argv = " ".join(q(a) if "{ledger}" not in a else '"' + a.replace("{ledger}", "$L") + '"'
                        for a in data["argv"][c["f"]])
        f = c["fault"]
        fault_env = (f"FAULT_CALL={f['call']} FAULT_MATCH=\"{f['match'].replace('@NS@', '$NS')}\" "
                     f"FAULT_NTH={f['nth']} FAULT_ACTION={f['action']} ") if f else ""
        what = (f"; fault: {'SIGKILL before' if f['action'] == 'KILL' else 'EIO from'} the {f['nth']}. {f['call']} of "
                f"a file named like {f['match']}" if f else "")
        lines.append(f"echo '--- {n}. {c['f']} at {_iso(c['at_ms'])}{what}{' (cited)' if c['cited'] else ''}'")
        body = "" if c["f"] == "verify" else json.dumps(c["request"], separators=(",", ":")).replace(data["namespace"], "@NS@")
        lines += [f"{fault_env}call {n} {q(_faketime(c['at_ms']))} {argv} <<'REQ'", body, "REQ"]
    lines.append('python3 "$HERE/check.py" "$OUT" "$NS" "$HERE/expected.json"')
    return "\n".join(lines) + "\n"


def expected(data: dict) -> dict:
    """expected.json for check.py: each call's reply as the run recorded it (instants left out)."""
    from chaos.explore.blackbox_check import without_instants

    ns = data["namespace"]
    return {"finding": data["finding"], "type": data["type"], "rule": data["rule"], "explanation": data["explanation"],
            "calls": [{"n": c["n"], "f": c["f"], "cited": c["cited"], "killed": c["killed"], "exit": c["exit"],
                       "reply": without_instants(c["envelope"], ns),
                       "request": json.loads(json.dumps(c["request"]).replace(ns, "@NS@"))} for c in data["calls"]]}


def _materialise(data: dict, out: str, faketime_lib: str) -> str:
    os.makedirs(out, exist_ok=True)
    sh = os.path.join(out, "repro.sh")
    with open(sh, "w") as f:
        f.write(render(data, faketime_lib))
    os.chmod(sh, 0o755)
    shutil.copy(os.path.join(HERE, "faultshim.c"), os.path.join(out, "faultshim.c"))
    shutil.copy(os.path.join(HERE, "blackbox_check.py"), os.path.join(out, "check.py"))
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(expected(data), f, indent=1)
    return sh


def run_script(sh: str, timeout: float = 600) -> tuple[int, str]:
    res = subprocess.run(["bash", sh], capture_output=True, text=True, timeout=timeout)
    return res.returncode, res.stdout + res.stderr


def _prefix(output: str) -> int:
    """How many checked calls, in order, got the run's reply (check.py's lines)."""
    n = 0
    for line in output.splitlines():
        if line.startswith("check "):
            if "NOT as in the run" in line:
                return n
            n += 1
    return n


def place_faults(data: dict, out: str, faketime_lib: str, log=print) -> None:
    """Per faulted call in order, the n-th matching syscall (1..MAX_NTH) with which the most calls get
    the run's replies (the first such n)."""
    for c in [c for c in data["calls"] if c["fault"]]:
        best = (-1, 1)
        for nth in range(1, MAX_NTH + 1):
            c["fault"]["nth"] = nth
            code, output = run_script(_materialise(data, out, faketime_lib))
            if code == 2:
                raise NotReproducible(f"the script's set-up failed: {output.strip()[-300:]}")
            got = _prefix(output)
            log(f"chaos repro: call {c['n']} {c['f']}: fault at the {nth}. {c['fault']['call']} of "
                f"{c['fault']['match']}: {got} calls as in the run" + (" (all: shown)" if code == 1 else ""))
            if got > best[0]:
                best = (got, nth)
            if code == 1:
                break
        c["fault"]["nth"] = best[1]


def fewer_calls(data: dict, out: str, faketime_lib: str, judge, log=print, budget_s: float = MINIMISE_S) -> dict:
    """Drop, one at a time from the first, each call the finding neither cites nor faults while the
    rest still show it (every reply the run's) and the suite's checker, given the rest alone, still
    reports the rule broken; within ``budget_s`` (each try is a whole run of the script)."""
    t0 = time.monotonic()
    i = 0
    while i < len(data["calls"]) and time.monotonic() - t0 < budget_s:
        c = data["calls"][i]
        trial = dict(data, calls=data["calls"][:i] + data["calls"][i + 1:])
        if c["cited"] or c["fault"] or not judged(trial, judge) \
                or run_script(_materialise(trial, out, faketime_lib))[0] != 1:
            i += 1
            continue
        log(f"chaos repro: without the {c['f']} of history #{c['index']} the rest still show it: dropped")
        data = trial
    return data


def judged(data: dict, judge) -> bool:
    """Do these calls alone, one at a time in this order with the run's replies, break the finding's
    rule by the suite's own checker? (A killed call is an ``info`` op: its outcome unknown.)"""
    ops, t = [], 0
    for n, c in enumerate(c for c in data["calls"] if c["f"] != "commit"):
        ops.append({"index": len(ops), "process": n, "type": "invoke", "f": c["f"], "value": c["request"], "time": t})
        if c["killed"]:
            ops.append({"index": len(ops), "process": n, "type": "info", "f": c["f"], "error": "killed", "time": t + 1})
        else:
            ops.append({"index": len(ops), "process": n, "type": "ok" if c["exit"] == 0 else "fail", "f": c["f"],
                        "value": {"exit": c["exit"], "envelope": c["envelope"]}, "wall_ms": c["at_ms"], "time": t + 1})
        t += 2
    return data["type"] in judge(ops).get(data["checker"], ())


def write(run_dir: str, finding: str | None = None, log=print) -> dict:
    """RUN/repro/<finding>/{repro.sh, faultshim.c, check.py, expected.json, README.md}, kept only when
    the script shows the finding on three runs of three."""
    from chaos.faults.faketime import library_path

    if finding is None:
        reasons = []
        from chaos.shrink import load_run

        for fid, _, _ in findings(load_run(run_dir)[1]):
            try:
                return write(run_dir, fid, log)
            except NotReproducible as e:
                reasons.append(f"{fid}: {e}")
        raise NotReproducible("; ".join(reasons) or "the run found nothing")
    judge, data = script_data(run_dir, finding)
    for n, c in enumerate(data["calls"], 1):
        c["n"] = n
    if not judged(data, judge):
        log(f"chaos repro: note: the suite's checker, given these {len(data['calls'])} calls alone, does not "
            f"report {data['checker']}:{data['type']} (it needed more of the run)")
    out = os.path.join(run_dir, "repro", data["finding"])
    lib = library_path()
    place_faults(data, out, lib, log)
    data = fewer_calls(data, out, lib, judge, log)
    sh = _materialise(data, out, lib)
    results = [run_script(sh) for _ in range(RUNS_TO_KEEP)]
    shown = sum(code == 1 for code, _ in results)
    if shown < RUNS_TO_KEEP:
        shutil.rmtree(out, ignore_errors=True)
        raise NotReproducible(f"the script showed the finding in {shown} of {RUNS_TO_KEEP} runs: not kept "
                              f"(last output: {results[-1][1].strip()[-400:]})")
    with open(os.path.join(out, "README.md"), "w") as f:
        f.write(readme(data, run_dir, results[0][1]))
    with open(os.path.join(out, "calls.json"), "w") as f:   # what the script was rendered from (``render``)
        json.dump(data, f, indent=1)
    return {"finding": data["finding"], "dir": out, "calls": sum(c["f"] != "commit" for c in data["calls"]),
            "shown": shown}


def readme(data: dict, run_dir: str, output: str) -> str:
    lines = [f"# {data['finding']}", "", data["rule"], "", f"The suite's checker ({data['checker']}: {data['type']}): "
             f"{data['explanation']}", "",
             f"Found by the deterministic run `{run_dir}` (replay it exactly: `chaos run --config "
             f"{os.path.join(run_dir, 'test.yaml')}`)." + (f" See {data['reference']}." if data.get("reference") else ""),
             "", "`bash repro.sh` needs bash, git, gcc, python3 (standard library), the program (`WB`) and a "
             "libfaketime (`FAKETIME_LIB`); it imports nothing of claim-chaos. It provisions a fresh ledger, "
             "writes the items with the run's seeded bytes, makes each call below one at a time with the run's "
             "exact request, its clock frozen at the instant the run decided it, the fault at its point through "
             "`faultshim.c`, then `check.py` compares every reply with the run's (instants left out) and, for the "
             "rules it knows (F4, F5, F7's), checks the rule on these replies, instants included: exit 1 and "
             "BROKEN when both hold, 0 and NOT SHOWN otherwise. It showed the finding on 3 runs of 3 "
             "before it was kept.", "", "## Calls", ""]
    for c in data["calls"]:
        f = c["fault"]
        lines.append(f"{c['n']}. `{c['f']}` at {_iso(c['at_ms'])}" + (" (cited)" if c["cited"] else "")
                     + (f": {f['action']} at the {f['nth']}. `{f['call']}` of `{f['match']}`" if f else "")
                     + (": killed" if c["killed"] else f": exit {c['exit']}" if c["f"] != "commit" else ""))
    lines += ["", "## Its output (first of the three runs)", "", "```", output.strip()[-6000:], "```"]
    return "\n".join(lines) + "\n"
