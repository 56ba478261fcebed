"""Test helpers shipped with the suite (importable from worker processes too).

* ``chaos.testing.synthetic``: synthetic run directories for report tests.
* ``chaos.testing.planted``: backends with planted contract bugs, reachable
  by workers through the ``"python"`` registry entry
  (``{"backend": "python", "factory": "chaos.testing.planted:open_takeover"}``).
"""
