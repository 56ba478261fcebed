"""``chaos conform``: replay the conformance vectors against a real backend.

* ``manifest``  strict loader of the 18 manifests (vectors.md §2, §3, §10)
* ``runner``    sequences actions (§5-§7), keeps the runner's bookkeeping
                (faults, preflights, configuration), builds the transcript
* ``compare``   the §11.12 normalisations and type-strict structural equality
* ``diff``      a readable diff naming the JSON path of each mismatch
* ``adapters``  one module per backend (``chaos.conform.adapters.<backend>``)
"""
