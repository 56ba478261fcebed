"""Fan a campaign's items out over a Dask distributed cluster, results as they complete.

``fan_out(fn, items)`` runs ``fn(item)`` for every item on a cluster and yields
``(item, result)`` in completion order, so a campaign report can grow while
the slow items still run. ``fn`` must be a top-level (importable, picklable)
function of one plain-data item: the workers are separate processes, possibly
on other machines.

- ``scheduler=None``: a ``LocalCluster`` on this machine (worker processes, one
  thread each, every core unless ``workers=N``), listening on loopback only,
  closed when the iterator ends, is closed, or is interrupted (Ctrl-C).
- ``scheduler="tcp://host:port"``: a cluster someone else runs
  (``dask-scheduler`` + ``dask-worker``); it is left running.
- ``shard=(i, n)``: keep only the items whose index is ``i`` mod ``n``
  (0-based ``i``; ``parse_shard`` reads the CLI's 1-based ``i/n``), for CI
  systems that run their own matrix.

An item never disappears: if ``fn`` raises, the item's result is an
``ItemError`` saying why. If its worker dies under it (twice more at most), or
the cluster loses or drops its result (ten times more at most), it is
submitted again (``RESUBMITS``); beyond that it is an ``ItemError`` too, and
so are the items still waiting when the cluster has had no worker for
``NO_WORKER_S``. A remote scheduler adds
its own retries first (``distributed.scheduler.allowed-failures``, 3 by
default).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from chaos.errors import UsageError

CONNECT_TIMEOUT_S = 10.0
CLOSE_TIMEOUT_S = 20.0  # closing the client and the cluster is bounded; _reap ends what outlives it
NO_WORKER_S = 180.0  # a cluster with no worker this long gives its waiting items an ItemError
POLL_S = 0.5
# times an item is run again: after its worker died under it (so an item that kills its worker
# takes down three, not all), and after the cluster lost its result or dropped it (not the item's
# doing: a crasher's dying worker takes the finished results it still held)
RESUBMITS = {"died": 2, "lost": 10}
# a loaded machine answers slowly: at load 28 a client reconnected mid-campaign (the scheduler then
# dropped its every future), most likely after dask's 30 s comm timeouts; be more patient
PATIENT_COMMS = {"distributed.comm.timeouts.connect": "180s", "distributed.comm.timeouts.tcp": "180s"}
REAP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ItemError:
    """The result of an item that produced none: ``fn`` raised, or its worker died."""

    message: str

    def __str__(self) -> str:
        return self.message


def parse_shard(text: str, flag: str = "--shard") -> tuple[int, int]:
    """``"i/n"`` (1-based, 1 <= i <= n) -> the 0-based ``(i - 1, n)`` that ``fan_out`` takes."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not m:
        raise UsageError(f"{flag} {text!r}: expected i/n, e.g. 1/4 (shard i of n, counting from 1)")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= i <= n:
        raise UsageError(f"{flag} {text}: i must be between 1 and n (n >= 1)")
    return i - 1, n


def shard_of(items: Iterable, shard: tuple[int, int] | None) -> list:
    """The items whose index is ``i`` mod ``n`` (all of them when ``shard`` is None)."""
    items = list(items)
    if shard is None:
        return items
    i, n = shard
    if not (isinstance(i, int) and isinstance(n, int) and n >= 1 and 0 <= i < n):
        raise UsageError(f"shard {shard!r}: expected (i, n) with 0 <= i < n")
    return items[i::n]


def check_scheduler_address(address: str) -> None:
    if not re.fullmatch(r"(tcp|tls)://[^\s/:]+:\d{1,5}", address or ""):
        raise UsageError(f"--scheduler {address!r}: expected tcp://host:port")


def fan_out(fn: Callable[[Any], Any], items: Iterable, *, scheduler: str | None = None,
            workers: int | None = None, shard: tuple[int, int] | None = None) -> Iterator[tuple[Any, Any]]:
    """Yield ``(item, fn(item))`` as each completes (``ItemError`` for an item that failed)."""
    chosen = shard_of(items, shard)
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 1):
        raise UsageError(f"--workers {workers!r}: expected a positive integer")
    if scheduler is not None:
        check_scheduler_address(scheduler)
    return _fan_out(fn, chosen, scheduler, workers)


def _fan_out(fn, items: list, scheduler: str | None, workers: int | None):
    if not items:
        return
    with _quiet_dask(), _cluster(scheduler, workers, len(items)) as client:
        from distributed import as_completed

        futures, attempts = {}, [{"died": 0, "lost": 0} for _ in items]
        for index, item in enumerate(items):
            futures[client.submit(fn, item, key=f"item-{index}", pure=False)] = index
        pending = as_completed(futures, loop=client.loop)
        no_worker_since = None
        while not pending.is_empty():
            if not pending.has_ready():
                no_worker_since = None if _worker_count(client) else (no_worker_since or time.monotonic())
                if no_worker_since is not None and time.monotonic() - no_worker_since > NO_WORKER_S:
                    # a worker whose restart failed is never restarted again: with none left the
                    # items would wait forever
                    for index in futures.values():
                        yield items[index], ItemError(f"no cluster worker for {NO_WORKER_S:.0f} s: never ran")
                    return
                time.sleep(POLL_S)
                continue
            for future in pending.next_batch(block=False):
                index = futures.pop(future)
                kind, value = _outcome(future)
                tries = attempts[index]
                if kind in tries:
                    tries[kind] += 1
                    if tries[kind] <= RESUBMITS[kind]:
                        again = client.submit(fn, items[index], pure=False,
                                              key=f"item-{index}-try{sum(tries.values()) + 1}")
                        futures[again] = index
                        pending.add(again)
                        continue
                    value = ItemError(f"{value}, {tries[kind]} times")
                yield items[index], value


def _worker_count(client) -> int:
    try:
        return len(client.scheduler_info().get("workers") or {})
    except Exception:  # the scheduler did not answer this time: not evidence of no workers
        return 1


def _outcome(future) -> tuple[str, Any]:
    """``("done", result or ItemError)``; or ``("died", why)``: its worker died under it; or
    ``("lost", why)``: the cluster lost its result (a dying worker takes the results it still held)
    or dropped it (the client lost its scheduler connection, seen at load 28: every future dropped)."""
    import asyncio

    from distributed import KilledWorker

    died = "the worker running this item died (its process exited or was killed)"
    try:
        if future.status == "finished":
            return "done", future.result()
        error = future.exception() if future.status == "error" else None
    except KilledWorker:  # finished when asked, then lost with its worker and rerun there
        return "died", died
    except (Exception, asyncio.CancelledError):  # the status moved on between the check and the fetch
        error = None
    if isinstance(error, KilledWorker):
        return "died", died
    if error is not None:
        return "done", ItemError(f"{type(error).__name__}: {error}")
    return "lost", f"the cluster gave no result (the item's future is {future.status})"


@contextlib.contextmanager
def _cluster(scheduler: str | None, workers: int | None, item_count: int):
    import dask
    from distributed import Client, LocalCluster

    if scheduler is not None:
        with dask.config.set(PATIENT_COMMS):
            try:
                client = Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
            except (OSError, TimeoutError) as e:
                raise UsageError(f"--scheduler {scheduler}: cannot reach a Dask scheduler ({_one_line(e)})") from None
            try:
                yield client
            finally:
                client.close(timeout=CLOSE_TIMEOUT_S)
        return
    n = workers or os.cpu_count() or 1
    n = min(n, item_count)  # an idle worker is only start-up time
    before = _descendants()
    cluster = client = None
    # allowed-failures 0: dask's own retry (which counts every item on a dying worker, bystanders
    # too) is replaced by fan_out's resubmission; worker-saturation 1.0 and no stealing: a
    # one-thread worker holds one item at a time, so a death touches as few items as it can
    settings = {"distributed.scheduler.allowed-failures": 0, "distributed.scheduler.worker-saturation": 1.0,
                "distributed.scheduler.work-stealing": False, **PATIENT_COMMS}
    try:
        with dask.config.set(settings):
            # the scheduler's health/metrics HTTP server is always on; a free loopback port, not
            # 8787, so two campaigns side by side neither collide nor warn
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None, scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                                   memory_limit=0, silence_logs=logging.CRITICAL)
            client = Client(cluster, set_as_default=False)
            yield client
    finally:
        # what the cluster started, taken before the close so a worker's children are still known
        started = {p for p in _descendants() - before if p.pid != _resource_tracker_pid()}
        for closable in (client, cluster):
            if closable is not None:
                with contextlib.suppress(Exception):
                    closable.close(timeout=CLOSE_TIMEOUT_S)
        _reap(started)


def _descendants() -> set:
    import psutil

    try:
        return set(psutil.Process().children(recursive=True))
    except psutil.Error:
        return set()


def _resource_tracker_pid() -> int | None:
    """The pid of multiprocessing's resource tracker, which the first spawned worker starts but
    which belongs to this process (it ignores SIGTERM and ends when this process does)."""
    from multiprocessing import resource_tracker

    return getattr(getattr(resource_tracker, "_resource_tracker", None), "_pid", None)


def _reap(processes: set) -> None:
    """Terminate, then kill, whatever the cluster started and its close left behind (by pid;
    psutil refuses a pid that was reused since it was listed)."""
    import psutil

    alive = [p for p in processes if p.is_running()]
    if not alive:
        return
    for sig in ("terminate", "kill"):
        for p in alive:
            with contextlib.suppress(psutil.Error):
                getattr(p, sig)()
        _, alive = psutil.wait_procs(alive, timeout=REAP_TIMEOUT_S)
        if not alive:
            return


@contextlib.contextmanager
def _quiet_dask():
    """Dask logs every worker start, death and close; a campaign prints its own rows."""
    loggers = [logging.getLogger(n) for n in ("distributed", "tornado")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return (text[0] if text else type(error).__name__)[:200]
