"""The bench's polling (`bench.waiting`), which the tests' wait_for builds on."""

from __future__ import annotations

from bench.waiting import came_true, sample_until


def test_came_true_says_whether_the_condition_came_true_in_time() -> None:
    answers = iter([False, False, True])
    assert came_true(lambda: next(answers), interval_s=0) is True
    assert came_true(lambda: False, timeout_s=0.05, interval_s=0.01) is False


def test_sample_until_answers_the_last_sample_done_or_not() -> None:
    counter = iter(range(100))
    assert sample_until(lambda: next(counter), lambda n: n >= 3, interval_s=0) == 3
    samples: list[int] = []

    def sample() -> int:
        samples.append(len(samples))
        return samples[-1]

    last = sample_until(sample, lambda n: n < 0, timeout_s=0.05, interval_s=0.01)
    assert last == samples[-1]
