import numpy as np

from folio.nodes.backends.embedding_cache import EmbeddingCache
from folio.nodes.backends.encoder import unit_means
from folio.nodes.backends.progress import Progress
from folio.nodes.core.types import Window
from folio.nodes.ingest.embedding import _chunk_shares, window_vectors


class _Recorder(Progress):
    def __init__(self) -> None:
        self.total, self.done = 0.0, 0.0

    def add_total(self, n: float) -> None:
        self.total += n

    def advance(self, n: float) -> None:
        self.done += n


def _windows() -> tuple[Window, ...]:
    texts = ["The whale.", "Ahab raged at it.", "Starbuck doubted.", "Queequeg slept."]
    owners = ["k1", "k1", "k1", "k2"]
    return tuple(Window(i, c, 0, len(t), t) for i, (c, t) in enumerate(zip(owners, texts, strict=True)))


def test_each_window_counts_as_its_share_of_its_chunk():
    assert _chunk_shares(_windows()) == [1 / 3, 1 / 3, 1 / 3, 1.0]


def test_chunk_vector_is_the_normalised_mean_of_its_windows():
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], dtype=np.float32)
    means = unit_means(vectors, np.array([0, 0, 1]), 2)
    assert np.allclose(means[0], [2**-0.5, 2**-0.5])
    assert np.allclose(means[1], [2**-0.5, 2**-0.5])


def test_window_vectors_report_progress_in_chunks_and_reuse_the_cache(encoder, tmp_path):
    cache = EmbeddingCache(tmp_path / "emb")
    first = _Recorder()
    vectors = window_vectors(_windows(), encoder, cache, first, embedding_batch_size=2)
    assert (round(first.total, 6), round(first.done, 6)) == (2.0, 2.0)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    again = _Recorder()
    calls = []
    original = encoder.encode
    encoder.encode = lambda *a, **k: calls.append(a) or original(*a, **k)
    try:
        assert np.array_equal(
            window_vectors(_windows(), encoder, cache, again, embedding_batch_size=2), vectors
        )
    finally:
        encoder.encode = original
    assert calls == [] and round(again.done, 6) == 2.0
