"""``chaos conform``: replay the conformance vectors against a real backend.

    chaos conform --backend sqlite [--vectors DIR] [--case NAME ...] [--json]
    chaos conform --backend python --factory MODULE:FUNCTION [...]
    chaos conform --protocol issue-lock --backend {sqlite,gitfile,external,python} [...]

``--protocol issue-lock`` replays the issue-lock vectors (``vectors/issue-lock``
of this project, written from ../shared/spec/issue-lock-contract.md) through
``chaos.issuelock.conform``; the default protocol is work-claim.

``--backend python`` replays the vectors against an outside Python backend
class (registry signature ``open_backend(spec, clock, hooks)``) built over the
SQLite store it is given (``chaos.conform.adapters.python``).

Prints one row per case (status pass / fail / error / not-applicable /
profile-substituted, and time) and, for each failing case, the mismatches
with their JSON paths; an ``error`` case failed at set-up or export, so
nothing was compared. ``--json`` prints one object instead. Exit 0 only when
every applicable case passes; 1 when a comparison failed; 2 when nothing was
compared (no applicable case, or every one an error) or some case is an
error; a bad manifest or argument is one line on stderr and exit 254.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from chaos.conform.suite import Report, run_conformance
from chaos.errors import UsageError

VECTORS_REL = Path("..") / "shared" / "vectors" / "work-claims"

EXIT_CODES = """exit codes:
  0    every applicable case passed
  1    at least one case failed (its mismatches are printed)
  254  bad arguments, a bad manifest or profile, or a backend that cannot be set up: one line on stderr
  255  the suite itself crashed: a traceback on stderr (please report it)"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from chaos import sut

    parser.add_argument("--backend", required=True, choices=sut.names(conforms=True),
                        help="backend to replay the vectors against")
    parser.add_argument("--protocol", choices=("work-claim", "issue-lock"), default="work-claim",
                        help="which contract's vectors (default work-claim)")
    parser.add_argument("--vectors", type=Path, default=None,
                        help="vectors directory (default: ../shared/vectors/work-claims, else $CHAOS_VECTORS)")
    parser.add_argument("--case", action="append", default=None, metavar="NAME",
                        help="run only this case (repeatable)")
    parser.add_argument("--json", action="store_true", help="print a JSON report instead of the table")
    parser.add_argument("--command", dest="external_command", default=None, help="external backend: the contract CLI command line")
    parser.add_argument("--profile", type=Path, default=None, help="external backend: adapter profile file")
    parser.add_argument("--factory", default=None, metavar="MODULE:FUNCTION",
                        help="python backend: the factory opening your backend over the SQLite file it is given "
                             "(e.g. backends.sqlite:open_backend)")


def default_vectors() -> Path:
    """``../shared/vectors/work-claims`` from the current directory, else from
    the repository root, else ``$CHAOS_VECTORS``."""
    here = Path.cwd() / VECTORS_REL
    if here.is_dir():
        return here
    repo = Path(__file__).resolve().parents[2] / VECTORS_REL
    if repo.is_dir():
        return repo
    env = os.environ.get("CHAOS_VECTORS")
    if env:
        return Path(env)
    raise UsageError("no vectors directory found (tried ../shared/vectors/work-claims; set --vectors or CHAOS_VECTORS)")


def run(args: argparse.Namespace) -> int:
    from chaos import sut

    if args.protocol == "issue-lock":
        return _run_issue_lock(args)

    if args.factory is not None and args.backend != "python":
        raise UsageError("--factory is only for --backend python")
    if args.backend == "python":
        from chaos.conform.adapters.python import check_factory

        check_factory(args.factory)
    sut.get(args.backend, conforms=True).check({"command": args.external_command, "factory": args.factory,
                                                "profile": str(args.profile) if args.profile else None})
    vectors = args.vectors if args.vectors is not None else default_vectors()
    options = {"command": args.external_command, "profile": str(args.profile) if args.profile else None,
               "factory": args.factory}
    printer = None if args.json else _print_row

    def header(_cases) -> None:  # only once every manifest loaded cleanly
        if not args.json:
            print(f"chaos conform --backend {args.backend}  vectors: {vectors}")
            print(f"{'case':<36} {'status':<20} {'time':>8}")

    report = run_conformance(args.backend, vectors, args.case, options, on_result=printer, on_loaded=header)
    return _finish(args, report)


def _run_issue_lock(args: argparse.Namespace) -> int:
    from chaos.issuelock.conform import VECTORS_DIR, run_issue_lock_conformance

    if args.factory is not None and args.backend != "python":
        raise UsageError("--factory is only for --backend python")
    options = {"command": args.external_command, "profile": str(args.profile) if args.profile else None,
               "factory": args.factory}
    vectors = args.vectors if args.vectors is not None else VECTORS_DIR

    def header(_cases) -> None:
        if not args.json:
            print(f"chaos conform --protocol issue-lock --backend {args.backend}  vectors: {vectors}")
            print(f"{'case':<52} {'status':<8} {'time':>8}")

    def row(result) -> None:
        print(f"{result.case:<52} {result.status:<8} {result.seconds:>7.2f}s", flush=True)

    report = run_issue_lock_conformance(args.backend, vectors, args.case, options,
                                        on_result=None if args.json else row, on_loaded=header)
    return _finish(args, report)


def _finish(args: argparse.Namespace, report: Report) -> int:
    if args.json:
        json.dump(report.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_summary(report)
    return report.exit_code


def _print_row(result) -> None:
    print(f"{result.case:<36} {result.status:<20} {result.seconds:>7.2f}s", flush=True)
    if result.status == "not-applicable":
        for note in result.notes[:1]:
            print(f"    not applicable: {note}")


def _print_summary(report: Report) -> None:
    for r in report.results:
        if r.status != "fail":
            continue
        print(f"\n--- {r.case}: {len(r.diff)} mismatch(es)")
        for line in r.diff:
            print(f"    {line}")
        for note in r.notes:
            if "harness failure" in note:
                print(f"    note: {note}")
    for r in report.results:
        if r.status == "error":
            print(f"\n--- {r.case}: error (nothing compared): {r.notes[0] if r.notes else ''}")
    print(f"\n{report.count('pass')} passed, {report.count('fail')} failed, {report.count('error')} errors, "
          f"{report.count('not-applicable')} not applicable, "
          f"{report.count('profile-substituted')} profile-substituted")
    if report.vacuous:
        print(f"chaos conform: {report.vacuous} (exit 2)")
