"""Reports: a run directory turned into tables (txt, md, csv, json, latex), text charts and comparisons.

The figures come from :mod:`specbench_tui.core.analysis`; this package reads run directories
(:mod:`.load`), lays out tables (:mod:`.tables`, :mod:`.formats`), draws text charts (:mod:`.charts`) and
compares two runs (:mod:`.compare`). ``specbench report`` and ``specbench compare`` live in :mod:`.cli`.
"""
