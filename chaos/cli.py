"""The ``chaos`` command line. Subcommands are data: a name -> module map.

Each module in ``chaos.commands`` defines ``add_arguments(parser)`` and
``run(args) -> int``. This is the one place that turns an exception into an
exit code (design.md):

* bad input -- ``UsageError`` (arguments, config), ``SetupFailed`` (the system
  the input names could not be set up: a DSN that does not answer, a command
  that does not speak the contract), ``safeload.LoadError`` (a file over its
  limits or not YAML/JSON) -- is ONE line on stderr (newlines folded, length
  bounded) and exit 254;
* anything else is a bug in the suite: the traceback on stderr and exit 255.
  Nothing else is caught, so a real bug is never disguised as bad input.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from backends.safeload import LoadError
from chaos.errors import ExitCode, SetupFailed, UsageError

#: the exceptions that mean "the input is bad" (exit 254, one line)
INPUT_ERRORS = (UsageError, SetupFailed, LoadError)
#: longest error line printed (a message quoting a huge input must not flood the terminal)
MAX_ERROR_CHARS = 600

EXIT_CODES = """exit codes:
  0    valid: the checkers found the backend kept the contract
  1    invalid: a violation was found (see the report)
  2    unknown: the run could not decide (a fault never took effect, a check could not run)
  130  interrupted (Ctrl-C / SIGTERM)
  254  bad arguments, config or input: one line on stderr
  255  the suite itself crashed: a traceback on stderr (please report it)"""

COMMANDS = {
    "run": ("chaos.commands.run", "run a workload against a backend under faults and check it"),
    "check": ("chaos.commands.check", "re-check a stored run directory"),
    "shrink": ("chaos.commands.shrink", "shrink a failing run to the fewest faults, workers and time that still fail"),
    "explore": ("chaos.commands.explore", "search interleavings (PCT seeds) and crash points of a backend on purpose"),
    "repro": ("chaos.commands.repro", "write a deterministic run's finding as a standalone script (repro.sh)"),
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


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``only``, the arguments of that one command
    (the others are listed by name, their modules not imported): a per-call
    contract CLI (``chaos backend ...``, one process per operation) then pays
    only for the modules it runs."""
    parser = _Parser(prog="chaos", description="claim-chaos: fault injection and linearizability checks for the work-claim contract",
                     epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=EXIT_CODES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)  # a module's own EXIT_CODES wins
        p.set_defaults(_module=module)
        if only is not None and name != only:
            continue
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            p.set_defaults(_missing=True)
            continue
        p.epilog = getattr(mod, "EXIT_CODES", EXIT_CODES)
        mod.add_arguments(p)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
        args = parser.parse_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return int(ExitCode.USAGE)
        if getattr(args, "_missing", False):
            raise UsageError(f"chaos {args.command}: not available in this build")
        mod = importlib.import_module(args._module)
        return int(mod.run(args))
    except INPUT_ERRORS as e:
        print(f"chaos: error: {one_line(str(e))}", file=sys.stderr)
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


def one_line(message: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``message`` on one line: line breaks folded to " | ", at most ``limit`` characters."""
    text = " | ".join(part.strip() for part in str(message).splitlines() if part.strip()) or "(no message)"
    if len(text) > limit:
        text = f"{text[:limit]}... ({len(text) - limit} more characters)"
    return text


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
