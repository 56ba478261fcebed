"""The ``chaos`` command line. Subcommands are data: a name -> module map.

Each module in ``chaos.commands`` defines ``add_arguments(parser)`` and
``run(args) -> int``. The CLI turns a ``UsageError`` into one line on stderr
and exit 254, and any other exception into exit 255 with the traceback on
stderr (the suite itself crashed).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from chaos.errors import ExitCode, UsageError

COMMANDS = {
    "run": ("chaos.commands.run", "run a workload against a backend under faults and check it"),
    "check": ("chaos.commands.check", "re-check a stored run directory"),
    "shrink": ("chaos.commands.shrink", "shrink a failing run to the fewest faults, workers and time that still fail"),
    "conform": ("chaos.commands.conform", "replay the conformance vectors against a real backend"),
    "backend": ("chaos.commands.backend", "a backend's contract CLI (provision, claim ..., publish-claimed)"),
    "lock-backend": ("chaos.commands.lock_backend", "an issue-lock store's CLI (bootstrap, heartbeat, ..., recover)"),
    "doctor": ("chaos.commands.doctor", "say which fault mechanisms work on this machine"),
    "test-all": ("chaos.commands.test_all", "run a matrix of backends x workloads x nemeses x seeds"),
    "serve": ("chaos.commands.serve", "browse stored runs on loopback"),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse exits 2 by default; the suite's usage code is 254
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="chaos", description="claim-chaos: fault injection and linearizability checks for the work-claim contract")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            p.set_defaults(_missing=True)
            continue
        mod.add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return int(ExitCode.USAGE)
        if getattr(args, "_missing", False):
            raise UsageError(f"chaos {args.command}: not available in this build")
        mod = importlib.import_module(args._module)
        return int(mod.run(args))
    except UsageError as e:
        print(f"chaos: error: {e}", file=sys.stderr)
        return int(ExitCode.USAGE)
    except KeyboardInterrupt:
        print("chaos: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception:  # the suite itself crashed: say so loudly, exit 255
        import traceback

        traceback.print_exc()
        return int(ExitCode.CRASH)


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
