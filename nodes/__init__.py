"""Folio's nodes: one module per stage, each function a node of the Hamilton DAGs."""

import os

# Hamilton's decorators import every installed plugin they know (matplotlib among them, which writes a
# font cache under $HOME); Folio uses none of them, so nothing is written outside the library.
os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")
