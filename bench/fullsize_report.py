"""The fullsize bench's report: its figures as a markdown table and a latency plot (``viz/bench/``).

``fullsize_table`` lays out what ``bench.fullsize_bench.fullsize_bench`` measured (a part not run is
left out); ``fullsize_plot`` draws warm hybrid p50/p95 against the number of windows, the scaling
section's small-book libraries beside the index-level run. Config keys: none. Limitations: the
small-book points are the README's figures of 2026-11-23 (``SMALL_BOOK_ROWS``), not re-measured here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _ingest_rows(ingest: dict[str, Any]) -> list[tuple[str, str]]:
    rows = [
        (
            "real ingest: books / words / windows",
            f"{ingest['books']} / {ingest['words']:,} / {ingest['windows']:,}",
        ),
        ("real ingest wall; windows/s", f"{ingest['wall_s']:,} s; {ingest['ingest_windows_per_s']}"),
    ]
    if "raw_encoder" in ingest:
        raw = ingest["raw_encoder"]
        rows.append(
            (
                f"ingest / raw encoder windows/s (raw: {raw['books']} of the books' windows)",
                f"{ingest['ingest_windows_per_s']} / {raw['windows_per_s']} "
                f"(**{raw['ingest_over_raw']:.2f}x**)",
            )
        )
    if "eta_after_10pct" in ingest:
        e = ingest["eta_after_10pct"]
        rows.append(
            (
                "ETA after 10% of the words / final time",
                f"{e['predicted_total_s']:,} s / {e['actual_total_s']:,} s ({e['error']:+.1%})",
            )
        )
    rows.append(
        (
            "ingest peak RSS (all its processes) / library on disk",
            f"{ingest['peak_rss_mb']:,} MB / {ingest['library_disk_mb']:,} MB",
        )
    )
    return rows


def _index_rows(index: dict[str, Any], empty: Any) -> list[tuple[str, str]]:
    warm = index["warm"]
    return [
        (
            "index: windows / books / segments",
            f"{index['windows']:,} / {index['books']:,} / {index['segments']}",
        ),
        ("first hybrid search after open (fresh process)", f"{index['first_hybrid_after_open_s']} s"),
        ("warm hybrid p50 / p95", f"{warm['hybrid']['p50_ms']} / {warm['hybrid']['p95_ms']} ms"),
        ("warm lexical p50 / p95", f"{warm['lexical']['p50_ms']} / {warm['lexical']['p95_ms']} ms"),
        (
            "parts p50: query encoding / semantic index (vector given) / lexical index",
            f"{warm['query_encoding']['p50_ms']} / {warm['semantic_index']['p50_ms']} / "
            f"{warm['lexical_index']['p50_ms']} ms",
        ),
        (
            "parts p95: semantic index / lexical index",
            f"{warm['semantic_index']['p95_ms']} / {warm['lexical_index']['p95_ms']} ms",
        ),
        *(
            [("each book's best chunk (the router's search) p50 / p95", _p50_p95(warm["lexical_per_book"]))]
            if "lexical_per_book" in warm
            else []
        ),
        (
            "open files / RSS / disk",
            f"{index['open_files']} / {index['rss_mb']:,} MB / {index['disk_mb']:,} MB",
        ),
        *_ten_book_rows(index.get("against_ten_books"), f"{index['segments']} vector segment(s)"),
        ("add one full-length book: this library / an empty one", f"{index['add_one_book_s']} s / {empty} s"),
        ("remove that book", f"{index['remove_one_book_s']} s"),
        *_compact_rows(index),
    ]


def _ten_book_rows(ratio: dict[str, Any] | None, state: str) -> list[tuple[str, str]]:
    """The 2 M-window hybrid p50 against the 10-book library's, measured interleaved in one process."""
    if not ratio:
        return []
    return [
        (
            f"hybrid p50 / p95, this library ({state}) and 10 small books, interleaved; ratio of p50s",
            f"{_p50_p95(ratio['library'])}; {_p50_p95(ratio['ten_books'])}; **{ratio['p50_ratio']}x**",
        )
    ]


def _p50_p95(summary: dict[str, Any]) -> str:
    return f"{summary['p50_ms']} / {summary['p95_ms']} ms"


def _compact_rows(index: dict[str, Any]) -> list[tuple[str, str]]:
    if "compact" not in index:  # ``--fullsize-skip-compact``
        return []
    return [
        (
            f"compact {index['compact']['segments_before']} segments into one",
            f"{index['compact']['seconds']} s",
        ),
        (
            "after compaction: warm hybrid / lexical p50",
            f"{index['warm_after_compact']['hybrid']['p50_ms']} / "
            f"{index['warm_after_compact']['lexical']['p50_ms']} ms",
        ),
        *_ten_book_rows(index.get("against_ten_books_after_compact"), "compacted"),
    ]


def fullsize_table(result: dict[str, Any]) -> str:
    """The section's figures as a markdown table (what was measured; absent parts are left out)."""
    rows: list[tuple[str, str]] = []
    if result.get("real_ingest"):
        rows += _ingest_rows(result["real_ingest"])
    if result.get("index"):
        rows += _index_rows(result["index"], result.get("add_to_empty_s", "-"))
    serve = result.get("serve")
    if serve:
        rows.append(
            (
                "`folio serve` on it: answering after / first search / first ask",
                f"{serve['ready_s']} s / {serve['first_search_s']} s / {serve['first_ask_s']} s",
            )
        )
    dask = result.get("dask")
    if dask:
        rows.append(
            (
                f"{dask['books']} books: local executor / Dask LocalCluster of 2",
                f"{dask['local']['wall_s']} s / {dask['dask_2_workers']['wall_s']} s "
                f"({dask['dask_over_local']}x)",
            )
        )
        if "dask_over_local_against_raw" in dask:
            rows.append(
                (
                    "Dask / local, each against the raw encoder measured between its batches",
                    f"{dask['dask_2_workers']['raw_encoder']['ingest_over_raw']:.2f} / "
                    f"{dask['local']['raw_encoder']['ingest_over_raw']:.2f} "
                    f"({dask['dask_over_local_against_raw']}x)",
                )
            )
    return "\n".join(["| measure | value |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)])


def fullsize_plot(result: dict[str, Any], small_rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Warm hybrid p50/p95 against windows in the library (log x): the small-book libraries of the
    scaling section (``small_rows``: windows, p50, p95) and the index-level run, as PNG."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0, 4.0), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    points = [(r["windows"], r["p50_ms"], r["p95_ms"]) for r in small_rows]
    if result.get("index"):
        warm = result["index"]["warm"]["hybrid"]
        points.append((result["index"]["windows"], warm["p50_ms"], warm["p95_ms"]))
    points.sort()
    xs = [p[0] for p in points]
    ax.plot(xs, [p[1] for p in points], "o-", color="#c0504d", label="hybrid p50")
    ax.plot(xs, [p[2] for p in points], "s--", color="#c0504d", alpha=0.5, label="hybrid p95")
    index = result.get("index") or {}
    if "warm_after_compact" in index:  # the same library folded into one vector segment
        after = index["warm_after_compact"]["hybrid"]
        ax.plot([index["windows"]] * 2, [after["p50_ms"], after["p95_ms"]], "*", color="#4f81bd", ms=10)
        ax.plot([], [], "*", color="#4f81bd", label="after compaction: p50, p95")
    beside = index.get("against_ten_books")
    if beside:  # the 10-book library measured interleaved with it, in the same process
        ten = beside["ten_books"]
        ax.plot(
            [50, 50],
            [ten["p50_ms"], ten["p95_ms"]],
            "D",
            color="#9bbb59",
            label="10 books, measured beside it",
        )
    ax.set_xscale("log")
    ax.set_ylim(bottom=0)
    ax.set_xlabel("windows in the library")
    ax.set_ylabel("warm search latency, ms")
    ax.set_title("folio hybrid search: small books to the index-level run")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


SMALL_BOOK_ROWS = (  # the scaling section's figures (README, 2026-11-23): 10/100/1,000 books of 400 words
    {"windows": 50, "p50_ms": 22.3, "p95_ms": 33.1},
    {"windows": 500, "p50_ms": 23.1, "p95_ms": 34.1},
    {"windows": 5000, "p50_ms": 26.8, "p95_ms": 38.6},
)
