"""Folio's nodes: one module per stage, each function a node of the Hamilton DAGs."""

import os

# Hamilton's decorators import every installed plugin they know (matplotlib among them, which writes a
# font cache under $HOME); Folio uses none of them, so nothing is written outside the library.
os.environ.setdefault("HAMILTON_AUTOLOAD_EXTENSIONS", "0")
# ONNX Runtime's native library writes a device id and a telemetry database under $HOME/.cache on import
# (the embedder: onnx variant, and usearch's import guard): off, like Hamilton's telemetry.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
