"""Fixtures shared by every test module.

The PostgreSQL fixtures live here, not imported into each module: a
session-scoped fixture imported into five modules is five fixtures, so each
module started (and kept until the session ended) its own initdb'd server.
Registered once, ``pg_server`` is ONE server per session (per xdist worker),
and ``pg`` restarts it for whichever test a previous one crashed it in."""

from pg_fixtures import backend, pg, pg_server  # noqa: F401
