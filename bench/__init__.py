"""Folio's benchmarks (``make bench``): measured speed and memory of the installed package.

Not part of the distribution: the wheel holds ``folio.nodes``, ``folio.dataflows`` and
``folio.configs`` only. Run from the repository root, ``python -m bench.bench`` (what ``make bench``
does) measures whatever ``folio`` is installed.
"""
