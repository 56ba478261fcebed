"""The suite's one source of randomness, seeded by the test.

The implementation lives in ``workloads.random`` so that workloads (pure
generators) can use it without importing ``chaos`` (imports point
``chaos -> workloads``); this module is the name the engine uses.
"""

from workloads.random import Rng, Stream, fresh_seed

__all__ = ["Rng", "Stream", "fresh_seed"]
