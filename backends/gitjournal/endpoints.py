"""Several Git-journal endpoints behind one ``Backend`` (test scaffolding).

A Git ledger binds exactly one namespace, so a conformance case that
allowlists two namespaces runs as two endpoints (vectors.md §11.12, "Run NS2
cases as two endpoints"). The router sends each request to the endpoint
bound to its ``ledger_namespace`` (found by a lenient peek; the endpoint
then parses strictly), and everything else (capabilities, unknown or
unparseable namespaces) to the first endpoint, whose strict parser gives the
contract's reply. It adds no decision of its own.
"""

from __future__ import annotations

import json

from backends.contract.records import Reply
from backends.gitjournal.projection import merge


class GroupStore:
    def __init__(self, endpoints: list):
        self.endpoints = endpoints
        self.faults: dict[str, bool] = {}

    def seed(self, durable: dict) -> None:
        for e in self.endpoints:
            e.store.seed(durable)

    def export_durable(self) -> dict:
        return merge([e.store.export_durable() for e in self.endpoints])

    def close(self) -> None:
        for e in self.endpoints:
            e.store.close()


class EndpointGroup:
    def __init__(self, endpoints: list):
        self.endpoints = endpoints
        self.config = endpoints[0].config
        self.store = GroupStore(endpoints)

    def _route(self, request) -> object:
        doc = request
        if not isinstance(request, dict):
            try:
                doc = json.loads(bytes(request))
            except (ValueError, UnicodeDecodeError):
                return self.endpoints[0]
        ns = doc.get("ledger_namespace") if isinstance(doc, dict) else None
        for e in self.endpoints:
            if ns is not None and ns in e.config.namespaces:
                return e
        return self.endpoints[0]

    def call(self, op: str, request) -> Reply:
        return self._route(request).call(op, request)

    def restart(self) -> None:
        for e in self.endpoints:
            e.restart()
        self.config = self.endpoints[0].config

    def close(self) -> None:
        for e in self.endpoints:
            e.close()
