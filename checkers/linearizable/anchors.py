"""The models and parsers of Porcupine's own test suite, for the anchor histories.

``shared/anchors/porcupine/test_data`` holds Jepsen etcd logs (a CAS register)
and key/value store logs, each with a known verdict (see that README). These
parsers follow its table exactly: an ``:info`` op stays open (return at
``INF``, output ``UNKNOWN``), a ``:fail :read :timed-out`` returns with output
``UNKNOWN``. The line index is the time, so no two events tie.
"""

from __future__ import annotations

import re
from typing import Any

from .model import INF, KEEPS, READS, UNKNOWN, WRITES, Model, Operation

# --------------------------------------------------------------------------- etcd: a CAS register

READ, WRITE, CAS = 0, 1, 2
_ETCD_LINE = re.compile(r"jepsen\.util - (\d+)\s+:(\w+)\s+:([\w-]+)\s+(.*?)\s*$")


def parse_etcd_log(path: str) -> list[Operation]:
    """One Jepsen etcd log -> operations. Inputs are ``(READ,)``, ``(WRITE, v)``, ``(CAS, a, b)``."""
    ops: list[Operation] = []
    open_op: dict[int, Operation] = {}
    with open(path) as f:
        lines = f.read().splitlines()
    for t, line in enumerate(lines):
        m = _ETCD_LINE.search(line)
        if not m:
            raise ValueError(f"{path}:{t + 1}: not a jepsen.util op line: {line!r}")
        process, kind, f_name, value = int(m[1]), m[2], m[3], m[4]
        if kind == "invoke":
            if f_name == "read":
                inp: tuple = (READ,)
            elif f_name == "write":
                inp = (WRITE, int(value))
            elif f_name == "cas":
                a, b = value.strip("[]").split()
                inp = (CAS, int(a), int(b))
            else:
                raise ValueError(f"{path}:{t + 1}: unknown op {f_name!r}")
            op = Operation(process, inp, t, UNKNOWN, INF)
            open_op[process] = op
            ops.append(op)
        elif kind == "info":
            open_op.pop(process)  # indeterminate: stays open to +inf with output UNKNOWN
        else:
            op = open_op.pop(process)
            op.return_time = t
            if kind == "fail" and value == ":timed-out":
                op.output = UNKNOWN
            elif f_name == "read":
                op.output = None if value == "nil" else int(value)
            elif f_name == "write":
                op.output = None
            else:  # cas
                op.output = kind == "ok"
    return ops


def etcd_step(state: int | None, inp: tuple, out: Any) -> tuple[bool, int | None]:
    kind = inp[0]
    if kind == READ:
        return (out is UNKNOWN or out == state), state
    if kind == WRITE:
        return True, inp[1]
    if state == inp[1]:
        return out is not False, inp[2]
    return out is not True, state


def etcd_effect(inp: tuple, out: Any) -> tuple | None:
    """``etcd_step``'s fixed shapes: a read keeps the state it saw, a write sets it; a CAS asks the step."""
    if inp[0] == READ:
        return (KEEPS,) if out is UNKNOWN else (READS, out)
    return (WRITES, inp[1]) if inp[0] == WRITE else None


def _describe_etcd(inp: tuple, out: Any) -> str:
    kind = inp[0]
    if kind == READ:
        return f"read() -> {'?' if out is UNKNOWN else ('nil' if out is None else out)}"
    if kind == WRITE:
        return f"write({inp[1]})"
    return f"cas({inp[1]}, {inp[2]}) -> {'?' if out is UNKNOWN else ('ok' if out else 'fail')}"


etcd_model = Model(
    init=lambda: None,
    step=etcd_step,
    describe_operation=_describe_etcd,
    describe_state=lambda s: "nil" if s is None else str(s),
    name="etcd-register",
    effect=etcd_effect,
)

# --------------------------------------------------------------------------- kv: get / put / append by key

GET, PUT, APPEND = 0, 1, 2
_KV_LINE = re.compile(r'\{:process (\d+), :type :(\w+), :f :(\w+), :key "([^"]*)", :value (nil|"[^"]*")\}')
_KV_F = {"get": GET, "put": PUT, "append": APPEND}


def parse_kv_log(path: str) -> list[Operation]:
    """One kv log -> operations with input ``(f, key, value)`` and output the value read (gets)."""
    ops: list[Operation] = []
    open_op: dict[int, Operation] = {}
    with open(path) as f:
        lines = f.read().splitlines()
    for t, line in enumerate(lines):
        m = _KV_LINE.fullmatch(line.strip())
        if not m:
            raise ValueError(f"{path}:{t + 1}: not a kv op line: {line!r}")
        process, kind, f_name, key, raw = int(m[1]), m[2], _KV_F[m[3]], m[4], m[5]
        value = "" if raw == "nil" else raw[1:-1]
        if kind == "invoke":
            op = Operation(process, (f_name, key, value), t, UNKNOWN, INF)
            open_op[process] = op
            ops.append(op)
        elif kind == "ok":
            op = open_op.pop(process)
            op.return_time = t
            op.output = value if f_name == GET else None
        else:  # no :info/:fail in the anchor files; keep such an op open
            open_op.pop(process)
    return ops


def kv_step(state: str, inp: tuple, out: Any) -> tuple[bool, str]:
    f_name = inp[0]
    if f_name == GET:
        return (out is UNKNOWN or out == state), state
    if f_name == PUT:
        return True, inp[2]
    return True, state + inp[2]


def kv_effect(inp: tuple, out: Any) -> tuple | None:
    """``kv_step``'s fixed shapes: a get keeps the value it saw, a put sets it; an append asks the step."""
    if inp[0] == GET:
        return (KEEPS,) if out is UNKNOWN else (READS, out)
    return (WRITES, inp[2]) if inp[0] == PUT else None


def partition_by_key(ops: list[Operation]) -> list[list[Operation]]:
    groups: dict[Any, list[Operation]] = {}
    for op in ops:
        groups.setdefault(op.input[1], []).append(op)
    return list(groups.values())


kv_model = Model(
    init=lambda: "",
    step=kv_step,
    partition=partition_by_key,
    describe_operation=lambda i, o: f"{('get', 'put', 'append')[i[0]]}({i[1]!r}, {i[2]!r}) -> {o!r}",
    name="kv-by-key",
    effect=kv_effect,
)


def kv_no_partition_model(ops: list[Operation]) -> Model:
    """The whole map as one state: a tuple of values, one slot per key seen in ``ops``."""
    slot = {k: i for i, k in enumerate(sorted({op.input[1] for op in ops}))}

    def step(state: tuple, inp: tuple, out: Any) -> tuple[bool, tuple]:
        f_name, key, value = inp
        i = slot[key]
        if f_name == GET:
            return (out is UNKNOWN or out == state[i]), state
        new = value if f_name == PUT else state[i] + value
        return True, state[:i] + (new,) + state[i + 1:]

    return Model(init=lambda: ("",) * len(slot), step=step, name="kv-no-partition")
