"""Citations of an answer and the text of an LLM's reply: pure helpers of ``nodes/query/answering.py``.

- ``hit_citation`` / ``quote_citation`` / ``passage_citation``: the ``Citation`` of a retrieved chunk,
  of one sentence the reader quoted, of a whole passage (an LLM excerpt: its span, the chunk of its
  best sentence).
- ``cited_answer``: an LLM answer's ``[n]`` markers renumbered in order of use over the numbered passages;
  ``located_answer``: an agent answer's ``[BOOK/CHUNK]`` markers over the chunks a tool returned.
- ``answer_tokens``, ``whole_sentences``, ``reply_text``, ``echoes``: the reply's length bound
  (``ANSWER_TOKENS_PER_WORD``), a cut reply up to its last finished sentence, HTML entities decoded, and
  whether it repeats ``ECHO_WORDS`` consecutive words of its instructions.
- ``excerpts`` / ``answer_messages``: the numbered excerpts and the chat messages of an LLM answer.

Config keys: none (the callers pass ``answer_max_words``). Limitations: markers are read as ``[n]`` and
``[BOOK/CHUNK]`` only; an echo is judged by words, not meaning.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any

from folio.nodes.core.reading import Passage
from folio.nodes.core.text import words
from folio.nodes.core.types import ChapterSummary, Citation, Hit

# An LLM answer is asked for at most ``answer_max_words`` words, and its reply is bounded to this many
# tokens a word (an English word is 1.3 tokens, a citation marker 3): a model that rambles stops there
# (SmolLM2 once wrote 470 tokens, 10 s on 2 cores), and the unfinished sentence is dropped.
ANSWER_TOKENS_PER_WORD = 3
# An LLM answer that repeats this many consecutive words of its instructions is an echo (SmolLM2 answers
# some questions with the system prompt, whose "like [1]" would otherwise pass as a citation).
ECHO_WORDS = 6
_SENTENCE_END = re.compile(r"""[.!?]["')\]]*(?:\s*\[\d+\])*""")
_MARKER = re.compile(r"\[(\d+)\]")
_LOCATION = re.compile(r"\[([^\[\]\s]+/[^\[\]\s]+)\]")


def hit_citation(hit: Hit) -> Citation:
    return Citation("book", hit.book_id, hit.chapter_id, hit.chapter_title, hit.chunk_id, hit.start, hit.end)


def quote_citation(q: Any) -> Citation:
    return Citation(
        "book", q.book_id, q.chapter_id, q.chapter_title, q.chunk_id, q.start, q.end, quote=q.text
    )


def passage_citation(p: Passage) -> Citation:
    """One citation for a whole passage (an LLM excerpt): its span, the chunk of its best sentence."""
    first, last = p.quotes[0], p.quotes[-1]
    best = max(p.quotes, key=lambda q: q.score)
    return Citation(
        "book",
        first.book_id,
        first.chapter_id,
        first.chapter_title,
        best.chunk_id,
        first.start,
        last.end,
        quote=p.text,
    )


def cited_answer(content: str, passages: Sequence[Passage]) -> tuple[str, tuple[Citation, ...]] | None:
    """The answer with its ``[n]`` markers renumbered in order of use; None when no marker is valid."""
    order: dict[int, int] = {}
    for m in _MARKER.finditer(content):
        n = int(m.group(1))
        if 1 <= n <= len(passages) and n not in order:
            order[n] = len(order) + 1
    if not order:
        return None
    text = _MARKER.sub(lambda m: f"[{order[int(m.group(1))]}]" if int(m.group(1)) in order else "", content)
    return text.strip(), tuple(passage_citation(passages[n - 1]) for n in order)


def located_answer(content: str, seen: dict[str, Hit]) -> tuple[str, tuple[Citation, ...]] | None:
    """An agent answer's ``[BOOK/CHUNK]`` markers as ``[n]`` over chunks a tool returned; None if none
    valid."""
    order: dict[str, int] = {}
    for m in _LOCATION.finditer(content):
        if m.group(1) in seen and m.group(1) not in order:
            order[m.group(1)] = len(order) + 1
    if not order:
        return None
    text = _LOCATION.sub(lambda m: f"[{order[m.group(1)]}]" if m.group(1) in order else "", content)
    return text.strip(), tuple(hit_citation(seen[loc]) for loc in order)


def answer_tokens(llm_client: Any, max_words: int) -> int:
    """The reply bound of an LLM answer: ``ANSWER_TOKENS_PER_WORD`` a word, never over the client's."""
    bound = ANSWER_TOKENS_PER_WORD * max(1, max_words)
    return min(bound, int(getattr(llm_client, "max_tokens", bound)))


def whole_sentences(content: str) -> str:
    """A reply cut at its length bound, up to its last finished sentence (with that sentence's
    markers); the reply as it is when no sentence finished."""
    ends = [m.end() for m in _SENTENCE_END.finditer(content)]
    return content[: ends[-1]].rstrip() if ends else content


def echoes(content: str, instructions: str, n: int = ECHO_WORDS) -> bool:
    """Whether ``content`` repeats ``n`` consecutive words of ``instructions``."""
    said = words(instructions)
    runs = {tuple(said[i : i + n]) for i in range(len(said) - n + 1)}
    answer = words(content)
    return any(tuple(answer[i : i + n]) in runs for i in range(len(answer) - n + 1))


def reply_text(content: str, truncated: bool) -> str:
    """An LLM answer as a person reads it: HTML entities decoded (a server whose chat template escapes
    the prompt gets them copied back: llama-cpp-python's ``&#34;``), cut to its last finished sentence
    when the reply hit its length bound."""
    text = html.unescape(content)
    return whole_sentences(text) if truncated else text


def excerpts(passages: Sequence[Passage]) -> str:
    return "\n\n".join(
        f"[{i}] ({p.quotes[0].chapter_title or p.quotes[0].chapter_id}) {p.text}"
        for i, p in enumerate(passages, 1)
    )


def answer_messages(
    question: str, passages: Sequence[Passage], summaries: Sequence[ChapterSummary], max_words: int
) -> list[dict[str, str]]:
    context = excerpts(passages)
    if summaries:
        context += "\n\nChapter summaries:\n" + "\n".join(f"- {s.text}" for s in summaries)
    return [
        {
            "role": "system",
            "content": f"Answer the question in at most {max_words} words, only from the numbered "
            "excerpts. Put the excerpt number in square brackets, like [1], after every claim. If the "
            "excerpts do not answer it, say so.",
        },
        {"role": "user", "content": f"Question: {question}\n\nExcerpts:\n{context}"},
    ]
