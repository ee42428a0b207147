"""The kernel decorator: compiled code agrees with the Python form, compiles once across
threads, and keeps the function's name for tracebacks and profiles."""

from __future__ import annotations

import threading

import numpy as np

from kubeberth.state.jit import kernel


def _masked_sum(values: np.ndarray, mask: np.ndarray) -> int:
    total = 0
    for i in range(len(values)):
        if mask[i]:
            total += values[i]
    return total


compiled_sum = kernel(_masked_sum)


def test_compiled_kernel_returns_what_the_python_form_returns() -> None:
    rng = np.random.default_rng(7)
    for _ in range(20):
        values = rng.integers(-10**12, 10**12, size=int(rng.integers(0, 50)), dtype=np.int64)
        mask = rng.integers(0, 2, size=len(values)).astype(np.bool_)
        assert compiled_sum(values, mask) == _masked_sum(values, mask)


def test_threads_reaching_a_kernel_at_once_all_get_answers() -> None:
    fresh = kernel(_masked_sum)
    values = np.arange(100, dtype=np.int64)
    mask = values % 3 == 0
    answers: list[int] = []

    def run() -> None:
        answers.append(int(fresh(values, mask)))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert answers == [int(values[mask].sum())] * 4


def test_kernel_keeps_the_function_name() -> None:
    assert compiled_sum.__name__ == "_masked_sum"
