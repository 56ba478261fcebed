"""The checks that need a raw reply or request, made once while the history is
read (``checkers.history`` calls them, so they import nothing of it): the
envelope shape (``envelopes``) and what a publication accepted that it had to
refuse (``requests``). The invariants of the same names report their findings.
"""
