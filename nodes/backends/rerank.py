"""Rerankers of the ask graph's ``ranked_hits`` stage: a sentence-transformers cross-encoder, or one
bounded LLM call that orders the top passages by id.

- ``cross_encoder_scores(model, query, texts)``: the ``CrossEncoder`` named by ``model`` (a local path
  or a Hugging Face cache name, loaded offline once per process) scores each (query, text) pair.
- ``llm_order(client, query, texts)``: one chat call with the numbered passages; the reply is JSON
  ``{"order": [ids]}``, validated by ``valid_order`` (known ids, no repeats; the ids it leaves out keep
  their incoming order after the ones it names). ``RerankError`` when the reply is not that.
- ``reranked(found, order, depth, what)``: a clause's hits with the first ``depth`` in ``order``'s order
  (``cross_encoder_order(model)`` or ``llm_order``), as ``book_flow``'s ``ranked_hits`` stage uses it.

Either raises ``RerankError`` (one line: what failed) when it cannot run; the caller keeps the incoming
order with a note. Limitations: the cross-encoder runs on the CPU in this process (about 5-30 ms a
passage for a MiniLM-L6 model on 2 cores); the LLM sees each passage cut to ``LLM_PASSAGE_CHARS``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from folio.nodes.core.types import BookHits, FolioError

LLM_PASSAGE_CHARS = 400  # each passage as the LLM reranker sees it
LLM_ORDER_TOKENS = 96  # the reply's bound: a JSON list of at most ~20 small ids
ORDER_SCHEMA: dict[str, Any] = {
    "title": "order",
    "type": "object",
    "properties": {"order": {"type": "array", "items": {"type": "integer"}, "maxItems": 50}},
    "required": ["order"],
}

_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


class RerankError(FolioError):
    """A rerank stage that cannot run (no model, a model that does not load, an invalid reply)."""


def cross_encoder(model: str | None) -> Any:
    """The ``CrossEncoder`` at ``model`` (local path or HF cache name), loaded offline once per process."""
    if not model:
        raise RerankError(
            "rerank", "rerank: cross_encoder needs rerank_model (a local path or HF cache name)"
        )
    with _LOCK:
        if model not in _MODELS:
            try:
                from sentence_transformers import CrossEncoder

                _MODELS[model] = CrossEncoder(model, device="cpu", local_files_only=True)
            except Exception as exc:  # a missing or broken model: the stage falls back
                _MODELS[model] = RerankError(
                    model, f"cross-encoder did not load ({type(exc).__name__}: {exc})"
                )
        value = _MODELS[model]
    if isinstance(value, RerankError):
        raise value
    return value


def cross_encoder_scores(model: str | None, query: str, texts: Sequence[str]) -> list[float]:
    """The cross-encoder's relevance score of each text for ``query`` (higher is better)."""
    encoder = cross_encoder(model)
    if not texts:
        return []
    try:
        scores = encoder.predict([(query, t) for t in texts], show_progress_bar=False)
    except Exception as exc:
        raise RerankError(str(model), f"cross-encoder failed ({type(exc).__name__}: {exc})") from None
    return [float(s) for s in list(scores)]


def order_messages(query: str, texts: Sequence[str]) -> list[dict[str, str]]:
    """The LLM reranker's prompt: the question and the numbered passages, asking for ids only."""
    numbered = "\n\n".join(f"[{i}] {' '.join(t.split())[:LLM_PASSAGE_CHARS]}" for i, t in enumerate(texts, 1))
    return [
        {
            "role": "system",
            "content": "Order the numbered passages by how directly each answers the question, best "
            'first. Reply with JSON only: {"order": [passage numbers]}.',
        },
        {"role": "user", "content": f"Question: {query}\n\nPassages:\n{numbered}"},
    ]


def valid_order(reply: Any, n: int) -> list[int]:
    """The 0-based order of ``n`` passages from an LLM reply ``{"order": [1-based ids]}``: the ids it
    names first (repeats dropped), then the rest in their incoming order; ``RerankError`` when the reply
    names no valid id or holds an id outside 1..n."""
    order = reply.get("order") if isinstance(reply, dict) else None
    if not isinstance(order, list) or not order:
        raise RerankError("LLM rerank", f"reply is not {{'order': [ids]}}: {str(reply)[:80]!r}")
    named: list[int] = []
    for item in order:
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item <= n:
            raise RerankError("LLM rerank", f"id {item!r} is not a passage number 1-{n}")
        if item - 1 not in named:
            named.append(item - 1)
    return named + [i for i in range(n) if i not in named]


def llm_order(client: Any, query: str, texts: Sequence[str]) -> list[int]:
    """The 0-based order of ``texts`` by one bounded LLM call (see ``valid_order``)."""
    from folio.nodes.backends.llm import LLMError

    try:
        reply = client.chat_json(order_messages(query, texts), ORDER_SCHEMA, max_tokens=LLM_ORDER_TOKENS)
    except LLMError as exc:
        raise RerankError("LLM rerank", f"call failed ({exc.reason})") from None
    return valid_order(reply, len(texts))


def reranked(
    found: BookHits, order: Callable[[str, list[str]], list[int]], depth: int, what: str
) -> BookHits:
    """``found`` with its first ``depth`` hits in the order ``order(question, texts)`` gives (0-based
    indexes); the incoming order and a note when the stage cannot run."""
    top = list(found.hits[: max(1, depth)])
    if len(top) < 2:
        return found
    try:
        ranks = order(found.question, [h.text for h in top])
    except RerankError as exc:
        return replace(found, notes=(*found.notes, f"{what} rerank unavailable ({exc}): search order kept"))
    reordered = tuple(top[i] for i in ranks)
    return replace(found, hits=(*reordered, *found.hits[len(top) :]))


def cross_encoder_order(model: str | None) -> Callable[[str, list[str]], list[int]]:
    """``order(question, texts)``: the indexes of ``texts`` by ``cross_encoder_scores``, best first."""

    def order(question: str, texts: list[str]) -> list[int]:
        scores = cross_encoder_scores(model, question, texts)
        return sorted(range(len(texts)), key=lambda i: (-scores[i], i))

    return order
