"""The tool budget: a semantic search that cannot run (no encoder, a broken index) costs nothing."""

from __future__ import annotations

import numpy as np
import pytest

from folio.nodes.backends.book_tools import BookTools, SemanticUnavailable, Session, ToolBudget


class BrokenIndex:
    def descriptors(self) -> tuple[dict, ...]:
        return ({"book_id": "b"},)

    def damaged_books(self) -> tuple[tuple[str, str], ...]:
        return ()

    def book_id_set(self) -> frozenset[str]:
        return frozenset({"b"})

    def semantic(self, vector: object, k: int, ids: object, chapters: object) -> tuple:
        raise RuntimeError("vector index is corrupt")


class BrokenStore:
    titles: tuple[str, ...] = ()
    book_id = "b"
    index = BrokenIndex()


class Encoder:
    def encode_query(self, text: str) -> np.ndarray:
        return np.ones(4, dtype=np.float32)


def test_semantic_search_without_an_encoder_spends_no_budget() -> None:
    budget = ToolBudget(2)
    tools = BookTools({"b": BrokenStore()}, {}, None, budget, Session())
    for _ in range(3):
        with pytest.raises(SemanticUnavailable, match="no encoder"):
            tools.semantic_search("who is ahab")
    assert budget.used == 0 and budget.refused == []


def test_semantic_search_over_a_broken_index_spends_no_budget_and_is_not_retried() -> None:
    budget = ToolBudget(2)
    tools = BookTools({"b": BrokenStore()}, {}, Encoder(), budget, Session())
    with pytest.raises(SemanticUnavailable, match="vector index is corrupt"):
        tools.semantic_search("who is ahab")
    with pytest.raises(SemanticUnavailable, match="vector index is corrupt"):
        tools.semantic_search("who is ahab")
    assert budget.used == 0 and tools.semantic_error == "RuntimeError: vector index is corrupt"


def test_refund_gives_back_one_call_of_that_name_only() -> None:
    budget = ToolBudget(3)
    budget.spend("text_search")
    budget.spend("semantic_search")
    budget.spend("text_search")
    budget.refund("semantic_search")
    budget.refund("chunk.get")  # never spent: nothing changes
    assert budget.calls == ["text_search", "text_search"]
