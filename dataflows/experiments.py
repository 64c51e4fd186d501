"""``folio experiment``: config-switched experiments over the evaluation DAG, saved in DuckDB.

An experiment file (YAML) names what to compare::

    name: fairytaleqa-chunking          # default: the file name
    base: ../default.yaml               # a config file (relative to this file); default: the defaults
    overrides: {workers: 1}             # applied to every variant (zim_paths relative to this file)
    grid:                               # every combination is a variant ...
      chunk_tokens: [256, 512, 800]
      search_mode: [lexical, semantic, hybrid]
    variants: [{hybrid_lexical_weight: 0.5}]   # ... and/or an explicit list of override sets
    baselines: [bm25s, dense_exact]     # default: both; [] for none
    questions: [../../../shared/data/qa/fairytaleqa/questions.csv]   # library questions (``expect``,
                                        # e.g. tests/qa/library_questions.jsonl) go over every book
    sample: 60                          # optional: that many questions of each file, evenly spread
                                        # over it (the same ones every run); default: all of them
    books: [../../../shared/data/books] # optional: the books to ingest (default: the library's
                                        # books that the questions name)
    metrics: [hit@1, hit@5, mrr@10]     # the columns shown (every metric is saved), e.g. also
                                        # answer_in_text, first_citation_gold, refusal_rate; the
                                        # default adds ask_hit@1, ask_hit@3, ask_vs_search@1

Each variant runs through the same drivers: its books are ingested into a *variant library*
(``LIBRARY/experiments/libraries/<hash of the ingest config>/``) whose node and embedding caches are
the main library's, so Hamilton's cache reuses every ingest node the variant's overrides do not reach
(the count of nodes executed and taken from the cache is reported per variant); then each question
file goes through the evaluation DAG (``dataflows.evaluation``). Baselines are the base config with
``search_mode: bm25s`` or ``dense_exact`` (``nodes.search.retrieval``), retrieval only, over the base
config's chunks. Results go to ``LIBRARY/experiments.duckdb`` (``dataflows.experiment_store``).

Limitations: variants run one after another in this process (each ingest uses the configured
executor); variant libraries stay on disk for the next run (delete ``LIBRARY/experiments/libraries``
to reclaim the space).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from folio.dataflows import experiment_store
from folio.dataflows.api import book_files
from folio.dataflows.config import load_config
from folio.dataflows.evaluation import evaluate
from folio.dataflows.library import Library
from folio.dataflows.parallel import ingest_books
from folio.dataflows.registry import driver_for
from folio.nodes.backends.progress import BarProgress, NullProgress
from folio.nodes.core.types import FolioError
from folio.nodes.eval.metrics import qa_items

BASELINES = ("bm25s", "dense_exact")
DEFAULT_METRICS = ("hit@1", "hit@5", "hit@10", "mrr@10", "ask_hit@1", "ask_hit@3", "ask_vs_search@1")
EXPERIMENT_KEYS = frozenset(
    {
        "name",
        "description",
        "base",
        "overrides",
        "grid",
        "variants",
        "baselines",
        "questions",
        "books",
        "metrics",
        "sample",
    }
)
DB_NAME = "experiments.duckdb"


@dataclass(frozen=True)
class Variant:
    """One configuration of an experiment: a label and what it changes from the base config."""

    label: str
    overrides: dict[str, Any]
    baseline: str | None = None


@dataclass(frozen=True)
class Experiment:
    name: str
    path: Path
    base: Path | None
    variants: tuple[Variant, ...]
    questions: tuple[Path, ...]
    books: tuple[Path, ...] = ()
    metrics: tuple[str, ...] = DEFAULT_METRICS
    description: str = ""
    sample: int | None = None


@dataclass
class ExperimentReport:
    """What one ``folio experiment`` run did: its batch id and the saved runs (as ``load_runs`` gives
    them)."""

    batch_id: str
    db_path: Path
    runs: list[dict[str, Any]] = field(default_factory=list)


# --- reading the experiment file -------------------------------------------------------------------


def _label(overrides: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in overrides.items()) or "base"


def _grid(grid: Any, source: str) -> list[dict[str, Any]]:
    """The cartesian product of a ``{key: [values]}`` mapping, in the file's key order."""
    if not isinstance(grid, Mapping):
        raise FolioError(source, "grid must map config keys to lists of values")
    keys = list(grid)
    values = []
    for key in keys:
        v = grid[key]
        if not isinstance(v, list) or not v:
            raise FolioError(source, f"grid value of {key!r} must be a non-empty list")
        values.append(v)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*values)]


def _sample(raw: Any, source: str) -> int | None:
    """The ``sample`` key: a positive number of questions per file, or None (all)."""
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise FolioError(source, f"sample must be a positive number of questions, not {raw!r}")
    return raw


def _paths(raw: Any, base_dir: Path, source: str, what: str) -> tuple[Path, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list):
        raise FolioError(source, f"{what} must be a path or a list of paths")
    out = []
    for p in raw:
        path = Path(str(p)).expanduser()
        path = path if path.is_absolute() else base_dir / path
        if not path.exists():
            raise FolioError(source, f"{what} path not found: {path}")
        out.append(path)
    return tuple(out)


def load_experiment(path: str | Path) -> Experiment:
    """Read and check an experiment file: keys, grid, config keys (against the base config), paths."""
    import yaml

    path = Path(path).expanduser()
    source = str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise FolioError(source, "experiment file not found") from None
    except yaml.YAMLError as exc:
        raise FolioError(source, f"invalid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise FolioError(source, "an experiment file must be a mapping")
    unknown = sorted(set(data) - EXPERIMENT_KEYS)
    if unknown:
        raise FolioError(source, f"unknown experiment key(s): {', '.join(unknown)}")
    base_dir = path.parent
    base = _paths(data.get("base"), base_dir, source, "base")
    common = dict(data.get("overrides") or {})
    if not isinstance(data.get("overrides") or {}, Mapping):
        raise FolioError(source, "overrides must be a mapping of config keys to values")
    if common.get("zim_paths"):  # archives are named relative to the experiment file, like questions
        common["zim_paths"] = [str(p) for p in _paths(common["zim_paths"], base_dir, source, "zim_paths")]
    sets = _grid(data["grid"], source) if data.get("grid") else []
    explicit = data.get("variants") or []
    if not isinstance(explicit, list) or not all(isinstance(v, Mapping) for v in explicit):
        raise FolioError(source, "variants must be a list of mappings of config keys to values")
    sets.extend(dict(v) for v in explicit)
    baselines = data.get("baselines", list(BASELINES))
    if not isinstance(baselines, list) or set(baselines) - set(BASELINES):
        raise FolioError(source, f"baselines must be a list of {', '.join(BASELINES)}")
    variants = [Variant(_label(s), {**common, **s}) for s in (sets or [{}])]
    variants += [
        Variant(f"baseline {b}", {**common, "search_mode": b, "eval_answers": False}, b) for b in baselines
    ]
    labels = [v.label for v in variants]
    if len(set(labels)) != len(labels):
        raise FolioError(source, "two variants are the same")
    config_file = base[0] if base else None
    for v in variants:  # every variant's keys must be config keys: fail before any work
        try:
            load_config(config_file, overrides=v.overrides, environ={})
        except FolioError as exc:
            raise FolioError(source, f"variant {v.label!r}: {exc.reason}") from None
    questions = _paths(data.get("questions"), base_dir, source, "questions")
    if not questions:
        raise FolioError(source, "no question files: add questions: [PATH, ...]")
    metrics = data.get("metrics") or list(DEFAULT_METRICS)
    return Experiment(
        name=str(data.get("name") or path.stem),
        path=path,
        base=config_file,
        variants=tuple(variants),
        questions=questions,
        books=_paths(data.get("books"), base_dir, source, "books"),
        metrics=tuple(str(m) for m in metrics),
        description=str(data.get("description") or ""),
        sample=_sample(data.get("sample"), source),
    )


# --- running ---------------------------------------------------------------------------------------


def variant_config(experiment: Experiment, variant: Variant) -> dict[str, Any]:
    """The full config of a variant: defaults ← base file ← environment ← the variant's overrides."""
    return load_config(experiment.base, overrides=variant.overrides)


def ingest_keys(config: Mapping[str, Any]) -> tuple[str, ...]:
    """The config keys the ingest DAG reads (node parameters and ``@config.when`` keys), from its graph."""
    dr = driver_for("ingest", config)
    used = {name for node in dr.graph.nodes.values() for name in node.input_types}
    return tuple(sorted((used | {"embedder"}) & set(config)))


def ingest_hash(config: Mapping[str, Any]) -> str:
    """A short hash of the ingest-relevant part of a config: variants with equal hashes share a library."""
    relevant = {k: config[k] for k in ingest_keys(config)}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _book_sources(experiment: Experiment, library: Library) -> list[Path]:
    """The book files the experiment's questions need: its ``books``, else the library's books they name
    (every book of the library when a question is asked over the whole library)."""
    items = [i for q in experiment.questions for i in qa_items(str(q))]
    named = {Path(i.book_file).name for i in items if i.kind == "book"}
    if any(i.kind == "library" for i in items) and not experiment.books:
        named |= {Path(b["source_file"]).name for b in library.descriptors()}
    if experiment.books:
        files = book_files(experiment.books)
        missing = sorted(named - {f.name for f in files})
        if missing:
            raise FolioError(
                str(experiment.path), f"the questions name book(s) not under books: {', '.join(missing)}"
            )
        return files
    if not named:
        return []
    by_name = {Path(b["source_file"]).name: Path(b["source_file"]) for b in library.descriptors()}
    missing = sorted(n for n in named if n not in by_name)
    if missing:
        raise FolioError(
            str(experiment.path),
            f"book(s) named by the questions are not in {library.path}: {', '.join(missing)} "
            "(ingest them, or list them under books:)",
        )
    gone = [str(by_name[n]) for n in sorted(named) if not by_name[n].exists()]
    if gone:
        raise FolioError(
            str(experiment.path), f"source file(s) of ingested books are gone: {', '.join(gone)}"
        )
    return [by_name[n] for n in sorted(named)]


def variant_library(
    library: Library, config: Mapping[str, Any], files: Sequence[Path], progress: bool = False
) -> tuple[Library, dict[str, int]]:
    """Ingest ``files`` with ``config`` into its variant library (the main library's caches) → (library, cache
    counts)."""
    vlib = Library(library.path / "experiments" / "libraries" / ingest_hash(config))
    report: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    wanted = {str(Path(f).resolve()) for f in files}
    with vlib.writer():
        for book in vlib.descriptors():  # books of an earlier experiment that this one does not use
            if str(Path(book["source_file"]).resolve()) not in wanted:
                vlib.remove(book["book_id"])
        results = ingest_books(
            list(files),
            vlib,
            dict(config),
            BarProgress() if progress else NullProgress(),
            cache=True,
            cache_library=library,
            cache_report=report,
        )
    errors = [r for r in results if isinstance(r, FolioError)]
    if errors:
        raise errors[0]
    counts = {
        "executed": sum(len(ex) for ex, _ in report.values()),
        "from_cache": sum(len(fc) for _, fc in report.values()),
    }
    return vlib, counts


def _say(message: str, enabled: bool) -> None:
    if enabled:
        print(message, file=sys.stderr, flush=True)


def run_experiment(
    experiment: str | Path | Experiment, library: str | Path | Library | None = None, progress: bool = False
) -> ExperimentReport:
    """Run every variant of an experiment (a file, or one already loaded) against ``library``; save in its
    DuckDB."""
    if not isinstance(experiment, Experiment):
        experiment = load_experiment(experiment)
    lib = library if isinstance(library, Library) else Library(library)
    lib.path.mkdir(parents=True, exist_ok=True)
    files = _book_sources(experiment, lib)
    report = ExperimentReport(batch_id=uuid.uuid4().hex[:8], db_path=lib.path / DB_NAME)
    total = len(experiment.variants)
    for n, variant in enumerate(experiment.variants, 1):
        start = time.perf_counter()
        cfg = variant_config(experiment, variant)
        cache = {"executed": 0, "from_cache": 0}
        vlib = lib
        if files:
            _say(f"[{n}/{total}] {variant.label}: ingest {len(files)} book(s)", progress)
            vlib, cache = variant_library(lib, cfg, files, progress)
        metrics: dict[str, dict[str, Any]] = {}
        rows: list[dict[str, Any]] = []
        for q in experiment.questions:
            _say(f"[{n}/{total}] {variant.label}: {q.name}", progress)
            run = evaluate(q, vlib, cfg, sample=experiment.sample)
            metrics[q.name] = run.metrics
            rows.extend(run.rows())
        seconds = round(time.perf_counter() - start, 2)
        experiment_store.save_run(
            report.db_path,
            batch_id=report.batch_id,
            experiment=experiment.name,
            variant=variant.label,
            config=cfg,
            overrides=variant.overrides,
            metrics=metrics,
            results=rows,
            cache=cache,
            seconds=seconds,
        )
        shown = "  ".join(
            f"{m} {metrics[q.name].get(m)}" for q in experiment.questions[:1] for m in experiment.metrics[:3]
        )
        _say(
            f"[{n}/{total}] {variant.label}: {shown}  (ingest nodes run {cache['executed']}, "
            f"from cache {cache['from_cache']}; {seconds} s)",
            progress,
        )
    report.runs = experiment_store.load_runs(report.db_path, batch_id=report.batch_id)
    return report


# --- CLI -------------------------------------------------------------------------------------------
