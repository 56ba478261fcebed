"""Real fault mechanisms, each usable on its own (fault-tooling notes):

* ``procs``: registry of PIDs we started, ``ProcessTree`` kill/pause/resume,
  cgroup v1 ``Freezer``, ``set_child_subreaper``;
* ``failsync``: the fsync/fdatasync/syncfs EIO shim (``FsyncFault``);
* ``faketime``: per-process wall-clock skew with PyPI libfaketime (``ClockFault``);
* ``proxy``: TCP fault proxy on 127.0.0.1 (``FaultProxy``: drop replies, blackhole, delay, reset);
* ``pgserver``: our own PostgreSQL launcher (``PgServer``).
"""
