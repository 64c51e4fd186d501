from itertools import pairwise

import pytest

from folio.nodes.core.types import Chapter, FolioError, Manifest
from folio.nodes.ingest.chunking import _token_spans, chunk_size, chunks, windows


def _manifest(*texts: str) -> Manifest:
    chapters = tuple(Chapter(f"ch-{i}", i, f"Chapter {i}", t) for i, t in enumerate(texts))
    return Manifest("b-1", "T", "A", "en", "t.txt", "txt", "h", chapters)


def test_profiles_and_override():
    assert chunk_size("narrative") == 800
    assert chunk_size("technical") == 512
    assert chunk_size("poetry") == 1024
    assert chunk_size("narrative", 256) == 256


def test_unknown_profile_is_a_one_line_error():
    with pytest.raises(FolioError, match="unknown profile"):
        chunk_size("sonnet")


def test_token_spans_overlap_and_cover_everything():
    text = " ".join(f"w{i}" for i in range(100))
    offsets = [(m, m + len(f"w{i}")) for i, m in enumerate(_positions(text))]
    spans = _token_spans(offsets, text, size=30, overlap=3)
    assert spans[0] == (0, 30)
    assert spans[-1][1] == 100
    for (a0, a1), (b0, _) in pairwise(spans):
        assert b0 == a1 - 3  # 10% overlap
        assert a1 - a0 <= 30


def test_token_spans_snap_to_sentence_end():
    text = "aa bb cc dd ee ff gg hh ii. jj kk ll"
    spans = _token_spans(_word_offsets(text), text, size=10, overlap=0)
    first_end = _word_offsets(text)[spans[0][1] - 1][1]
    assert text[:first_end].endswith("ii.")


def test_chunks_round_trip_offsets_and_never_cross_chapters(encoder):
    long_text = " ".join(f"Sentence number {i} tells of the whale." for i in range(400))
    manifest = _manifest(long_text, "A short chapter.")
    result = chunks(manifest, encoder, 200, 0.1)
    by_id = {c.chapter_id: c.text for c in manifest.chapters}
    assert {c.chapter_id for c in result} == {"ch-0", "ch-1"}
    for chunk in result:
        assert by_id[chunk.chapter_id][chunk.start : chunk.end] == chunk.text
        assert chunk.n_tokens <= 200
        assert encoder.count_tokens(chunk.text) <= 200 + 2
    assert [c.ordinal for c in result] == list(range(len(result)))


def test_windows_fit_the_encoder_and_map_back_to_their_chunk(encoder):
    manifest = _manifest(" ".join(f"Ahab spoke to Starbuck about voyage {i}." for i in range(300)))
    result = chunks(manifest, encoder, 800, 0.1)
    ws = windows(result, encoder, 1000, 32)
    by_chunk = {c.chunk_id: c for c in result}
    text = manifest.chapters[0].text
    for w in ws:
        chunk = by_chunk[w.chunk_id]
        assert chunk.start <= w.start < w.end <= chunk.end
        assert text[w.start : w.end] == w.text
        assert encoder.count_tokens(w.text) + 2 <= encoder.max_seq_length  # never truncated
    for chunk in result:  # every token of every chunk is in some window
        covered = sorted((w.start, w.end) for w in ws if w.chunk_id == chunk.chunk_id)
        assert covered[0][0] == chunk.start and covered[-1][1] == chunk.end
        assert all(a[1] >= b[0] for a, b in pairwise(covered))


def _positions(text: str) -> list[int]:
    import re

    return [m.start() for m in re.finditer(r"\S+", text)]


def _word_offsets(text: str) -> list[tuple[int, int]]:
    import re

    return [m.span() for m in re.finditer(r"\w+|[^\w\s]", text)]


def test_window_size_is_the_configured_size_capped_by_the_encoder(encoder):
    manifest = _manifest(" ".join(f"Queequeg sharpened harpoon number {i}." for i in range(200)))
    result = chunks(manifest, encoder, 800, 0.1)
    small = windows(result, encoder, 120, 30)
    assert max(encoder.count_tokens(w.text) for w in small) <= 120 + 2
    assert len(small) > len(windows(result, encoder, 10_000, 30))  # capped at the encoder's window
