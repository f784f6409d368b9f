"""benchmarks/_bench.py's order of timed samples: a Williams design, so that over a whole
square every function runs once in every place and after every other function once, under
a relabelling that differs from call to call (a benchmark's rows) and repeats across reruns."""

import collections
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))

import _bench  # noqa: E402


@pytest.mark.parametrize("n", range(1, 11))
def test_williams_square_balances_places_and_predecessors(n):
    square = _bench.williams_square(n)
    assert len(square) == (2 * n if n % 2 else n)
    assert all(sorted(row) == list(range(n)) for row in square)
    places = collections.Counter((row[k], k) for row in square for k in range(n))
    assert len(places) == n * n and set(places.values()) == {len(square) // n}
    after = collections.Counter((row[k], row[k + 1]) for row in square for k in range(n - 1))
    assert len(after) == n * (n - 1)
    assert set(after.values()) <= {len(square) // n}


def test_balanced_rounds_run_each_name_once_a_round_in_orders_that_differ_by_call():
    names = ["ours", "copy", "cuDNN", "flash", "variant"]
    first = list(_bench.balanced_rounds(names, 10))
    rounds = [first[i:i + 5] for i in range(0, 50, 5)]
    assert all(sorted(r) == sorted(names) for r in rounds)
    places = collections.Counter((name, k) for r in rounds for k, name in enumerate(r))
    assert set(places.values()) == {2}  # 10 rounds = the whole square of 5: twice each place
    second = list(_bench.balanced_rounds(names, 10))
    assert second != first
    assert list(_bench.balanced_rounds(names, 10, seed=3)) == \
        list(_bench.balanced_rounds(names, 10, seed=3))


def test_settling_calls_follow_the_steady_call_time_not_the_first(monkeypatch):
    class Event:  # a fake CUDA clock that each call of a timed function moves on
        now = 0.0

        def __init__(self, enable_timing):
            self.at = None

        def record(self):
            self.at = Event.now

        def elapsed_time(self, end):
            return end.at - self.at

    class Torch:
        cuda = type("cuda", (), {"Event": Event, "synchronize": staticmethod(lambda: None)})

    calls = collections.Counter()

    def timed(name):  # 1 ms a call, but 10 ms for the one after the warm-up call
        def fn():
            calls[name] += 1
            Event.now += 10.0 if calls[name] == 2 else 1.0
        return fn
    counts = []
    real = _bench.settle_calls
    monkeypatch.setattr(_bench, "settle_calls",
                        lambda ms, settle_ms: counts.append(real(ms, settle_ms)) or counts[-1])
    _bench.interleaved_medians({"first": timed("first"), "second": timed("second")}, 2, Torch)
    assert counts == [20, 20]  # 20 ms of 1 ms calls each (the slow call alone would give 2)


class _FakeCuda:
    """torch.cuda for `_bench`'s timing on the CPU: events read a clock the timed functions
    advance (a function's cost grows as the run goes on, as a card's clock drops)."""

    def __init__(self):
        self.now = 0.0
        self.calls = 0
        fake = self

        class Event:
            def __init__(self, enable_timing=True):
                self.t = 0.0

            def record(self):
                self.t = fake.now

            def elapsed_time(self, end):
                return end.t - self.t

        self.Event = Event

    def synchronize(self):
        pass

    def timed(self, ms):
        def fn():
            self.calls += 1
            self.now += ms * (1.0 + self.calls / 1000.0)  # the clock drifts down
        return fn


def test_round_ratios_pair_each_round_and_interleaved_samples_keep_round_order():
    torch = type("torch", (), {})()
    torch.cuda = _FakeCuda()
    fns = {"ours": torch.cuda.timed(1.0), "ref": torch.cuda.timed(1.25)}
    times = _bench.interleaved_samples(fns, 6, torch, inner=2, settle_ms=0.0)
    assert [len(ts) for ts in times.values()] == [6, 6]
    assert times["ours"][-1] > 1.015 * times["ours"][0]  # the drift shows in the samples
    ratios = _bench.round_ratios(times, "ours", "ref")
    # Each round's two samples are neighbours in time: their ratio is 1.25 up to the drift
    # between them (a few calls of 1000), while the samples themselves drift by 1.5% or more.
    assert len(ratios["rounds"]) == 6
    assert 1.245 < ratios["low"] <= ratios["median"] <= ratios["high"] < 1.256, ratios
    assert _bench.interleaved_medians(fns, 6, torch, inner=2, settle_ms=0.0).keys() == \
        {"ours", "ref"}
