"""The encoder's windows: chunks and long queries are cut alike, and no query is silently truncated."""

from __future__ import annotations

import numpy as np

from folio.nodes.backends.encoder import text_windows, unit_means, window_ranges


def test_windows_cover_every_token_and_share_the_overlap():
    spans = window_ranges(600, 248, 32)
    assert spans[0] == (0, 248) and spans[-1][1] == 600
    assert all(spans[i + 1][0] == spans[i][1] - 32 for i in range(len(spans) - 1))
    assert window_ranges(0, 10, 2) == [] and window_ranges(7, 10, 2) == [(0, 7)]


def test_a_text_that_fits_one_window_is_kept_whole():
    text = "one two three"
    assert text_windows(text, [(0, 3), (4, 7), (8, 13)], 8) == [text]


def test_a_long_text_is_cut_into_windows_that_reach_its_end():
    words = [f"w{i}" for i in range(50)]
    text = " ".join(words)
    offsets, at = [], 0
    for w in words:
        offsets.append((at, at + len(w)))
        at += len(w) + 1
    parts = text_windows(text, offsets, 20)
    assert len(parts) > 1 and parts[0].startswith("w0 ") and parts[-1].endswith("w49")
    assert all(len(p.split()) <= 20 for p in parts)


def test_a_long_query_is_the_mean_of_its_windows_not_its_first_window(encoder):
    sentence = "The Queen of Hearts shouted for the Knave's head while the jury wrote on their slates. "
    tail = "Far away a ship with white sails crossed the cold northern sea towards the whaling grounds. "
    query = sentence * 18 + tail * 8
    assert encoder.count_tokens(query) > encoder.window_tokens
    parts = text_windows(query, encoder.token_offsets(query), encoder.window_tokens)
    vector = encoder.encode_query(query)
    expected = unit_means(encoder.encode(parts), np.zeros(len(parts), dtype=np.int64), 1)[0]
    assert np.allclose(vector, expected, atol=1e-5)
    first_window_only = encoder.encode([parts[0]])[0]
    assert float(vector @ first_window_only) < 0.99  # the tail counts: no silent truncation
