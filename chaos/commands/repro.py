"""``chaos repro RUN [--finding ID]``: a deterministic run's finding as a standalone script
(``chaos.explore.repro``): RUN/repro/<finding>/repro.sh + README.md, kept only when it shows the
finding on three runs out of three. Exit 0 when written, 1 when no standalone script could be
made (the one line says why), 254 on bad input."""

from __future__ import annotations

import argparse
import os
import sys

from chaos.errors import UsageError, sigterm_as_ctrl_c


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="a stored deterministic run whose verdict is invalid")
    p.add_argument("--finding", default=None, help="CHECKER-ANOMALY, or a known deviation's id (F5-...) of a "
                   "black-box program (default: the first in shrink's preference order)")


def run(args: argparse.Namespace) -> int:
    with sigterm_as_ctrl_c():   # a stopped search leaves no store, stopped call or built shim behind
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from chaos.explore.repro import NotReproducible, write

    if not os.path.isfile(os.path.join(args.run_dir, "test.yaml")) or \
            not os.path.isfile(os.path.join(args.run_dir, "results.json")):
        raise UsageError(f"{args.run_dir}: not a run directory (no test.yaml / results.json)")
    try:
        if _backend(args.run_dir) == "external":   # a black-box program: plain program calls
            from chaos.explore import blackbox

            out = blackbox.write(os.path.abspath(args.run_dir), args.finding,
                                 log=lambda line: print(line, file=sys.stderr, flush=True))
        else:
            out = write(os.path.abspath(args.run_dir), args.finding)
    except NotReproducible as e:
        print(f"chaos repro: no standalone script: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        raise UsageError(str(e)) from None
    if os.path.isfile(os.path.join(args.run_dir, "report.html")):   # the run's page links its scripts
        from chaos.reports import load_run, write_html

        write_html(load_run(os.path.abspath(args.run_dir)))
    how = [f"{out['stopped_inside']} stopped inside" if out.get("stopped_inside") else "",
           f"from the state after the run's first {out['seeded_after']} calls" if out.get("seeded_after") else ""]
    how = "; ".join(h for h in how if h)
    print(f"chaos repro: {out['finding']}: {out['calls']} calls{f' ({how})' if how else ''}, shown on {out['shown']} of 3 runs")
    print(f"chaos repro: {os.path.join(out['dir'], 'repro.sh')} (README.md beside it)")
    return 0


def _backend(run_dir: str) -> str | None:
    from chaos.shrink import load_run

    return load_run(run_dir)[0].get("backend")
