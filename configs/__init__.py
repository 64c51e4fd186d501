"""Folio's shipped configs: ``default.yaml`` and one YAML file per variant (data, read with
importlib.resources)."""
