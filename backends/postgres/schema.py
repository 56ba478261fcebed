"""The SQL schema of the PostgreSQL store, kept in its own schema.

Every table lives in one PostgreSQL schema the store owns (``claimchaos_*`` by
default), so a user-given DSN is safe: nothing outside that schema is read,
written or dropped. ``provisioning`` marks the schema as ours (key ``marker``) and holds the
backend configuration (key ``config``), which is what
``drop_created`` checks before dropping anything.

Types (vectors.md §11.1): epochs are ``NUMERIC(20,0)`` (uint64 does not fit
``bigint``), instants and floors are ``BIGINT`` milliseconds, ledger bytes are
``bytea``, a stored envelope is the exact JSON text first returned (``text``,
not ``jsonb``, so member order and number forms are kept), and outcomes carry
a commit sequence so export can list them in commit order.
"""

from __future__ import annotations

import re
import secrets

SCHEMA_RE = re.compile(r"[a-z_][a-z0-9_]{0,62}")
MARKER = "claim-chaos postgres store v1"


def valid_schema_name(name: str) -> bool:
    return isinstance(name, str) and SCHEMA_RE.fullmatch(name) is not None


def random_schema_name() -> str:
    return "claimchaos_" + secrets.token_hex(6)


# Executed with search_path set to the store's schema.
TABLES = [
    """CREATE TABLE IF NOT EXISTS provisioning (
        key   text PRIMARY KEY,
        value text NOT NULL)""",
    # One row per provisioned namespace: the lock row every decision in that
    # namespace takes FOR UPDATE (the floor is per namespace, so every
    # decision in a namespace must serialize anyway).
    """CREATE TABLE IF NOT EXISTS namespaces (
        ns text PRIMARY KEY)""",
    # Only namespaces whose floor was really written or seeded have a row.
    """CREATE TABLE IF NOT EXISTS floors (
        ns text PRIMARY KEY REFERENCES namespaces(ns),
        ms bigint NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS claims (
        ns         text NOT NULL REFERENCES namespaces(ns),
        item_id    text NOT NULL,
        last_epoch numeric(20,0) NOT NULL CHECK (last_epoch >= 0 AND last_epoch <= 18446744073709551615),
        owner_id   text,
        epoch      numeric(20,0),
        issued_at  bigint,
        expires_at bigint,
        PRIMARY KEY (ns, item_id),
        CHECK ((owner_id IS NULL) = (epoch IS NULL)
               AND (epoch IS NULL) = (issued_at IS NULL)
               AND (epoch IS NULL) = (expires_at IS NULL)),
        CHECK (epoch IS NULL OR epoch = last_epoch))""",
    """CREATE TABLE IF NOT EXISTS ledgers (
        ns       text NOT NULL REFERENCES namespaces(ns),
        item_id  text NOT NULL,
        data     bytea NOT NULL,
        revision text NOT NULL,
        PRIMARY KEY (ns, item_id))""",
    """CREATE TABLE IF NOT EXISTS outcomes (
        seq          bigserial UNIQUE,
        operation_id text NOT NULL,
        ns           text NOT NULL REFERENCES namespaces(ns),
        item_id      text NOT NULL,
        digest       text NOT NULL,
        exit         integer NOT NULL,
        envelope     text NOT NULL,
        request      text,
        PRIMARY KEY (operation_id, ns, item_id))""",
]
