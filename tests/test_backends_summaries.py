"""Map-reduce summaries (``nodes.backends.summaries``): sections, headings, prompts, reply cleaning and the
LLM summariser's bounded calls, with a fake chat client that records every request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from folio.nodes.backends.llm import LLMError
from folio.nodes.backends.summaries import (
    MAX_SECTIONS,
    SECTION_CHARS,
    LLMSummarizer,
    assemble,
    clean_reply,
    fitted,
    reduce_messages,
    section_heading,
    section_messages,
    section_ranges,
)


@dataclass
class Reply:
    content: str


@dataclass
class FakeClient:
    """A chat client answering "Summary n." to every request, recording the requests."""

    model: str = "fake-model"
    requests: list[dict[str, Any]] = field(default_factory=list)
    fail_at: int | None = None

    def chat(self, messages: list, max_tokens: int | None = None, deadline: Any = None) -> Reply:
        self.requests.append({"messages": messages, "max_tokens": max_tokens, "deadline": deadline})
        if self.fail_at is not None and len(self.requests) == self.fail_at:
            raise LLMError("fake", "timed out")
        return Reply(f"Summary {len(self.requests)}.")


def chunk(i: int) -> str:
    return (
        f"Alice met creature number {i} in the garden. The creature number {i} spoke to Alice about tea. "
        f"Alice answered the creature politely and went on. It was a long day in the garden for everyone."
    )


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, ()),
        (1, ((0, 1),)),
        (4, ((0, 4),)),
        (5, ((0, 3), (3, 5))),
        (9, ((0, 3), (3, 6), (6, 9))),
        (16, ((0, 4), (4, 8), (8, 12), (12, 16))),
        (30, ((0, 8), (8, 16), (16, 23), (23, 30))),
    ],
)
def test_chunks_group_into_at_most_four_consecutive_balanced_sections(n: int, expected: tuple) -> None:
    ranges = section_ranges(n)
    assert ranges == expected
    assert len(ranges) <= MAX_SECTIONS
    assert [s for s, _ in ranges[1:]] == [e for _, e in ranges[:-1]]  # consecutive, no gap or overlap


def test_section_headings_are_stable_and_one_based() -> None:
    assert section_heading(0, 3, 0, 4) == "Part 1 of 3 (chunks 1–4)"
    assert section_heading(2, 3, 8, 9) == "Part 3 of 3 (chunks 9)"
    assert section_heading(1, 2, 6, 12, unit="chapters") == "Part 2 of 2 (chapters 7–12)"


def test_fitted_parts_share_the_limit_and_short_ones_stay_whole() -> None:
    parts = ["short part.", "x " * 3000, "y " * 3000]
    out = fitted(parts, limit=1000)
    assert out[0] == "short part."
    assert sum(len(p) for p in out) <= 1000 + 2  # the "…" marks
    assert out[1].endswith("…") and out[2].endswith("…")
    assert fitted(["a b", "c"], limit=100) == ["a b", "c"]


def test_prompts_carry_the_titles_heading_and_bounded_text() -> None:
    messages = section_messages("Alice", "Down the Rabbit-Hole", "Part 1 of 2 (chunks 1–4)", ["z " * 5000])
    user = messages[-1]["content"]
    assert messages[0]["role"] == "system" and "Use only the text given" in messages[0]["content"]
    assert '"Alice"' in user and '"Down the Rabbit-Hole"' in user and "part 1 of 2 (chunks 1–4)" in user
    assert len(user) < SECTION_CHARS + 400
    reduced = reduce_messages("Alice", "the chapter", [("Part 1 of 2", "One."), ("Part 2 of 2", "Two.")])
    assert "Part 1 of 2: One.\nPart 2 of 2: Two." in reduced[-1]["content"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Summary: Alice falls down a hole.", "Alice falls down a hole."),
        ("## Overview\n**Alice** falls.\n- She grows.", "Overview Alice falls. She grows."),
        ("Alice falls down a hole. Then she finds a door and", "Alice falls down a hole."),
        ("  alice   falls  ", "alice falls"),
    ],
)
def test_replies_are_cleaned_to_plain_prose_ending_at_a_sentence(reply: str, expected: str) -> None:
    assert clean_reply(reply) == expected


def test_a_long_reply_is_cut_at_a_sentence_within_the_word_limit() -> None:
    reply = " ".join(f"Sentence number {i} is here." for i in range(100))
    cleaned = clean_reply(reply, max_words=20)
    assert len(cleaned.split()) <= 20 and cleaned.endswith(".")


def test_an_empty_reply_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        clean_reply("  **Summary:**  ")


def test_assemble_lays_out_the_overview_then_one_line_per_part() -> None:
    assert assemble("Whole.", [("Part 1 of 1 (chunks 1–3)", "Only.")]) == "Only."
    parts = [("Part 1 of 2 (chunks 1–2)", "One."), ("Part 2 of 2 (chunks 3–4)", "Two.")]
    assert (
        assemble("Whole.", parts)
        == "Whole.\n\nPart 1 of 2 (chunks 1–2): One.\nPart 2 of 2 (chunks 3–4): Two."
    )


def test_a_short_chapter_is_one_llm_call_and_its_summary_alone() -> None:
    client = FakeClient()
    summarizer = LLMSummarizer(client)
    text = summarizer.chapter("Alice", "Chapter I", [chunk(1), chunk(2)])
    assert text == "Summary 1." and len(client.requests) == 1 == summarizer.chapter_calls(2)
    assert client.requests[0]["max_tokens"] == 256
    assert "creature number 2" in client.requests[0]["messages"][-1]["content"]  # the map step's digests


def test_a_long_chapter_is_at_most_five_calls_with_stable_headings() -> None:
    client = FakeClient()
    summarizer = LLMSummarizer(client)
    text = summarizer.chapter("Alice", "Chapter I", [chunk(i) for i in range(30)])
    assert len(client.requests) == MAX_SECTIONS + 1 == summarizer.chapter_calls(30)
    assert text.splitlines() == [
        "Summary 5.",
        "",
        "Part 1 of 4 (chunks 1–8): Summary 1.",
        "Part 2 of 4 (chunks 9–16): Summary 2.",
        "Part 3 of 4 (chunks 17–23): Summary 3.",
        "Part 4 of 4 (chunks 24–30): Summary 4.",
    ]
    assert "Part 1 of 4 (chunks 1–8): Summary 1." in client.requests[-1]["messages"][-1]["content"]
    deadlines = {id(r["deadline"]) for r in client.requests}
    assert len(deadlines) == 1 and client.requests[0]["deadline"].seconds == 120.0  # one bound for all


def test_a_failed_call_is_an_llm_error_and_stops_the_summary() -> None:
    client = FakeClient(fail_at=2)
    with pytest.raises(LLMError, match="timed out"):
        LLMSummarizer(client).chapter("Alice", "Chapter I", [chunk(i) for i in range(10)])
    assert len(client.requests) == 2


def test_the_synopsis_reduces_chapter_summaries_in_bounded_calls() -> None:
    descriptor = {"title": "Alice's Adventures in Wonderland", "author": "Lewis Carroll"}
    few = [(f"Chapter {i}", f"Alice does thing {i}.") for i in range(1, 6)]
    client = FakeClient()
    summarizer = LLMSummarizer(client)
    text = summarizer.synopsis(descriptor, few)
    assert text == "Alice's Adventures in Wonderland by Lewis Carroll.\nSummary 1."
    assert len(client.requests) == 1 == summarizer.synopsis_calls(few)
    many = [(f"Chapter {i}", "word " * 200) for i in range(1, 139)]  # Moby-Dick has 138 chapters
    client = FakeClient()
    text = LLMSummarizer(client).synopsis(descriptor, many)
    assert len(client.requests) == MAX_SECTIONS + 1 == LLMSummarizer.synopsis_calls(many)
    assert "Part 1 of 4 (chapters 1–35): Summary 1." in text.splitlines()


def test_a_lower_llm_max_tokens_bounds_summary_replies_too() -> None:
    client = FakeClient()
    client.max_tokens = 48  # type: ignore[attr-defined]
    LLMSummarizer(client).chapter("Alice", "Chapter I", [chunk(1)])
    assert client.requests[0]["max_tokens"] == 48


def test_the_summariser_id_names_the_model_and_prompt_version() -> None:
    assert LLMSummarizer(FakeClient(model="llama3.1")).id == "llm:llama3.1:v1"
