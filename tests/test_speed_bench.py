"""The speed bench's encoder comparison: same windows for both, agreement and speed-up reported."""

from __future__ import annotations

import time

import numpy as np

from bench.speed_bench import encoder_comparison


class _Stub:
    def __init__(self, vectors: np.ndarray, delay: float) -> None:
        self.vectors, self.delay, self.seen = vectors, delay, []

    def encode(self, texts, batch_size=32):
        self.seen.append(list(texts))
        time.sleep(self.delay)
        return self.vectors


def test_both_encoders_see_the_same_windows_and_agreement_is_the_mean_cosine():
    a = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    b = np.array([[1.0, 0.0], [2**-0.5, 2**-0.5]], dtype=np.float32)
    slow, fast = _Stub(a, 0.02), _Stub(b, 0.0)
    out = encoder_comparison(slow, fast, ["w1", "w2"], rounds=2)  # type: ignore[arg-type]
    assert slow.seen == fast.seen == [["w1", "w2"]] * 2
    assert out["windows"] == 2 and out["cosine_min"] == round(2**-0.5, 4)
    assert out["cosine_mean"] == round((1 + 2**-0.5) / 2, 4)
    assert out["speedup_wall"] > 1
