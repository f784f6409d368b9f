"""`tile.testing` (`triton.testing` after `import tile as triton`): benchmarking and comparison
helpers with Triton 3.6's names, parameters and defaults.

    ms = tile.testing.do_bench(lambda: kernel[grid](x, y, n))                 # mean, ms
    ms, lo, hi = tile.testing.do_bench(fn, quantiles=[0.5, 0.2, 0.8])

    @tile.testing.perf_report(tile.testing.Benchmark(x_names=["N"], x_vals=[1024, 4096],
                                                     line_arg="provider", line_vals=["tile"],
                                                     line_names=["tile"], plot_name="copy",
                                                     args={}))
    def bench(N, provider): ...
    bench.run(print_data=True)

Timing needs torch with CUDA (CUDA events, like Triton); `assert_close` and `perf_report`
work without a GPU. Differences from Triton: `perf_report` prints its table without pandas
when pandas is not installed (then `run(return_df=True)` returns a list of row dicts), and
plots only when asked to (`show_plots` or `save_path`), with matplotlib.
"""

from __future__ import annotations

import os
import statistics
import sys
from typing import Any, Dict, List, Sequence

__all__ = ["do_bench", "do_bench_cudagraph", "Benchmark", "Mark", "perf_report", "assert_close"]

_RETURN_MODES = ("min", "max", "mean", "median", "all")
# Triton flushes L2 between timed runs by writing a buffer larger than any GPU's L2.
_L2_FLUSH_BYTES = 256 * 1024 * 1024


def _torch_cuda(what: str):
    try:
        import torch
    except ImportError:
        raise RuntimeError(f"{what} times CUDA work with torch's CUDA events; install torch "
                           f"with CUDA support") from None
    if not torch.cuda.is_available():
        raise RuntimeError(f"{what} needs a CUDA GPU (torch.cuda.is_available() is False)")
    return torch


def _check_return_mode(return_mode: str, what: str) -> None:
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"{what}: return_mode must be one of {', '.join(_RETURN_MODES)}, got "
                         f"{return_mode!r}")


def _quantile(sorted_times: Sequence[float], q: float) -> float:
    # Linear interpolation between closest ranks (torch.quantile's default, which Triton uses).
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantiles must lie in [0, 1], got {q!r}")
    position = q * (len(sorted_times) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_times) - 1)
    return sorted_times[low] + (sorted_times[high] - sorted_times[low]) * (position - low)


def summarize(times: List[float], quantiles, return_mode: str):
    """What `do_bench` returns for the measured `times` (ms): the requested quantiles (a float
    when one is asked for, else a list), or the `return_mode` statistic."""
    ordered = sorted(times)
    if quantiles is not None:
        values = [_quantile(ordered, q) for q in quantiles]
        return values[0] if len(values) == 1 else values
    if return_mode == "all":
        return list(times)
    if return_mode == "min":
        return ordered[0]
    if return_mode == "max":
        return ordered[-1]
    if return_mode == "median":
        return statistics.median(ordered)
    return statistics.fmean(ordered)


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Time `fn()` on the GPU: estimate one call, run it for about `warmup` ms, then time
    about `rep` ms worth of calls, one CUDA-event pair each, flushing L2 before each. Returns
    milliseconds: the `return_mode` statistic ("min", "max", "mean", "median", "all"), or the
    given `quantiles`. `grad_to_none` tensors get `.grad = None` before each timed call."""
    _check_return_mode(return_mode, "do_bench")
    torch = _torch_cuda("do_bench")
    fn()
    torch.cuda.synchronize()
    flush = torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.int32, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate_ms = start.elapsed_time(end) / 5
    n_warmup = max(1, int(warmup / max(estimate_ms, 1e-6)))
    n_repeat = max(1, int(rep / max(estimate_ms, 1e-6)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        for x in grad_to_none or ():
            x.grad = None
        flush.zero_()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return summarize([s.elapsed_time(e) for s, e in zip(starts, ends)], quantiles, return_mode)


def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Like `do_bench`, but `fn` is captured in a CUDA graph replayed enough times to fill
    about `rep` ms, which removes launch overhead from the measurement. Each measurement is
    one replay of the whole graph divided by the calls in it. Runs on a side stream, as graph
    capture needs."""
    _check_return_mode(return_mode, "do_bench_cudagraph")
    torch = _torch_cuda("do_bench_cudagraph")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            fn()
        end.record()
        torch.cuda.synchronize()
        estimate_ms = start.elapsed_time(end) / 5
        calls = max(1, int(rep / max(estimate_ms, 1e-6)))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                for x in grad_to_none or ():
                    x.grad = None
                fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / calls)
    return summarize(times, quantiles, return_mode)


def _to_numpy(x):
    import numpy as np
    if hasattr(x, "detach"):  # a torch tensor, wherever it lives
        x = x.detach().cpu()
        if str(x.dtype) == "torch.bfloat16":
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def assert_close(x, y, atol=None, rtol=None, err_msg=""):
    """Assert `x` and `y` (numpy arrays, torch tensors or numbers) are elementwise close:
    |x - y| <= atol + rtol * |y|, with Triton's defaults atol=1e-2 and rtol=0. Booleans and
    integers compare exactly."""
    import numpy as np
    atol = 1e-2 if atol is None else atol
    rtol = 0.0 if rtol is None else rtol
    a, b = _to_numpy(x), _to_numpy(y)
    if a.dtype == np.bool_ or b.dtype == np.bool_:
        np.testing.assert_array_equal(a, b, err_msg=err_msg)
        return
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), atol=atol,
                               rtol=rtol, equal_nan=True, err_msg=err_msg)


class Benchmark:
    """One `perf_report` table: `x_names` share each value of `x_vals` (a value may also be a
    tuple, one entry per name); each of `line_vals` is passed as `line_arg` and gives the
    column `line_names[i]`; `args` are fixed keyword arguments."""

    def __init__(self, x_names, x_vals, line_arg, line_vals, line_names, plot_name, args,
                 xlabel="", ylabel="", x_log=False, y_log=False, styles=None):
        if len(line_vals) != len(line_names):
            raise ValueError(f"Benchmark: line_vals has {len(line_vals)} entries but "
                             f"line_names has {len(line_names)}")
        self.x_names = list(x_names)
        self.x_vals = list(x_vals)
        self.line_arg = line_arg
        self.line_vals = list(line_vals)
        self.line_names = list(line_names)
        self.plot_name = plot_name
        self.args = dict(args)
        self.xlabel, self.ylabel = xlabel, ylabel
        self.x_log, self.y_log = x_log, y_log
        self.styles = styles


class Mark:
    """What `perf_report` returns: `run(...)` evaluates the function on every point."""

    def __init__(self, fn, benchmarks):
        self.fn = fn
        self.benchmarks = benchmarks

    def _rows(self, bench: Benchmark, **kwargs) -> List[Dict[str, Any]]:
        rows = []
        for x in bench.x_vals:
            values = x if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
            if len(values) != len(bench.x_names):
                raise ValueError(f"Benchmark {bench.plot_name!r}: x value {x!r} has "
                                 f"{len(values)} entries for x_names {bench.x_names}")
            x_args = dict(zip(bench.x_names, values))
            row: Dict[str, Any] = dict(x_args)
            for value, name in zip(bench.line_vals, bench.line_names):
                result = self.fn(**x_args, **{bench.line_arg: value}, **bench.args, **kwargs)
                mean, low, high = (result if isinstance(result, (list, tuple))
                                   else (result, None, None))
                row[name], row[f"{name}-min"], row[f"{name}-max"] = mean, low, high
            rows.append(row)
        return rows

    def _run(self, bench: Benchmark, save_path, show_plots, print_data, return_df, **kwargs):
        rows = self._rows(bench, **kwargs)
        columns = bench.x_names + bench.line_names
        table = _table(rows, columns)
        if show_plots or save_path:
            _plot(bench, rows, save_path, show_plots)
        if print_data:
            print(f"{bench.plot_name}:")
            print(_format(table, columns))
        if save_path:
            with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w") as f:
                f.write(",".join(columns) + "\n")
                for row in rows:
                    f.write(",".join(_csv_cell(row[c]) for c in columns) + "\n")
        return table if return_df else None

    def run(self, show_plots=False, print_data=False, save_path="", return_df=False, **kwargs):
        """Evaluate every benchmark; extra keyword arguments go to the function."""
        benchmarks = [self.benchmarks] if isinstance(self.benchmarks, Benchmark) \
            else list(self.benchmarks)
        tables = [self._run(b, save_path, show_plots, print_data, return_df, **kwargs)
                  for b in benchmarks]
        if return_df:
            return tables[0] if isinstance(self.benchmarks, Benchmark) else tables
        return None


def _table(rows, columns):
    pandas = sys.modules.get("pandas")
    if pandas is None:
        try:
            import pandas
        except ImportError:
            return [{c: row[c] for c in columns} for row in rows]
    return pandas.DataFrame([{c: row[c] for c in columns} for row in rows], columns=columns)


def _format(table, columns) -> str:
    if not isinstance(table, list):
        return str(table)
    cells = [[str(c) for c in columns]] + [[_cell(row[c]) for c in columns] for row in table]
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(r, widths)) for r in cells)


def _cell(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _csv_cell(value) -> str:
    return f"{value:.1f}" if isinstance(value, float) else str(value)


def _plot(bench: Benchmark, rows, save_path, show_plots) -> None:
    import matplotlib.pyplot as plt
    plt.figure()
    ax = plt.subplot()
    x_name = bench.x_names[0]
    xs = [row[x_name] for row in rows]
    for i, name in enumerate(bench.line_names):
        color, style = (bench.styles[i] if bench.styles else (None, None))
        ax.plot(xs, [row[name] for row in rows], label=name, color=color, ls=style)
        low, high = [row[f"{name}-min"] for row in rows], [row[f"{name}-max"] for row in rows]
        if all(v is not None for v in low + high):
            ax.fill_between(xs, low, high, alpha=0.15, color=color)
    ax.legend()
    ax.set_xlabel(bench.xlabel or " = ".join(bench.x_names))
    ax.set_ylabel(bench.ylabel)
    ax.set_title(bench.plot_name)
    ax.set_xscale("log" if bench.x_log else "linear")
    ax.set_yscale("log" if bench.y_log else "linear")
    if save_path:
        plt.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
    if show_plots:
        plt.show()
    plt.close()


def perf_report(benchmarks):
    """Decorator: mark a function for benchmarking over `benchmarks` (one `Benchmark` or a
    list); call `.run(print_data=True)` on the result."""

    def decorate(fn):
        return Mark(fn, benchmarks)

    return decorate

