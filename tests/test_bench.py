"""Measurement helpers: latency, memory growth and the machine manifest."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch
from helpers import HANG_GUARD, REPO

from compress.bench import (
    Timing,
    cpu_features,
    default_threads,
    fixed_threads,
    git_commit,
    git_dirty,
    manifest,
    package_versions,
    peak_memory_bytes,
    rss_bytes,
    time_call,
)
from compress.bench.machine import CPU_FEATURES
from compress.errors import CompressError

MB = 1024 * 1024


def test_time_call_counts_runs_and_never_reports_less_than_the_sleep():
    calls = []

    def sleep_2ms():
        calls.append(None)
        time.sleep(0.002)

    timing = time_call(sleep_2ms, batch_size=8, warmup=3, repeats=10)
    assert len(calls) == 3 + 10
    assert timing.runs == 10
    assert timing.batch_size == 8
    assert timing.p50_ms >= 2.0  # sleep waits at least as long as asked; no upper bound on a busy machine
    assert timing.p90_ms >= timing.p50_ms
    assert timing.mean_ms >= 2.0
    assert timing.throughput == pytest.approx(8 / (timing.p50_ms / 1000))
    assert timing.to_dict()["throughput"] == timing.throughput
    assert json.loads(json.dumps(timing.to_dict()))["runs"] == 10


def test_time_call_keeps_going_until_min_seconds():
    calls = []
    start = time.perf_counter()
    timing = time_call(lambda: calls.append(None), batch_size=1, warmup=0, repeats=1, min_seconds=0.05)
    assert time.perf_counter() - start >= 0.05
    assert timing.runs == len(calls)
    assert timing.runs > 1


@pytest.mark.parametrize(
    "kwargs", [{"warmup": -1}, {"repeats": 0}, {"batch_size": 0}, {"min_seconds": -0.1}],
)
def test_time_call_rejects_bad_arguments(kwargs):
    args = {"batch_size": 1, **kwargs}
    with pytest.raises(ValueError):
        time_call(lambda: None, **args)


def test_throughput_follows_the_median():
    assert Timing(p50_ms=4.0, p90_ms=5.0, mean_ms=4.2, runs=3, batch_size=16).throughput == 4000.0


def test_fixed_threads_sets_and_restores():
    before = torch.get_num_threads()
    wanted = 1 if before != 1 else 2
    with fixed_threads(wanted):
        assert torch.get_num_threads() == wanted
    assert torch.get_num_threads() == before
    with pytest.raises(RuntimeError), fixed_threads(wanted):
        raise RuntimeError("restored even on error")
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError):
        with fixed_threads(0):
            pass
    assert 1 <= default_threads() <= 4


def test_peak_memory_sees_a_64mb_array_and_not_a_no_op(monkeypatch):
    from compress.bench import memory

    read, allocated, sampled = memory.rss_bytes, threading.Event(), threading.Event()

    def reading() -> int:   # the sampler's reading, marked when it began after the array was made
        after = allocated.is_set()
        value = read()
        if after:
            sampled.set()
        return value

    monkeypatch.setattr(memory, "rss_bytes", reading)

    def hold_64mb():
        array = np.ones(64 * MB, dtype=np.uint8)  # np.ones writes every page, so it is resident
        allocated.set()
        assert sampled.wait(HANG_GUARD)   # held until the sampler has read the memory once (however long that takes)
        allocated.clear()
        return int(array[-1])

    assert rss_bytes() > 0
    assert peak_memory_bytes(hold_64mb) >= 32 * MB
    assert peak_memory_bytes(lambda: None) < 16 * MB


def test_peak_memory_rejects_a_non_positive_interval():
    with pytest.raises(ValueError):
        peak_memory_bytes(lambda: None, interval=0)


def test_cpu_features_and_packages():
    features = cpu_features()
    assert set(features) == set(CPU_FEATURES)
    assert all(isinstance(value, bool) for value in features.values())
    versions = package_versions(("torch", "surely-not-an-installed-package"))
    assert versions["torch"] == str(torch.__version__)
    assert versions["surely-not-an-installed-package"] is None


def test_manifest_is_json_and_records_the_run():
    data = json.loads(json.dumps(manifest(threads=3, seed=7, split_fingerprint="abc")))
    assert data["threads"] == 3
    assert data["seed"] == 7
    assert data["split_fingerprint"] == "abc"
    assert data["packages"]["torch"]
    assert set(data["cpu"]["features"]) == set(CPU_FEATURES)
    assert data["created"].endswith("+00:00")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not on PATH")
def test_git_commit_in_this_checkout(tmp_path):
    assert re.fullmatch(r"[0-9a-f]{40}", git_commit() or "")
    assert isinstance(git_dirty(), bool)
    assert git_commit(tmp_path) is None  # a fresh temporary directory is not a checkout
    assert git_dirty(tmp_path) is None


def test_measure_all_alternates_order_and_keeps_each_batch_sizes_fastest_pass(monkeypatch):
    """Batch 1 and the large batch each keep their fastest pass, even when those are different passes."""
    from compress.bench import speed

    calls: list[str] = []
    # Pass by pass: model a is fast at batch 1 in pass 0 and at the large batch in pass 2.
    times = {"a": [(1.0, 90.0), (5.0, 70.0), (3.0, 50.0)], "b": [(4.0, 40.0), (2.0, 60.0), (6.0, 80.0)]}

    def fake(predictor, data, seq_len, config):
        calls.append(predictor)
        latency, batch = times[predictor][calls.count(predictor) - 1]
        return {"latency_ms_p50": latency, "latency_ms_p90": latency + 0.5, "batch_ms_p50": batch,
                "throughput": 32 / batch * 1000, "peak_memory_bytes": int(batch)}

    monkeypatch.setattr(speed, "measure_speed", fake)
    result = speed.measure_all({"a": "a", "b": "b"}, None, 8, speed.SpeedConfig(threads=1), passes=3)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    a, b = result["a"], result["b"]
    assert (a["latency_ms_p50"], a["latency_ms_p90"], a["batch_ms_p50"]) == (1.0, 1.5, 50.0)
    assert a["throughput"] == 32 / 50.0 * 1000
    assert (b["latency_ms_p50"], b["batch_ms_p50"]) == (2.0, 40.0)
    assert a["peak_memory_bytes"] == 90 and b["passes"] == 3
    with pytest.raises(CompressError):
        speed.measure_all({"a": "a"}, None, 8, speed.SpeedConfig(threads=1), passes=0)


class _Clock:
    """A stand-in for the time module whose clock moves only when a fake model runs."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class _OneBatch:
    """A filled set of one batch, the batch being its size (what the fake models below take)."""

    def __init__(self, size: int) -> None:
        self.shape, self.batches, self.examples, self.padding, self.lengths = "filled", [size], size, 0.0, [8]

    def largest(self) -> int:
        return self.batches[0]


def test_timed_passes_loads_every_model_afresh_each_pass_in_a_new_order_and_times_from_the_same_calls(monkeypatch):
    """Three passes of five rounds: every pass uses the models its own load returned, in an order unlike the pass
    before it, rounds alternating forward and reverse; latency, the pass medians and the large batch all come from
    these calls (a fake clock moved by the models: b costs 3 ms in passes 0 and 2, 6 ms in pass 1)."""
    from compress.bench import speed, timing

    clock, log, loads = _Clock(), [], []
    monkeypatch.setattr(timing, "time", clock)
    monkeypatch.setattr(speed, "speed_batch", lambda data, batch, seq_len: batch)
    monkeypatch.setattr(speed, "batch_set", lambda data, shape, batch, seq_len: _OneBatch(batch))
    monkeypatch.setattr(speed, "peak_memory_bytes", lambda fn, device="cpu": (fn(), 100 + len(loads))[1])

    class Model:
        def __init__(self, name: str, number: int, ms: float) -> None:
            self.name, self.number, self.ms = name, number, ms

        def __call__(self, batch: int) -> None:
            log.append((self.number, self.name, batch))
            clock.now += self.ms * (10 if batch > 1 else 1) / 1000

    def load():
        number = len(loads)
        loads.append(number)
        return {"t": Model("t", number, 12.0), "a": Model("a", number, 4.0),
                "b": Model("b", number, 6.0 if number == 1 else 3.0)}

    config = speed.SpeedConfig(threads=1, repeats=15, batch_size=32, batch_repeats=4)
    result = speed.timed_passes(load, None, 8, config, passes=3, rounds=5)
    assert loads == [0, 1, 2]
    calls = 5 + speed.ROUND_WARMUP   # repeats // 3 timed calls, after the warm-up
    orders = []
    for number in range(3):
        batch_one = [name for n, name, batch in log if n == number and batch == 1]
        rounds = [batch_one[i:i + 3 * calls:calls] for i in range(0, len(batch_one), 3 * calls)]
        assert len(batch_one) == 5 * 3 * calls and all(batch_one[i:i + calls] == [batch_one[i]] * calls
                                                       for i in range(0, len(batch_one), calls))
        assert rounds[1] == rounds[0][::-1] and rounds[2] == rounds[0] and sorted(rounds[0]) == ["a", "b", "t"]
        orders.append(rounds[0])
        # the large batch after the rounds: the peak memory call, then its timed calls
        assert [name for n, name, batch in log if n == number and batch == 32] == \
            [name for name in rounds[0] for _ in range(1 + 4)]
    assert orders[0] != orders[1] != orders[2] and orders == speed.pass_orders(["t", "a", "b"], 3)
    t, a, b = result["t"], result["a"], result["b"]
    assert np.array(t.rounds_ms) == pytest.approx(np.full((3, 5), 12.0))
    assert b.pass_medians == pytest.approx([3.0, 6.0, 3.0]) and b.latency_ms_p50 == pytest.approx(3.0)
    assert len(b.calls_ms) == 3 * 5 * 5 and b.batch_ms == pytest.approx([30.0, 60.0, 30.0])
    assert a.peak_memory_bytes == 103   # the largest of the passes'
    from compress.stats import pass_ratios
    assert pass_ratios(t.rounds_ms, b.rounds_ms) == pytest.approx([4.0, 2.0, 4.0])
    with pytest.raises(CompressError):
        speed.timed_passes(load, None, 8, config, passes=0)


def test_pass_orders_are_seeded_permutations_each_unlike_the_one_before():
    from compress.bench.speed import pass_orders

    names = ["teacher", "int8", "onnx"]
    orders = pass_orders(names, 6)
    assert orders == pass_orders(names, 6) and all(sorted(o) == sorted(names) for o in orders)
    assert all(a != b for a, b in itertools.pairwise(orders))
    assert pass_orders(["one"], 3) == [["one"]] * 3


@pytest.mark.parametrize("script", sorted(p.name for p in (REPO / "benchmarks").glob("*.py")))
def test_every_benchmark_script_answers_help(script):
    """A benchmark's imports follow the library as it moves (none is run by the suite at full size)."""
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / script), "--help"],
                          capture_output=True, text=True, timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout
