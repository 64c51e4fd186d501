"""The answer-quality figures of issue 27 (README's "Issue 27" table), reproducible from one command.

    python -m bench.question_sets                        # every set, the library sets with and without ZIMs
    python -m bench.question_sets --sets fairytaleqa_dev books27_dev --dump dev.json
    python -m bench.question_sets --compare before.json after.json   # answers that changed, no run

Builds once, in ``--work`` (default ``.bench/question_sets``, gitignored), the four libraries the sets
ask: the six books of ``books27_*``, ``kiwix27_*`` and ``library27_*``; the seven sample books of
``tests/qa/library_questions.jsonl``; the three novels of ``novels_*`` (Moby-Dick, The Hound of the
Baskervilles, Pride and Prejudice); FairytaleQA's three books. It writes FairytaleQA's halves there:
the 26 stories of ``qa/fairytaleqa/stories.csv`` sorted by name, even positions to development (13
stories), odd to test (13), each half a folder with its filtered ``questions.csv`` and ``sections.csv``
(what ``folio eval`` reads). Then it runs ``dataflows.evaluation.evaluate`` (what ``folio eval`` runs,
default config, no LLM) on each set: ``kiwix27_*`` always with the five sample ZIMs (``zim_paths``),
``library27_*`` and ``library_questions`` without them, with them, or both (``--zims``), the book sets
without. It prints one table of the README's figures and, with ``--dump FILE``, writes every answer
(question, answer text, the checks) so that two runs can be compared answer by answer (``--compare``).

``--set KEY=VALUE`` overrides a config setting (``scope_boost=0``); ``--patch MODULE.NAME=VALUE`` sets a
module constant before the run (``reading.MAX_CHUNKS=3``: a module of ``folio.nodes.core``,
``folio.nodes.query``, ``folio.nodes.kiwix``, ``folio.nodes.backends`` or a full dotted name), for trying
a setting on the development halves without editing the code.

Not a test and not shipped: ``bench/`` measures the installed package (the repo's editable install).
"""

from __future__ import annotations

import argparse
import ast
import csv
import importlib
import json
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HAMILTON_TELEMETRY_ENABLED", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
QA_DIR = REPO / "tests" / "qa"
DEFAULT_DATA = Path(os.environ.get("FOLIO_TEST_DATA", REPO.parent / "shared" / "data"))
DEFAULT_WORK = REPO / ".bench" / "question_sets"

SIX = (
    "books/txt/pg35_wells_the-time-machine.txt",
    "books/txt/pg11_carroll_alices-adventures-in-wonderland.txt",
    "books/epub/doyle_the-adventures-of-sherlock-holmes.epub",
    "books/txt/pg19068_grimm_household-stories_lucy-crane.txt",
    "books/txt/pg572_potter_great-big-treasury.txt",
    "formats/other/abbott-flatland.md",
)
SEVEN = (
    "books/epub/carroll_alice-in-wonderland_abridged-pg19033.epub",
    "books/epub/curry-clippinger_childrens-literature_section4.epub",
    "books/epub/doyle_the-adventures-of-sherlock-holmes.epub",
    "books/epub/melville_moby-dick.epub",
    "books/txt/pg19068_grimm_household-stories_lucy-crane.txt",
    "books/txt/pg35_wells_the-time-machine.txt",
    "books/txt/pg572_potter_great-big-treasury.txt",
)
NOVELS = (
    "books/txt/pg2701_melville_moby-dick.txt",
    "formats/other/pride-and-prejudice-pg1342.html",
    "formats/mobi/hound-of-the-baskervilles-pg2852.mobi",
)
FAIRY = (
    "books/txt/pg19068_grimm_household-stories_lucy-crane.txt",
    "books/txt/pg572_potter_great-big-treasury.txt",
    "books/epub/curry-clippinger_childrens-literature_section4.epub",
)
LIBRARIES = {"six": SIX, "seven": SEVEN, "novels": NOVELS, "fairy": FAIRY}


@dataclass(frozen=True)
class QuestionSet:
    """One question file, the library it is asked of, and whether the ZIMs join it (``zims``: "no",
    "yes", or "both": run without and with them, as two rows)."""

    name: str
    library: str
    zims: str = "no"

    def file(self, work: Path) -> Path:
        if self.name.startswith("fairytaleqa_"):
            return work / "fairytaleqa" / self.name.removeprefix("fairytaleqa_") / "questions.csv"
        return QA_DIR / f"{self.name}.jsonl"


SETS = (
    QuestionSet("books27_dev", "six"),
    QuestionSet("books27_test", "six"),
    QuestionSet("novels_dev", "novels"),
    QuestionSet("novels_test", "novels"),
    QuestionSet("kiwix27_dev", "six", "yes"),
    QuestionSet("kiwix27_test", "six", "yes"),
    QuestionSet("fairytaleqa_dev", "fairy"),
    QuestionSet("fairytaleqa_test", "fairy"),
    QuestionSet("library27_dev", "six", "both"),
    QuestionSet("library27_test", "six", "both"),
    QuestionSet("library_questions", "seven", "both"),
)
BY_NAME = {s.name: s for s in SETS}


# --- the work folder: libraries and FairytaleQA's halves ---------------------------------------------


def library(work: Path, data: Path, name: str) -> Path:
    """The library ``name`` under ``work``, ingesting (default config) whichever of its books it lacks."""
    from folio.dataflows.api import ingest
    from folio.dataflows.library import Library

    path = work / "libraries" / name
    files = [data / f for f in LIBRARIES[name]]
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise SystemExit(f"question_sets: {missing[0]} not found (--data points at the shared data)")
    held = {Path(b["source_file"]).name for b in Library(path).descriptors()} if path.exists() else set()
    todo = [f for f in files if f.name not in held]
    if todo:
        print(f"ingesting {len(todo)} book(s) into {path} ...", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        report = ingest(todo, library=path)
        if not report.ok:
            raise SystemExit(f"question_sets: ingest failed: {report.errors[0]}")
        print(f"  {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return path


def fairytale_halves(work: Path, data: Path) -> dict[str, list[str]]:
    """FairytaleQA's development and test folders under ``work / "fairytaleqa"`` (written when absent or
    older than the dataset): stories sorted by name, even positions to ``dev``, odd to ``test``."""
    source = data / "qa" / "fairytaleqa"
    with (source / "stories.csv").open(encoding="utf-8", newline="") as f:
        stories = sorted(r["story"] for r in csv.DictReader(f))
    halves = {"dev": stories[0::2], "test": stories[1::2]}
    for half, names in halves.items():
        folder = work / "fairytaleqa" / half
        folder.mkdir(parents=True, exist_ok=True)
        for file in ("questions.csv", "sections.csv"):
            target = folder / file
            if target.exists() and target.stat().st_mtime >= (source / file).stat().st_mtime:
                continue
            _filter_csv(source / file, target, frozenset(names))
    return halves


def _filter_csv(source: Path, target: Path, stories: frozenset[str]) -> None:
    with source.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        fields = list(reader.fieldnames or ())
        rows = [r for r in reader if r["story"] in stories]
    tmp = target.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    tmp.replace(target)


# --- running the sets ----------------------------------------------------------------------------------


def _kinds(qa_file: Path) -> dict[str, str]:
    """Question id -> its ``type`` (concrete, why, whole, other) for a JSONL file that gives one."""
    if qa_file.suffix != ".jsonl":
        return {}
    out = {}
    lines = qa_file.read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines, 1):
        if line.strip():
            row = json.loads(line)
            if row.get("type"):
                out[str(row.get("id", n))] = str(row["type"])
    return out


# the dump's names for ``EvalRun.rows()``'s columns (the rest are kept under their own names)
_RENAMED = {"first_citation_gold": "first_gold", "answer_words": "words"}
_DROPPED = ("question_file", "qid")


def _answers(run: Any, kinds: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Every question's answer and checks (``EvalRun.rows()``), keyed by question id, with its kind."""
    out = {}
    for row in run.rows():
        answer = {_RENAMED.get(k, k): v for k, v in row.items() if k not in _DROPPED}
        answer["cited"] = json.loads(answer["cited"]) if answer["cited"] else []
        out[row["qid"]] = {"type": kinds.get(row["qid"], ""), **answer}
    return out


def _by_kind(answers: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """``answer_in_text`` over each kind of question (questions with accepted answers)."""
    groups: dict[str, list[bool]] = {}
    for a in answers.values():
        if a["type"] and a["in_text"] is not None:
            groups.setdefault(a["type"], []).append(bool(a["in_text"]))
    return {k: round(sum(v) / len(v), 4) for k, v in sorted(groups.items())}


def run_set(
    qs: QuestionSet,
    work: Path,
    data: Path,
    with_zims: bool,
    sample: int | None = None,
    settings: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One set evaluated (default config and ``settings``; ``zim_paths`` the five sample ZIMs when
    ``with_zims``)."""
    from folio.dataflows.evaluation import evaluate

    config: dict[str, Any] = dict(settings or {})
    if with_zims:
        config["zim_paths"] = [str(p) for p in sorted((data / "zim").glob("*.zim"))]
    qa_file, lib = qs.file(work), library(work, data, qs.library)
    t0 = time.perf_counter()  # the evaluation alone (a library is built once, before)
    run = evaluate(qa_file, library=lib, config=config, sample=sample)
    answers = _answers(run, _kinds(qa_file))
    return {
        "metrics": dict(run.metrics),
        "in_text_by_kind": _by_kind(answers),
        "seconds": round(time.perf_counter() - t0, 1),
        "answers": answers,
    }


def plan(names: Sequence[str], zims: str) -> list[tuple[QuestionSet, bool]]:
    """The (set, with ZIMs) runs asked for: ``zims`` ("no", "yes", "both") chooses for the sets that may
    run either way; ``kiwix27_*`` always has the ZIMs and the book sets never."""
    out: list[tuple[QuestionSet, bool]] = []
    for name in names:
        qs = BY_NAME[name]
        choice = zims if qs.zims == "both" else qs.zims
        options = {"no": [False], "yes": [True], "both": [False, True]}[choice]
        out.extend((qs, z) for z in options)
    return out


def row_name(qs: QuestionSet, with_zims: bool) -> str:
    return f"{qs.name}+zims" if with_zims and qs.zims == "both" else qs.name


# --- the table, the dump and the comparison ------------------------------------------------------------

COLUMNS = (
    ("n", "n"),
    ("hit@1", "hit@1"),
    ("ask@1", "ask_hit@1"),
    ("in text", "answer_in_text"),
    ("concrete", None),
    ("1st cit", "first_citation_gold"),
    ("words", "answer_words_p50"),
    ("dup", "duplicate_rate"),
    ("frag", "fragment_rate"),
    ("refused", "refusal_rate"),
    ("answered", "answered_rate"),
)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return str(round(value, 3)) if isinstance(value, float) else str(value)


def _cells(result: Mapping[str, Any]) -> list[str]:
    metrics = result["metrics"]
    return [
        _cell(result["in_text_by_kind"].get("concrete") if key is None else metrics.get(key))
        for _, key in COLUMNS
    ]


def table(results: Mapping[str, Mapping[str, Any]]) -> str:
    """One Markdown row a run (``results``: row name -> ``run_set``'s result)."""
    lines = ["| set | " + " | ".join(h for h, _ in COLUMNS) + " |", "|---" * (len(COLUMNS) + 1) + "|"]
    for name, result in results.items():
        lines.append(f"| {name} | " + " | ".join(_cells(result)) + " |")
    return "\n".join(lines)


def compare(before: Mapping[str, Any], after: Mapping[str, Any], answers: bool = True) -> str:
    """Two dumps side by side: each set's figures before / after, then (``answers``) every question whose
    answer text changed, with its checks before -> after."""
    out = []
    for name in [n for n in after["sets"] if n in before["sets"]]:
        b, a = before["sets"][name], after["sets"][name]
        cells = [f"{x} -> {y}" if x != y else x for x, y in zip(_cells(b), _cells(a), strict=True)]
        out.append(f"## {name}\n" + ", ".join(f"{h} {c}" for (h, _), c in zip(COLUMNS, cells, strict=True)))
        if not answers:
            continue
        for qid, new in a["answers"].items():
            old = b["answers"].get(qid)
            if old is None or old["answer"] == new["answer"]:
                continue
            flags = " ".join(
                f"{k} {old[k]}->{new[k]}" for k in ("in_text", "first_gold", "refused") if old[k] != new[k]
            )
            out.append(f"\n* {qid} [{new['type'] or '-'}] {new['question']}  ({flags or 'checks same'})")
            out.append(f"  - before: {old['answer']}")
            out.append(f"  - after:  {new['answer']}")
        out.append("")
    return "\n".join(out)


def patch(assignments: Sequence[str]) -> dict[str, Any]:
    """Set module constants (``MODULE.NAME=VALUE``, VALUE a Python literal); a short module name is
    looked up in ``folio.nodes.core``, then ``folio.nodes.query``, ``folio.nodes.kiwix``."""
    done = {}
    for assignment in assignments:
        target, _, value = assignment.partition("=")
        module_name, _, attr = target.strip().rpartition(".")
        candidates = [module_name] if "." in module_name else []
        candidates += [f"folio.nodes.{p}.{module_name}" for p in ("core", "query", "kiwix", "backends")]
        for candidate in candidates:
            try:
                module = importlib.import_module(candidate)
            except ImportError:
                continue
            if not hasattr(module, attr):
                raise SystemExit(f"question_sets: {candidate} has no {attr}")
            setattr(module, attr, ast.literal_eval(value.strip()))
            done[f"{candidate}.{attr}"] = getattr(module, attr)
            break
        else:
            raise SystemExit(f"question_sets: no module {module_name!r} for --patch {assignment}")
    return done


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.question_sets", description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", choices=[s.name for s in SETS], default=[s.name for s in SETS])
    parser.add_argument("--zims", choices=("no", "yes", "both"), default="both", help="library sets")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, help="libraries and FairytaleQA halves")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data folder")
    parser.add_argument("--dump", type=Path, help="write every answer and the figures as JSON here")
    parser.add_argument("--sample", type=int, help="only this many questions of each set, spread evenly")
    parser.add_argument("--patch", nargs="*", default=[], metavar="MODULE.NAME=VALUE")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config settings")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"), help="two dumps")
    parser.add_argument("--figures-only", action="store_true", help="with --compare: no answers")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    if args.compare:
        before, after = (json.loads(p.read_text(encoding="utf-8")) for p in args.compare)
        print(compare(before, after, not args.figures_only))
        return 0
    patched = patch(args.patch)
    settings = {k.strip(): ast.literal_eval(v.strip()) for k, _, v in (a.partition("=") for a in args.set)}
    work = args.work.resolve()
    fairytale_halves(work, args.data)
    results: dict[str, dict[str, Any]] = {}
    t0 = time.perf_counter()
    for qs, with_zims in plan(args.sets, args.zims):
        results[row_name(qs, with_zims)] = run_set(qs, work, args.data, with_zims, args.sample, settings)
        print(f"{row_name(qs, with_zims)}: {results[row_name(qs, with_zims)]['seconds']} s", file=sys.stderr)
    print(table(results))
    walls = [r["seconds"] for r in results.values()]
    print(f"\n{len(results)} run(s), {sum(walls):.0f} s (median {statistics.median(walls):.0f} s a set)")
    if args.dump:
        args.dump.parent.mkdir(parents=True, exist_ok=True)
        meta = {
            "patched": patched,
            "settings": settings,
            "seconds": round(time.perf_counter() - t0, 1),
            "sample": args.sample,
        }
        dump = {"meta": meta, "sets": results}
        args.dump.write_text(json.dumps(dump, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
