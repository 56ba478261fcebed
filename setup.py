"""Build the compiled core of the linearizability search (the rest is in pyproject.toml).

``checkers/linearizable/_search.c`` is a CPython extension with no dependency
beyond the Python headers and a C compiler; ``pip install -e .`` builds it.
``checkers/linearizable/checker.py`` keeps the pure-Python reference of the
same search, and the tests diff the two.
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("checkers.linearizable._search", ["checkers/linearizable/_search.c"],
                             extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                                 "-Wno-missing-field-initializers"])])
