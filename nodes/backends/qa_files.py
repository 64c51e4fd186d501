"""Question files for the evaluation DAG (``nodes.eval.metrics``): FairytaleQA CSV and JSONL lines.

The formats (book, Kiwix and library lines) are described in ``nodes.eval.metrics``; this module only reads
them into ``QAItem`` values. Config keys: none. Limitations: a FairytaleQA file needs its
``sections.csv`` beside it.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, replace
from pathlib import Path

from folio.nodes.core.types import FolioError


@dataclass(frozen=True)
class QAItem:
    qid: str
    question: str
    book_file: str
    passages: tuple[str, ...] = ()  # FairytaleQA gold sections
    gold_quote: str = ""
    gold_chapter: str = ""
    answers: tuple[str, ...] = ()
    gold_zim: str = ""  # Kiwix questions: the gold article
    gold_path: str = ""
    expect: str = ""  # library questions: "answer" or "refuse" (asked over the whole library)
    zim_expect: str = ""  # ... when asked beside the sample archives too, where they differ
    zim_answers: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        return "kiwix" if self.gold_zim else "library" if self.expect else "book"


def read_fairytaleqa(path: Path) -> tuple[QAItem, ...]:
    sections_path = path.parent / "sections.csv"
    if not sections_path.exists():
        raise FolioError(str(path), "FairytaleQA questions need sections.csv beside them")
    with sections_path.open(encoding="utf-8", newline="") as f:
        sections = {(r["story"], r["section"].strip()): r["text"] for r in csv.DictReader(f)}
    items = []
    with path.open(encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            refs = [s.strip() for s in row["cor_section"].split(",") if s.strip()]
            passages = tuple(sections[(row["story"], s)] for s in refs if (row["story"], s) in sections)
            answers = tuple(row.get(f"answer{i}", "") for i in range(1, 7) if row.get(f"answer{i}"))
            items.append(
                QAItem(
                    qid=f"{row['story']}/{row['question_id']}",
                    question=row["question"],
                    book_file=row["book_file"],
                    passages=passages,
                    answers=answers,
                )
            )
    return tuple(items)


def _jsonl_item(row: dict, n: int) -> QAItem:
    answers = tuple(str(a) for a in row.get("answers") or ())
    qid = str(row.get("id", n))
    expect = str(row.get("expect") or "")
    if expect not in ("", "answer", "refuse"):
        raise ValueError(f"expect must be answer or refuse, not {expect!r}")
    zim_expect = str(row.get("expect_with_zim") or "")
    if zim_expect not in ("", "answer", "refuse"):
        raise ValueError(f"expect_with_zim must be answer or refuse, not {zim_expect!r}")
    if expect:
        return QAItem(
            qid=qid,
            question=row["question"],
            book_file=str(row.get("book_file") or ""),
            gold_quote=row.get("gold_quote") or "",
            gold_chapter=row.get("gold_chapter") or "",
            answers=answers,
            expect=expect,
            zim_expect=zim_expect,
            zim_answers=tuple(str(a) for a in row.get("answers_with_zim") or ()),
        )
    if row.get("gold_zim"):
        return QAItem(
            qid=qid,
            question=row["question"],
            book_file="",
            answers=answers,
            gold_zim=str(row["gold_zim"]),
            gold_path=str(row["gold_path"]),
        )
    return QAItem(
        qid=qid,
        question=row["question"],
        book_file=row["book_file"],
        gold_quote=row.get("gold_quote") or "",
        gold_chapter=row.get("gold_chapter") or "",
        answers=answers,
    )


def with_archives(item: QAItem) -> QAItem:
    """A library question as asked beside the archives: its ``expect_with_zim`` and ``answers_with_zim``
    where the line has them ("What is the capital of Australia?" is off the books, not off a library
    holding Wikipedia's article on Australia)."""
    if not item.zim_expect:
        return item
    return replace(item, expect=item.zim_expect, answers=item.zim_answers or item.answers)


def read_jsonl(path: Path) -> tuple[QAItem, ...]:
    items = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError("not an object")
            items.append(_jsonl_item(row, n))
        except (ValueError, KeyError) as exc:
            raise FolioError(f"{path}:{n}", f"not a question line ({type(exc).__name__}: {exc})") from None
    return tuple(items)
