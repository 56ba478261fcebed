"""The harness side of the issue-lock protocol: stores as systems under test
(``targets``), the run integration (``run``: universe, final reads, checkers)
and the vector replay (``conform``). The protocol itself lives in
``backends.issuelock``; its workload in ``workloads.issuelock``; its checkers
in ``checkers.issuelock``."""
