"""Reader: turn evidence (book chunks, article paragraphs) into a short passage a person can read.

CONTRACT (stub, to be replaced by the full reader): the two public helpers below are what the book
answer (``nodes/answering.py``) and the Kiwix answer (``nodes/kiwix_fusion.py``) call.

- ``relevance(question, texts, encoder=None)``: one score per text, higher is better, in [0, 1]:
  by meaning (cosine with the question, when an encoder is given), by the question's words and by its
  kind (who / when / where / why / how / what-is).
- ``passage(texts, scores, max_words)``: the indices (ascending, i.e. in reading order) of the texts —
  consecutive sentences of one source — that make the best passage: the best-scoring one with the
  neighbours it needs to read on its own, at most ``max_words`` words in all (the best one alone may
  exceed it when it is longer).

Config keys: none here (callers pass ``answer_max_words``).
Limitations: stub — words only, no neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from folio.nodes.text import coverage, stems


def relevance(question: str, texts: Sequence[str], encoder: Any = None) -> tuple[float, ...]:
    """One relevance score in [0, 1] per text (stub: the share of the question's content words)."""
    terms = stems(question)
    return tuple(coverage(terms, t) for t in texts)


def passage(texts: Sequence[str], scores: Sequence[float], max_words: int = 60) -> tuple[int, ...]:
    """Indices, ascending, of the passage around the best-scoring text (stub: the best text alone)."""
    if not texts:
        return ()
    best = max(range(len(texts)), key=lambda i: (scores[i], -i))
    return (best,)
