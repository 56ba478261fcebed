"""Conformance adapters, one module per backend (see ``base.py`` for the protocol).

Each backend object (``chaos.sut.<name>``) says which adapter replays the
vectors against it: ``sut.conform_session(options) -> Session`` whose
``new_adapter()`` gives one adapter per case and whose ``close()`` tears down
what all cases of one ``chaos conform`` run share (a PostgreSQL server).
"""

from __future__ import annotations


def open_session(backend: str, options: dict):
    """The conformance session of backend ``backend`` for ``options``."""
    from chaos import sut

    return sut.get(backend, conforms=True).conform_session(options)
