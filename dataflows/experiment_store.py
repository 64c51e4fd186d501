"""The results store of ``folio experiment``: runs, their metrics and per-question results in DuckDB.

An experiment runs several config *variants* (e.g. ``chunk_tokens`` x ``search_mode``, plus baselines) over
question files. One ``folio experiment`` invocation is a *batch*; each variant it runs is a *run* with its own
short run id. Everything lands in ``LIBRARY/experiments.duckdb`` so later invocations can list, compare and
plot earlier runs.

Schema (created with ``CREATE TABLE IF NOT EXISTS`` on every open)::

    runs(run_id VARCHAR PRIMARY KEY, batch_id, experiment, variant, started_at TIMESTAMP, git_commit,
         config_hash, config (JSON text), overrides (JSON text), cache_executed INTEGER,
         cache_from_cache INTEGER, seconds DOUBLE, ordinal INTEGER)      -- ordinal = insertion order
    metrics(run_id, question_file, metric, value DOUBLE)                 -- one row per (run, file, metric)
    results(run_id, question_file, qid, question, located BOOLEAN, rank INTEGER, latency_ms DOUBLE,
            answer, contained BOOLEAN, grounded BOOLEAN, unsupported BOOLEAN, tool_calls INTEGER,
            answer_latency_ms DOUBLE, cited VARCHAR)                     -- one row per question

Rules and limitations:

* Every call opens its own short-lived connection and closes it, so two processes never keep the file
  locked; a call that finds the file locked by another process retries for a few seconds, then fails.
* ``save_run`` is one transaction: a failed save (bad value, full disk, ...) leaves no row of that run.
* Metric values are stored as DOUBLE. ``load_runs`` returns floats, except for the count metrics ``n``,
  ``located`` and ``answered``, which come back as ints when integral; NULL comes back as ``None``.
* ``started_at`` is stored as a naive TIMESTAMP: an aware datetime is converted to UTC first; a naive one is
  stored as given (the default is the current UTC time). The latest batch is the one whose newest run
  started last (insertion order breaks ties).
* ``config`` and ``overrides`` are stored as JSON (``sort_keys``, non-JSON values via ``str``), so values that
  are not JSON-native (paths, tuples) come back as strings or lists.
* Result rows need ``question_file`` and ``qid``; other known keys are optional (NULL when missing) and
  unknown keys are ignored. ``cited`` may be given as a JSON string or as a list (stored as JSON text).
* Reading functions never create the database: on a missing file they behave as on an empty store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import subprocess
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from folio.nodes.core.types import FolioError

if TYPE_CHECKING:
    import duckdb

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs(
    run_id VARCHAR PRIMARY KEY, batch_id VARCHAR, experiment VARCHAR, variant VARCHAR, started_at TIMESTAMP,
    git_commit VARCHAR, config_hash VARCHAR, config VARCHAR, overrides VARCHAR, cache_executed INTEGER,
    cache_from_cache INTEGER, seconds DOUBLE, ordinal INTEGER);
CREATE TABLE IF NOT EXISTS metrics(run_id VARCHAR, question_file VARCHAR, metric VARCHAR, value DOUBLE);
CREATE TABLE IF NOT EXISTS results(
    run_id VARCHAR, question_file VARCHAR, qid VARCHAR, question VARCHAR, located BOOLEAN, rank INTEGER,
    latency_ms DOUBLE, answer VARCHAR, contained BOOLEAN, grounded BOOLEAN, unsupported BOOLEAN,
    tool_calls INTEGER, answer_latency_ms DOUBLE, cited VARCHAR);
"""

RUN_COLUMNS: tuple[str, ...] = (
    "run_id",
    "batch_id",
    "experiment",
    "variant",
    "started_at",
    "git_commit",
    "config_hash",
    "config",
    "overrides",
    "cache_executed",
    "cache_from_cache",
    "seconds",
)
RESULT_COLUMNS: tuple[str, ...] = (
    "question_file",
    "qid",
    "question",
    "located",
    "rank",
    "latency_ms",
    "answer",
    "contained",
    "grounded",
    "unsupported",
    "tool_calls",
    "answer_latency_ms",
    "cited",
)
INT_METRICS: frozenset[str] = frozenset({"n", "located", "answered"})
"""Metrics returned as ints by ``load_runs`` when their stored value is integral."""

LOCK_WAIT_S = 10.0
REPO_DIR = Path(__file__).resolve().parent.parent


# --- identity ------------------------------------------------------------------------------------------
def git_commit(repo_dir: str | Path | None = None) -> str | None:
    """``git rev-parse HEAD`` of ``repo_dir`` (default: the repo holding this package), ``-dirty`` if
    modified.

    ``None`` when the folder is not a git checkout (or has no commit) or git is missing; never raises.
    """
    folder = Path(repo_dir) if repo_dir is not None else REPO_DIR
    env = {k: v for k, v in os.environ.items() if k not in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE")}

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(folder), *args],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
                env=env,
            )
        except (OSError, subprocess.SubprocessError, ValueError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    try:
        head = git("rev-parse", "HEAD")
        if not head or any(c not in "0123456789abcdef" for c in head.lower()):
            return None
        status = git("status", "--porcelain")
        return f"{head}-dirty" if status else head
    except Exception:
        return None


def config_hash(config: Mapping[str, Any]) -> str:
    """First 12 hex chars of the sha256 of the config as sorted-key JSON (non-JSON values via ``str``)."""
    text = json.dumps(config, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


# --- connection ----------------------------------------------------------------------------------------
@contextlib.contextmanager
def _connect(db_path: str | Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A short-lived connection with the schema in place; waits a little for another process's lock."""
    import duckdb

    path = Path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            con = duckdb.connect(str(path))
            break
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise FolioError(str(db_path), f"cannot open the experiment store: {exc}") from exc
            time.sleep(0.1)
        except duckdb.Error as exc:
            raise FolioError(str(db_path), f"cannot open the experiment store: {exc}") from exc
    try:
        con.execute(SCHEMA)
        yield con
    finally:
        con.close()


def _plain(value: Any) -> Any:
    """Numpy scalars to Python scalars (DuckDB parameters want plain values)."""
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        return value.item()
    return value


def _metric_value(db_path: str | Path, qfile: str, name: str, value: Any) -> float | None:
    value = _plain(value)
    if value is None:
        return None
    if isinstance(value, bool | int | float):
        return float(value)
    raise FolioError(str(db_path), f"metric {name!r} of {qfile!r} is not a number: {value!r}")


def _result_row(db_path: str | Path, run_id: str, i: int, row: Mapping[str, Any]) -> tuple[Any, ...]:
    if not isinstance(row, Mapping):
        raise FolioError(str(db_path), f"result row {i} is not a mapping: {row!r}")
    for key in ("question_file", "qid"):
        if row.get(key) is None:
            raise FolioError(str(db_path), f"result row {i} has no {key}")
    values = []
    for col in RESULT_COLUMNS:
        value = _plain(row.get(col))
        if col == "cited" and isinstance(value, list | tuple):
            value = json.dumps(list(value))
        elif col in ("question_file", "qid") and not isinstance(value, str):
            value = str(value)
        values.append(value)
    return (run_id, *values)


def _int_or_none(db_path: str | Path, cache: Mapping[str, int], key: str) -> int | None:
    value = _plain(cache.get(key))
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FolioError(str(db_path), f"cache count {key!r} is not an int: {value!r}")
    return value


# --- writing -------------------------------------------------------------------------------------------
def _naive_utc(started_at: datetime | None) -> datetime:
    """``started_at`` (default: now) in UTC without a time zone, as the runs table stores it."""
    if started_at is None:
        return datetime.now(UTC).replace(tzinfo=None)
    if started_at.tzinfo is not None:
        return started_at.astimezone(UTC).replace(tzinfo=None)
    return started_at


def _new_run(con: Any) -> tuple[str, int]:
    """A run id no stored run has, and the run's ordinal (the next one)."""
    taken = {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}
    run_id = uuid.uuid4().hex[:8]
    while run_id in taken:
        run_id = uuid.uuid4().hex[:8]
    (ordinal,) = con.execute("SELECT coalesce(max(ordinal), 0) + 1 FROM runs").fetchone() or (1,)
    return run_id, int(ordinal)


def save_run(
    db_path: str | Path,
    *,
    batch_id: str,
    experiment: str,
    variant: str,
    config: Mapping[str, Any],
    overrides: Mapping[str, Any],
    metrics: Mapping[str, Mapping[str, float | int | None]],
    results: Sequence[Mapping[str, Any]],
    cache: Mapping[str, int],
    seconds: float,
    started_at: datetime | None = None,
) -> str:
    """Store one run (a variant of an experiment) with its metrics and per-question results; returns its id.

    One transaction: on any failure nothing of this run is left and a ``FolioError`` is raised.
    """
    for name, value in (("batch_id", batch_id), ("experiment", experiment), ("variant", variant)):
        if not isinstance(value, str) or not value:
            raise FolioError(str(db_path), f"{name} must be a non-empty string, got {value!r}")
    started_at = _naive_utc(started_at)
    metric_rows = [
        (qfile, name, _metric_value(db_path, qfile, name, value))
        for qfile, values in metrics.items()
        for name, value in values.items()
    ]
    try:
        config_text = json.dumps(config, sort_keys=True, default=str)
        overrides_text = json.dumps(overrides, sort_keys=True, default=str)
        seconds_value = float(seconds)
    except (TypeError, ValueError) as exc:
        raise FolioError(str(db_path), f"cannot store run {variant!r}: {exc}") from exc
    executed = _int_or_none(db_path, cache, "executed")
    from_cache = _int_or_none(db_path, cache, "from_cache")
    commit = git_commit()

    import duckdb

    with _connect(db_path) as con:
        try:
            con.execute("BEGIN TRANSACTION")
            run_id, ordinal = _new_run(con)
            con.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    run_id,
                    batch_id,
                    experiment,
                    variant,
                    started_at,
                    commit,
                    config_hash(config),
                    config_text,
                    overrides_text,
                    executed,
                    from_cache,
                    seconds_value,
                    ordinal,
                ],
            )
            if metric_rows:
                con.executemany(
                    "INSERT INTO metrics VALUES (?, ?, ?, ?)", [(run_id, *row) for row in metric_rows]
                )
            rows = [_result_row(db_path, run_id, i, row) for i, row in enumerate(results)]
            if rows:
                placeholders = ", ".join("?" * (len(RESULT_COLUMNS) + 1))
                con.executemany(f"INSERT INTO results VALUES ({placeholders})", rows)
            con.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(Exception):
                con.execute("ROLLBACK")
            if isinstance(exc, duckdb.Error):
                raise FolioError(str(db_path), f"cannot store run {variant!r}: {exc}") from exc
            raise
    return run_id


# --- reading -------------------------------------------------------------------------------------------
def _metric_out(name: str, value: float | None) -> float | int | None:
    if value is None:
        return None
    if name in INT_METRICS and math.isfinite(value) and value == int(value):
        return int(value)
    return float(value)


def latest_batch(db_path: str | Path) -> str | None:
    """The batch id whose newest run started last; ``None`` for an empty or missing store."""
    if not Path(db_path).exists():
        return None
    with _connect(db_path) as con:
        row = con.execute(
            "SELECT batch_id FROM runs GROUP BY batch_id "
            "ORDER BY max(started_at) DESC, max(ordinal) DESC LIMIT 1"
        ).fetchone()
    return row[0] if row else None


def load_runs(
    db_path: str | Path, run_ids: Sequence[str] | None = None, batch_id: str | None = None
) -> list[dict[str, Any]]:
    """Run rows with their ``metrics`` ({question_file: {metric: value}}), in insertion order.

    ``run_ids`` selects runs (unknown ids raise ``FolioError``); ``batch_id`` selects a batch (an unknown
    batch raises); both given: the selected runs of that batch. Neither: the runs of the latest batch.
    """
    if isinstance(run_ids, str):
        run_ids = [run_ids]
    wanted = list(dict.fromkeys(run_ids)) if run_ids is not None else None
    if not Path(db_path).exists():
        if wanted:
            raise FolioError(str(db_path), f"unknown run id(s): {', '.join(wanted)}")
        if batch_id is not None:
            raise FolioError(str(db_path), f"unknown batch id: {batch_id}")
        return []
    if wanted is None and batch_id is None:
        batch_id = latest_batch(db_path)
        if batch_id is None:
            return []
    with _connect(db_path) as con:
        if wanted is not None:
            if not wanted:
                return []
            known = {r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()}
            unknown = [r for r in wanted if r not in known]
            if unknown:
                raise FolioError(str(db_path), f"unknown run id(s): {', '.join(unknown)}")
        elif con.execute("SELECT count(*) FROM runs WHERE batch_id = ?", [batch_id]).fetchone() == (0,):
            raise FolioError(str(db_path), f"unknown batch id: {batch_id}")
        where, params = [], []
        if wanted is not None:
            where.append(f"run_id IN ({', '.join('?' * len(wanted))})")
            params.extend(wanted)
        if batch_id is not None:
            where.append("batch_id = ?")
            params.append(batch_id)
        rows = con.execute(
            f"SELECT {', '.join(RUN_COLUMNS)} FROM runs WHERE {' AND '.join(where)} ORDER BY ordinal", params
        ).fetchall()
        ids = [r[0] for r in rows]
        metric_rows = (
            con.execute(
                f"SELECT run_id, question_file, metric, value FROM metrics "
                f"WHERE run_id IN ({', '.join('?' * len(ids))}) ORDER BY rowid",
                ids,
            ).fetchall()
            if ids
            else []
        )
    runs: list[dict[str, Any]] = []
    by_id: dict[str, dict[str, Any]] = {}
    for row in rows:
        run = dict(zip(RUN_COLUMNS, row, strict=True))
        run["config"] = json.loads(run["config"]) if run["config"] is not None else {}
        run["overrides"] = json.loads(run["overrides"]) if run["overrides"] is not None else {}
        run["metrics"] = {}
        runs.append(run)
        by_id[run["run_id"]] = run
    for run_id, qfile, name, value in metric_rows:
        by_id[run_id]["metrics"].setdefault(qfile, {})[name] = _metric_out(name, value)
    return runs


def load_results(db_path: str | Path, run_id: str) -> list[dict[str, Any]]:
    """The per-question rows of one run (every result column plus ``run_id``), in insertion order."""
    if not Path(db_path).exists():
        raise FolioError(str(db_path), f"unknown run id(s): {run_id}")
    with _connect(db_path) as con:
        if con.execute("SELECT count(*) FROM runs WHERE run_id = ?", [run_id]).fetchone() == (0,):
            raise FolioError(str(db_path), f"unknown run id(s): {run_id}")
        rows = con.execute(
            f"SELECT run_id, {', '.join(RESULT_COLUMNS)} FROM results WHERE run_id = ? ORDER BY rowid",
            [run_id],
        ).fetchall()
    return [dict(zip(("run_id", *RESULT_COLUMNS), row, strict=True)) for row in rows]


# --- presenting ----------------------------------------------------------------------------------------
LOWER_IS_BETTER: frozenset[str] = frozenset(
    {"unsupported_rate", "duplicate_rate", "fragment_rate", "short_line_rate"}
)
"""Rates where lower is better (with every ``*_ms``)."""
NEITHER: frozenset[str] = frozenset({"refusal_rate", "answer_words_p50"})
"""Metrics with no better direction in general (a refusal is right off-library only; words: shorter
reads faster but says less)."""


def is_rate(name: str) -> bool:
    """Whether a metric is a rate in 0..1 (hit@k, ask_hit@k, MRR, *_rate, containment, answer_in_text,
    first_citation_gold)."""
    return (
        name.startswith(("hit@", "ask_hit@", "mrr"))
        or name.endswith("rate")
        or "contain" in name
        or name in ("answer_in_text", "first_citation_gold")
    )


def _direction(name: str) -> int:
    """+1 when higher is better, -1 when lower is better, 0 when neither (counts and unknown metrics)."""
    if name.endswith("_ms") or name in LOWER_IS_BETTER:
        return -1
    if name in NEITHER:
        return 0
    return 1 if is_rate(name) else 0


def _number(value: Any) -> float | None:
    if isinstance(value, bool | int | float) and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    return None


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def comparison_table(runs: Sequence[Mapping[str, Any]], metrics: Sequence[str] | None = None) -> str:
    """A plain-text aligned table: one row per (run, question file), one column per metric.

    Numbers to 3 decimals (ints as ints, ``None`` as ``-``), then the cache counts ``executed/from_cache``
    and the seconds. The best value of each metric per question file is marked ``*`` (higher is better for
    ``hit@*``, ``mrr*``, ``*rate``, ``*contain*``, ``answer_in_text`` and ``first_citation_gold``; lower
    for ``*_ms`` and ``LOWER_IS_BETTER``; ``NEITHER`` and other metrics are not marked), only where at
    least two runs have a value; ties are all marked.
    """
    if not runs:
        return "(no runs)"
    table_rows = [
        (run, qfile, values) for run in runs for qfile, values in ((run.get("metrics") or {"-": {}}).items())
    ]
    if metrics is None:
        metrics = list(dict.fromkeys(name for _, _, values in table_rows for name in values))
    best: dict[tuple[str, str], float] = {}
    for name in metrics:
        direction = _direction(name)
        if not direction:
            continue
        groups: dict[str, list[float]] = {}
        for _, qfile, values in table_rows:
            number = _number(values.get(name))
            if number is not None:
                groups.setdefault(qfile, []).append(number)
        for qfile, numbers in groups.items():
            if len(numbers) >= 2:
                best[(qfile, name)] = max(numbers) if direction > 0 else min(numbers)

    header = [
        "run_id",
        "variant",
        "question_file",
        *(f"{m} " for m in metrics),
        "ingest_run/cached",
        "seconds",
    ]
    lines: list[list[str]] = []
    marked = False
    for run, qfile, values in table_rows:
        cells = [str(run.get("run_id", "-")), str(run.get("variant", "-")), qfile]
        for name in metrics:
            value = values.get(name)
            star = (qfile, name) in best and _number(value) == best[(qfile, name)]
            marked = marked or star
            cells.append(_fmt(value) + ("*" if star else " "))
        executed, from_cache = run.get("cache_executed"), run.get("cache_from_cache")
        cells.append(f"{_fmt(executed)}/{_fmt(from_cache)}")
        secs = run.get("seconds")
        cells.append(f"{secs:.1f}" if isinstance(secs, int | float) else "-")
        lines.append(cells)
    widths = [max(len(row[i]) for row in [header, *lines]) for i in range(len(header))]
    n_text = 3

    def render(cells: Sequence[str]) -> str:
        parts = [
            c.ljust(w) if i < n_text else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(parts).rstrip()

    out = [render(header), "  ".join("-" * w for w in widths), *(render(cells) for cells in lines)]
    if marked:
        out.append(
            "* best per question file (lower is better for *_ms, unsupported, duplicate, fragment and "
            "short-line rates, higher for other rates)"
        )
    return "\n".join(out)


def plot_runs(
    runs: Sequence[Mapping[str, Any]],
    path: str | Path,
    metrics: Sequence[str] = ("hit@1", "hit@5", "mrr@10"),
) -> Path:
    """A grouped bar chart (x = variants, one bar per metric, one subplot per question file) saved as PNG.

    Rate metrics share a 0..1 y axis; the title is the experiment name. Needs matplotlib (Agg, no display).
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise FolioError("--plot", "plotting needs matplotlib: pip install 'folio[plot]'") from exc
    if not runs:
        raise FolioError("--plot", "no runs to plot")
    qfiles = list(dict.fromkeys(q for run in runs for q in (run.get("metrics") or {})))
    present = [m for m in metrics if any(m in v for run in runs for v in (run.get("metrics") or {}).values())]
    if not qfiles or not present:
        raise FolioError("--plot", f"the runs have none of the metrics {', '.join(metrics)}")
    variants = [str(run.get("variant", run.get("run_id", "?"))) for run in runs]
    labels = [
        f"{v} ({run.get('run_id', i)})" if variants.count(v) > 1 else v
        for i, (v, run) in enumerate(zip(variants, runs, strict=True))
    ]
    width = 0.8 / len(present)
    fig = Figure(
        figsize=(min(16.0, max(5.0, 0.25 * len(runs) * len(present) + 2)) * len(qfiles), 5.0), dpi=100
    )
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(qfiles), squeeze=False)[0]
    for ax, qfile in zip(axes, qfiles, strict=True):
        for j, name in enumerate(present):
            heights = []
            for run in runs:
                number = _number((run.get("metrics") or {}).get(qfile, {}).get(name))
                heights.append(math.nan if number is None else number)
            xs = [i + (j - (len(present) - 1) / 2) * width for i in range(len(runs))]
            ax.bar(xs, heights, width=width, label=name)
        ax.set_xticks(range(len(runs)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(qfile, fontsize=10)
        if all(is_rate(m) for m in present):
            ax.set_ylim(0, 1)
        else:
            ax.set_ylim(bottom=0)
        ax.grid(axis="y", alpha=0.3)
    axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    experiments = list(dict.fromkeys(str(run.get("experiment", "")) for run in runs if run.get("experiment")))
    fig.suptitle(", ".join(experiments) or "experiment")
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out
