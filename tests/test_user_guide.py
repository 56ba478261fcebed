"""The user guide's command blocks print what the commands print (issue #30, item 8).

A code block of docs/user-guide.md whose first command is one of ``CHECKED``
is run here, command by command (``$ echo $?`` prints the previous exit
code), and must match the guide: exactly, but for ``chaos doctor``, whose
mechanism paths and MISSING rows depend on the machine (there each row is
compared by its name, in order). ``python tests/test_user_guide.py``
rewrites those blocks from this machine's real output.

The guide's ``chaos run`` blocks cannot be replayed (timings, op counts),
but their shape is checked: the verdict is the summary's last line.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "user-guide.md"
#: a block whose first command starts so is replayed
CHECKED = ("chaos --help", "chaos doctor", "cat bad.yaml")
#: the only commands a replayed block may hold
ALLOWED = ("chaos --help", "chaos doctor", "cat bad.yaml", "chaos test-all --matrix bad.yaml", "echo $?")
BLOCK = re.compile(r"^```\n(\$ .*?)\n```$", re.M | re.S)
VERDICT_LINE = re.compile(r"^chaos: (VALID|INVALID|UNKNOWN) -- ")


def _commands(body: str) -> list[tuple[str, list[str]]]:
    """``[(command, output lines)]`` of one block (``\\``-continued commands joined)."""
    out: list[tuple[str, list[str]]] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        cmd = lines[i][2:]
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            cmd = cmd[:-1] + " " + lines[i].strip()
        i += 1
        output = []
        while i < len(lines) and not lines[i].startswith("$ "):
            output.append(lines[i])
            i += 1
        out.append((cmd, output))
    return out


def _replayed_blocks(text: str) -> list[tuple[re.Match, list]]:
    return [(m, cmds) for m in BLOCK.finditer(text) if (cmds := _commands(m.group(1)))
            and cmds[0][0].startswith(CHECKED)]


def _run(cmds: list, cwd: Path) -> list[tuple[str, list[str]]]:
    """Run the block's commands in ``cwd``; each with its real output."""
    env = dict(os.environ, COLUMNS="80", PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    rc, out = 0, []
    for cmd, shown in cmds:
        assert cmd.startswith(ALLOWED), f"{cmd!r}: a replayed block holds only {ALLOWED}"
        if cmd == "echo $?":
            out.append((cmd, [str(rc)]))
            continue
        if cmd == "cat bad.yaml":
            (cwd / "bad.yaml").write_text("\n".join(shown) + "\n")   # the guide's own file
        p = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=120)
        rc = p.returncode
        out.append((cmd, p.stdout.rstrip("\n").splitlines()))
    return out


def _doctor_rows(lines: list[str]) -> list[str]:
    """``chaos doctor``'s rows by name: what they say depends on the machine."""
    rows = []
    for ln in lines:
        if ln.strip().startswith("->"):     # how to get a missing mechanism
            continue
        m = re.match(r"^(\s*)(?:ok     |MISSING) ([^:]+?)(?: \([^)]*\))?:", ln) or re.match(r"^(\s+)([\w-]+):", ln)
        rows.append(f"{m.group(1)}{m.group(2)}" if m else ln)
    return rows


def _same(cmd: str, shown: list[str], real: list[str]) -> tuple[list, list]:
    if cmd == "chaos doctor":
        return _doctor_rows(shown), _doctor_rows(real)
    return shown, real


def test_the_guides_command_blocks_print_what_the_commands_print(tmp_path):
    blocks = _replayed_blocks(GUIDE.read_text())
    assert {cmds[0][0].split(" --")[0] if cmds[0][0] != "chaos --help" else "chaos --help"
            for _, cmds in blocks} >= {"chaos --help", "chaos doctor", "cat bad.yaml"}
    for _, cmds in blocks:
        for (cmd, shown), (_, real) in zip(cmds, _run(cmds, tmp_path)):
            want, got = _same(cmd, shown, real)
            assert want == got, (f"docs/user-guide.md block '$ {cmd}' is stale: run `python tests/test_user_guide.py`"
                                 f" to regenerate it\n--- guide\n" + "\n".join(want) + "\n--- real\n" + "\n".join(got))


def test_every_chaos_run_block_ends_with_the_verdict():
    """The console summary's last line is the verdict (chaos.reports.console): the guide shows it so."""
    runs = [(cmd, shown) for m in BLOCK.finditer(GUIDE.read_text()) for cmd, shown in _commands(m.group(1))
            if cmd.startswith("chaos run ") and shown and shown[-1] != "..."]
    assert runs
    for cmd, shown in runs:
        assert VERDICT_LINE.match(shown[-1]), (cmd, shown[-3:])


def regenerate() -> None:
    """Rewrite every replayed block of the guide from this machine's output."""
    import tempfile

    text = GUIDE.read_text()
    with tempfile.TemporaryDirectory() as d:
        for m, cmds in reversed(_replayed_blocks(text)):
            body = "\n".join(f"$ {cmd}\n" + "\n".join(real) if real else f"$ {cmd}"
                             for cmd, real in _run(cmds, Path(d)))
            text = text[:m.start(1)] + body + text[m.end(1):]
    GUIDE.write_text(text)


if __name__ == "__main__":
    regenerate()
