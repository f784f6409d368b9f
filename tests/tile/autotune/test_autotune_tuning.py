"""Autotuning as matmul and attention kernels use it: pruning with Triton's call signatures,
reset_to_zero / restore_value around timed runs, each failing config's own error, and the
progress lines. A `do_bench` stand-in times configs in the CPU interpreter."""

import numpy as np
import pytest

import tile
import tile.language as tl
from tile.autotune import AutotuneError


def fake_bench(times):
    """A `do_bench` that runs the call twice (as warmup and timing would) and reports the next
    of `times` for it."""
    pending = list(times)

    def bench(fn, quantiles):
        fn()
        fn()
        return [pending.pop(0), 0.0, 0.0]

    return bench


def add_one_kernel(configs, **options):
    @tile.autotune(configs=configs, key=["n"], **options)
    @tile.jit
    def add_one(x, total, n, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(x + offs, tl.load(x + offs, mask=mask) + 1, mask=mask)
        tl.atomic_add(total, tl.sum(tl.where(mask, 1, 0)))

    return add_one


CONFIGS = [tile.Config({"BLOCK": 16}), tile.Config({"BLOCK": 32}), tile.Config({"BLOCK": 64})]


def test_early_config_prune_gets_the_launch_keywords_like_triton():
    seen = {}

    def prune(configs, named_args, **kwargs):
        # Tutorial 06's pruner reads its keyword-passed sizes from kwargs.
        seen.update(named=sorted(named_args), kwargs=sorted(kwargs), n=kwargs["n"])
        return [c for c in configs if c.kwargs["BLOCK"] >= kwargs["n"]]

    kernel = add_one_kernel(CONFIGS, prune_configs_by={"early_config_prune": prune})
    x, total = np.zeros(20, np.float32), np.zeros(1, np.int32)
    kernel[(1,)](x, total, n=20)
    assert seen == {"named": ["total", "x"], "kwargs": ["grid", "n", "warmup"], "n": 20}
    assert kernel.best_config.kwargs == {"BLOCK": 32}
    assert x.tolist() == [1.0] * 20


def test_perf_model_keeps_the_top_k_rated_configs_for_timing():
    timed = []

    def model(**kwargs):
        return {16: 3.0, 32: 1.0, 64: 2.0}[kwargs["BLOCK"]]

    def bench(fn, quantiles):
        timed.append(len(timed))
        return 1.0 + len(timed)

    kernel = add_one_kernel(CONFIGS, prune_configs_by={"perf_model": model, "top_k": 2},
                            do_bench=bench)
    kernel[(1,)](np.zeros(8, np.float32), np.zeros(1, np.int32), 8)
    # The model ranks 32 then 64; both are timed and the first timed (32) is faster.
    assert timed == [0, 1] and kernel.best_config.kwargs == {"BLOCK": 32}


def test_reset_to_zero_and_restore_value_undo_the_timed_runs():
    kernel = add_one_kernel(CONFIGS, reset_to_zero=["total"], restore_value=["x"],
                            do_bench=fake_bench([3.0, 1.0, 2.0]))
    x = np.arange(10, dtype=np.float32)
    total = np.full(1, 100, np.int32)
    kernel[(1,)](x, total, 10)
    # Six timed launches happened; only the real one shows.
    assert kernel.best_config.kwargs == {"BLOCK": 32}
    assert x.tolist() == (np.arange(10) + 1).tolist()
    assert total.tolist() == [10]


def test_without_restore_value_the_timed_runs_show():
    kernel = add_one_kernel(CONFIGS[:2], do_bench=fake_bench([1.0, 2.0]))
    x = np.zeros(4, np.float32)
    kernel[(1,)](x, np.zeros(1, np.int32), 4)
    assert x.tolist() == [5.0] * 4  # 2 configs x 2 runs, plus the real launch


def limited_kernel():
    @tile.autotune(configs=[tile.Config({"BLOCK": 64}), tile.Config({"BLOCK": 128})],
                   key=["n"], do_bench=fake_bench([1.0, 1.0]))
    @tile.jit
    def limited(x, n, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK <= 32, "BLOCK too big")
        tl.store(x + tl.arange(0, BLOCK), 1.0)

    return limited


def test_when_every_config_fails_each_error_is_reported():
    kernel = limited_kernel()
    with pytest.raises(AutotuneError) as info:
        kernel[(1,)](np.zeros(128, np.float32), 128)
    line = next(i for i, text in enumerate(open(__file__), 1)
                if "tl.static_assert(BLOCK <= 32" in text)
    error = (f"CompilationError: {__file__}:{line}: static_assert failed: BLOCK too big\n"
             f"        tl.static_assert(BLOCK <= 32, \"BLOCK too big\")\n"
             f"        ^")
    assert str(info.value) == (
        "no autotune config of limited could run (key (128, 'float32')); each config's "
        "error:\n"
        f"  Config(BLOCK: 64, num_warps=4, num_stages=3): {error}\n"
        f"  Config(BLOCK: 128, num_warps=4, num_stages=3): {error}")


def test_a_failing_config_is_skipped_and_printed(monkeypatch, capsys):
    monkeypatch.setenv("SC_PRINT_AUTOTUNING", "1")

    @tile.autotune(configs=[tile.Config({"BLOCK": 64}), tile.Config({"BLOCK": 32})],
                   key=["n"], do_bench=fake_bench([0.5]))
    @tile.jit
    def limited(x, n, BLOCK: tl.constexpr):
        tl.static_assert(BLOCK <= 32, "BLOCK too big")
        tl.store(x + tl.arange(0, BLOCK), 1.0)

    x = np.zeros(32, np.float32)
    limited[(1,)](x, 32)
    assert limited.best_config.kwargs == {"BLOCK": 32} and x.tolist() == [1.0] * 32
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("autotuning limited for key (32, 'float32'): config 1/2 (BLOCK: "
                               "64, num_warps: 4, num_ctas: 1, num_stages: 3, maxnreg: None): "
                               "failed: CompilationError: ")
    assert lines[1] == ("autotuning limited for key (32, 'float32'): config 2/2 (BLOCK: 32, "
                        "num_warps: 4, num_ctas: 1, num_stages: 3, maxnreg: None): 0.5000 ms")
    assert lines[2].startswith("autotuning limited for key (32, 'float32'): picked BLOCK: 32, ")


def test_progress_lines_are_off_by_default(monkeypatch, capsys):
    monkeypatch.delenv("SC_PRINT_AUTOTUNING", raising=False)
    monkeypatch.delenv("TRITON_PRINT_AUTOTUNING", raising=False)
    kernel = add_one_kernel(CONFIGS[:2], do_bench=fake_bench([1.0, 2.0]))
    kernel[(1,)](np.zeros(4, np.float32), np.zeros(1, np.int32), 4)
    assert capsys.readouterr().err == ""


def test_pruning_to_nothing_is_an_error():
    kernel = add_one_kernel(CONFIGS, prune_configs_by={
        "early_config_prune": lambda configs, named, **kwargs: []})
    with pytest.raises(AutotuneError, match="add_one: no autotune configs left after pruning; "
                                            "early_config_prune must return at least one "
                                            "config"):
        kernel[(1,)](np.zeros(4, np.float32), np.zeros(1, np.int32), 4)


def test_restore_value_must_name_parameters():
    with pytest.raises(ValueError, match=r"autotune restore_value names \['y'\] are not "
                                         r"parameters of add_one"):
        add_one_kernel(CONFIGS, restore_value=["y"])


def test_config_all_kwargs_and_str_follow_triton():
    config = tile.Config({"BLOCK_M": 128}, num_warps=8, num_stages=4)
    assert config.all_kwargs() == {"BLOCK_M": 128, "num_warps": 8, "num_ctas": 1,
                                   "num_stages": 4}
    assert str(config) == ("BLOCK_M: 128, num_warps: 8, num_ctas: 1, num_stages: 4, "
                           "maxnreg: None")


def test_near_fastest_configs_are_timed_again_in_alternating_order(monkeypatch):
    # With the default do_bench (here a stand-in: the GPU's is not available), the configs
    # within 15% of the best are timed in two more passes, last first and then first first,
    # and each keeps the median of its three times: 32 looked faster in the first pass
    # (1.00 against 1.05 for 16) and in one of the others, 16 in the median (0.95 against
    # 1.10); 64 (2.0) is not timed again.
    import importlib
    autotune = importlib.import_module("tile.autotune")  # tile.autotune is the decorator
    order = []
    times = {16: [1.05, 0.9, 0.95], 32: [1.0, 1.2, 1.1], 64: [2.0]}

    def default_bench(warmup, rep):
        def bench(fn, quantiles):
            fn()
            config = kernel.timing_config
            order.append(config)
            return [times[config].pop(0), 0.0, 0.0]
        return bench

    monkeypatch.setattr(autotune, "_default_bench", default_bench)
    monkeypatch.setattr(autotune.Autotuner, "_times", lambda self, named, interpret: True)
    kernel = add_one_kernel(CONFIGS)
    original = kernel._kernel_call

    def kernel_call(config, *rest):
        call = original(config, *rest)

        def timed():
            kernel.timing_config = config.kwargs["BLOCK"]
            return call()
        return timed

    monkeypatch.setattr(kernel, "_kernel_call", kernel_call)
    kernel[(1,)](np.zeros(16, np.float32), np.zeros(1, np.int32), 16)
    assert order == [16, 32, 64, 32, 16, 16, 32]
    assert kernel.best_config.kwargs == {"BLOCK": 16}
    assert kernel.bench_results[next(iter(kernel.bench_results))] == {
        repr(CONFIGS[0]): pytest.approx(0.95), repr(CONFIGS[1]): pytest.approx(1.1),
        repr(CONFIGS[2]): 2.0}
