"""A black-box program with threads, for tests/test_deterministic_programs.py: the suite's SQLite
contract CLI (``chaos backend sqlite ARGS``), each call served by a second thread while the first joins
it, so a call's every store point is made by a thread the program started itself."""

import sys
import threading

from chaos.cli import main

exit_code = {}


def serve() -> None:
    try:
        exit_code["rc"] = main(["backend", "sqlite", *sys.argv[1:]])
    except SystemExit as e:
        exit_code["rc"] = e.code


worker = threading.Thread(target=serve)
worker.start()
worker.join()
sys.exit(exit_code.get("rc") or 0)
