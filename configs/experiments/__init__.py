"""Experiment files shipped with Folio (data)."""
