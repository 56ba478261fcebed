"""``python -m chaos.testing.launch --factory MOD:FN [chaos run flags]``: a chaos run
against a ``"python"`` registry backend.

``chaos run`` builds the backend spec for ``sqlite`` and ``postgres`` only
(``chaos.runner._backend_spec``). Until it accepts ``--backend python
--factory MOD:FN`` itself, this launcher runs the same command in its own
process with the spec swapped for ``{"backend": "python", "factory": MOD:FN,
"path": <run dir>/claims.db, "namespaces": [...]}`` (so a factory built over
the SQLite store, like ``chaos.testing.planted``, gets the file it expects).
The worker processes receive that spec and load the factory by module path.
Exit codes are ``chaos run``'s; bad flags are one line and exit 254.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import sys

from chaos.errors import ExitCode, UsageError


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{self.prog}: {message}")


def main(argv: list[str] | None = None) -> int:
    from chaos import runner
    from chaos.commands import run as run_cmd

    parser = _Parser(prog="python -m chaos.testing.launch")
    parser.add_argument("--factory", required=True, help='"module:function" of the python backend')
    run_cmd.add_arguments(parser)
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else argv)
        if ":" not in args.factory:
            raise UsageError('--factory must be "module:function"')
        args.backend = "sqlite"                   # validated and laid out like sqlite ...
        cfg = run_cmd.build_config(args)
    except UsageError as e:
        print(f"chaos: error: {e}", file=sys.stderr)
        return int(ExitCode.USAGE)
    words = shlex.split(cfg.command)[2:]          # drop "chaos run"
    words[words.index("--backend") + 1] = "python"
    command = shlex.join(["python", "-m", "chaos.testing.launch", "--factory", args.factory, *words])
    cfg = dataclasses.replace(cfg, backend="python", command=command)   # ... but run as "python"
    original = runner._backend_spec

    def spec(c, run, namespaces):
        if c.backend == "python":
            return {"backend": "python", "factory": args.factory, "path": run.file("claims.db"),
                    "namespaces": list(namespaces)}, None
        return original(c, run, namespaces)

    runner._backend_spec = spec
    print(f"chaos: {command}", file=sys.stderr)
    return runner.run(cfg)


if __name__ == "__main__":
    sys.exit(main())
