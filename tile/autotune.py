"""`@tile.autotune` and `@tile.heuristics`, with Triton 3.6's names and semantics.

    @tile.autotune(configs=[tile.Config({"BLOCK": 128}, num_warps=4),
                            tile.Config({"BLOCK": 256}, num_warps=8)], key=["n"])
    @tile.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr): ...

On the GPU, the first launch for each value of the `key` arguments (and of the constexpr
arguments the call passes, `_key`) times every config (after `prune_configs_by`) and
remembers the fastest (the near-fastest timed in two more passes, reverse order then forward,
keeping each one's median of three, so a clock drift does not pick; `_retime_close`); later
launches with that key reuse it. In the
CPU interpreter timing means nothing, so the first config is used (unless `do_bench` is
given). A config that fails to compile or launch is skipped; when all fail, the error names
each config and its own error.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from typing import Any, Callable, Dict, List, Optional

from shared_codegen.frontend.jit import JITFunction


class Config:
    """One candidate: constexpr values plus launch options."""

    def __init__(self, kwargs: Dict[str, Any], num_warps: int = 4, num_stages: int = 3,
                 num_ctas: int = 1, maxnreg: Optional[int] = None, pre_hook=None,
                 ir_override=None):
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook
        if ir_override is not None:
            raise ValueError("Config: ir_override (replacing a stage's IR with a file) is not "
                             "supported")
        self.ir_override = None

    def all_kwargs(self) -> Dict[str, Any]:
        """The meta-parameters and the launch options that are set (Triton's order)."""
        out = dict(self.kwargs)
        for name in ("num_warps", "num_ctas", "num_stages", "maxnreg"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def __str__(self):
        items = [f"{k}: {v}" for k, v in self.kwargs.items()]
        items += [f"num_warps: {self.num_warps}", f"num_ctas: {self.num_ctas}",
                  f"num_stages: {self.num_stages}", f"maxnreg: {self.maxnreg}"]
        return ", ".join(items)

    def __repr__(self):
        items = ", ".join(f"{k}: {v}" for k, v in self.kwargs.items())
        return f"Config({items}, num_warps={self.num_warps}, num_stages={self.num_stages})"


class AutotuneError(RuntimeError):
    """No config could run, or pruning left none; the message lists each config's error."""


class Autotuner:
    """Triton 3.6's Autotuner: see `autotune` for the parameters."""

    def __init__(self, fn, arg_names: List[str], configs: List[Config], key: List[str],
                 reset_to_zero=None, restore_value=None, prune_configs_by=None, warmup=25,
                 rep=100, do_bench=None, pre_hook=None, post_hook=None):
        if not configs:
            raise ValueError("autotune needs at least one Config")
        self.fn = fn
        self.arg_names = arg_names
        self.configs = configs
        self.key = list(key)
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        prune = dict(prune_configs_by or {})
        unknown = sorted(set(prune) - {"early_config_prune", "perf_model", "top_k"})
        if unknown:
            raise ValueError(f"prune_configs_by: unknown keys {unknown}; expected "
                             f"'early_config_prune', 'perf_model' and 'top_k'")
        self.early_config_prune = prune.get("early_config_prune")
        self.perf_model = prune.get("perf_model")
        self.configs_top_k = prune.get("top_k", 1.0)
        self.warmup = warmup
        self.rep = rep
        self.user_do_bench = do_bench
        self.user_pre_hook = pre_hook
        self.user_post_hook = post_hook
        self.cache: Dict[tuple, Config] = {}
        self.best_config: Optional[Config] = None
        self.bench_results: Dict[tuple, Dict[str, float]] = {}
        self.configs_timings: Dict[Config, Any] = {}
        self.bench_time = 0.0
        self.__name__ = getattr(fn, "__name__", "kernel")
        # Constexpr parameters the configs do not set, in parameter order (`_key`).
        config_names = {k for c in configs for k in c.kwargs}
        jitted = fn
        while not hasattr(jitted, "constexpr_names") and hasattr(jitted, "fn"):
            jitted = jitted.fn  # through @heuristics
        self.constexpr_names = [n for n in arg_names
                                if n in getattr(jitted, "constexpr_names", ()) and
                                n not in config_names]
        strangers = [k for k in self.key if k not in arg_names]
        if strangers:
            # Triton leaves key names that are not parameters out of the key (tutorial 08's
            # 'gropup_c_ptrs' typo); so do we, but say so.
            warnings.warn(f"autotune key names {strangers} are not parameters of "
                          f"{self.__name__} ({', '.join(arg_names)}); they are left out of "
                          f"the key", UserWarning, stacklevel=3)
        for what, names in (("reset_to_zero", self.reset_to_zero),
                            ("restore_value", self.restore_value)):
            missing = [k for k in names if k not in arg_names]
            if missing:
                raise ValueError(f"autotune {what} names {missing} are not parameters of "
                                 f"{self.__name__} ({', '.join(arg_names)})")

    def __getitem__(self, grid):
        def launcher(*args, **kwargs):
            return self.run(*args, grid=grid, **kwargs)

        return launcher

    def _named(self, args, kwargs):
        named = dict(zip(self.arg_names, args))
        named.update(kwargs)
        return named

    def _key(self, named) -> tuple:
        # Triton's key: the key arguments' values, then the dtype of every array argument.
        key = [_key_value(named[k]) for k in self.key if k in named]
        key += [str(v.dtype) for k, v in named.items()
                if k in self.arg_names and hasattr(v, "dtype") and hasattr(v, "shape")]
        # Then the constexpr arguments the call passes that the key does not name. Triton
        # leaves them out, so one pick serves kernels that a constexpr makes different: in
        # tutorial 06 the causal forward (STAGE=3) reused the config timed for STAGE=1, and at
        # 16k tokens the two want different tiles. Results are the same either way; only
        # the config (the speed) can differ, at the cost of a tuning per specialization.
        key += [(k, _hashable(_key_value(named[k]))) for k in self.constexpr_names
                if k in named and k not in self.key]
        return tuple(key)

    def run(self, *args, grid, interpret=None, warmup=False, **kwargs):
        named = self._named(args, kwargs)
        key = self._key(named)
        config = self.cache.get(key)
        if config is None:
            positional = dict(zip(self.arg_names, args))
            launch_kwargs = dict(kwargs, grid=grid, warmup=warmup)
            candidates = self.prune_configs(positional, launch_kwargs)
            if len(candidates) == 1 or not self._times(named, interpret):
                config = candidates[0]
            else:
                config = self._tune(candidates, args, kwargs, grid, key)
                self._reset(named)
            self.cache[key] = config
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**named, **config.all_kwargs()})
        merged = self._merge(kwargs, config)
        if interpret is None and not warmup and isinstance(self.fn, JITFunction):
            # The launch fast path (shared_codegen/frontend/fastpath.py): once the chosen
            # config's variant is compiled, a launch skips the full argument binding.
            if merged.get("num_ctas") == 1:
                del merged["num_ctas"]
            return self.fn[grid](*args, **merged)
        return self.fn.run(*args, grid=grid, interpret=interpret, warmup=warmup, **merged)

    def _merge(self, kwargs, config: Config):
        clash = [k for k in config.kwargs if k in kwargs]
        if clash:
            raise ValueError(f"conflicting meta-parameters {clash}: they are given at launch "
                             "and by the autotuner's configs")
        merged = dict(kwargs)
        merged.update(config.kwargs)
        merged["num_warps"] = config.num_warps
        merged["num_stages"] = config.num_stages
        # Passed on so the launch reports what it cannot honour (num_ctas > 1, maxnreg).
        merged["num_ctas"] = config.num_ctas
        if config.maxnreg is not None:
            merged["maxnreg"] = config.maxnreg
        return merged

    def prune_configs(self, positional: Dict[str, Any], kwargs: Dict[str, Any]) -> List[Config]:
        """Triton's pruning: `early_config_prune(configs, named_args, **kwargs)` with the
        positional arguments by name and the launch's keyword arguments (`grid` and `warmup`
        included), then the `top_k` configs `perf_model(**args, **kwargs, **config)` rates
        fastest."""
        configs = list(self.configs)
        if self.early_config_prune is not None:
            configs = list(self.early_config_prune(configs, positional, **kwargs))
            if not configs:
                raise AutotuneError(f"{self.__name__}: no autotune configs left after pruning; "
                                    f"early_config_prune must return at least one config")
        if self.perf_model is not None:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = int(len(self.configs) * top_k)
            elif isinstance(top_k, bool) or not isinstance(top_k, int):
                raise TypeError(f"prune_configs_by: top_k must be a float <= 1.0 or an int, "
                                f"got {top_k!r}")
            if len(configs) > top_k:
                estimate = {c: self.perf_model(**positional, **kwargs, **c.all_kwargs())
                            for c in configs}
                configs = sorted(configs, key=estimate.get)[:top_k]
        return configs

    def _times(self, named, interpret) -> bool:
        """Whether configs are timed: on the GPU, or anywhere with the user's `do_bench`. In
        the CPU interpreter a time means nothing, so the first config is used."""
        if self.user_do_bench is not None:
            return True
        if interpret:
            return False
        from shared_codegen import config as sc_config
        from shared_codegen.frontend.launch import _is_host_array
        from shared_codegen.runtime.driver import has_gpu

        if sc_config.get("SC_INTERPRET") or any(map(_is_host_array, named.values())):
            return False
        return has_gpu()

    # ---- timing --------------------------------------------------------------------------
    def _pre_hook(self, named) -> Dict[str, Any]:
        for n in self.reset_to_zero:
            _zero(named[n])
        return {n: _copy(named[n]) for n in self.restore_value}

    def _post_hook(self, named, saved) -> None:
        for n, value in saved.items():
            _restore(named[n], value)

    def _reset(self, named) -> None:
        # After timing, the real launch starts from zeroed reset_to_zero arguments too.
        for n in self.reset_to_zero:
            _zero(named[n])

    def _tune(self, candidates, args, kwargs, grid, key) -> Config:
        named = self._named(args, kwargs)
        bench = self.user_do_bench or _default_bench(self.warmup, self.rep)
        verbose = _print_autotuning()
        timings: Dict[Config, Any] = {}
        errors: Dict[Config, BaseException] = {}
        start = time.time()
        for i, config in enumerate(candidates):
            call = self._kernel_call(config, args, kwargs, grid, named)
            try:
                timings[config] = bench(call, quantiles=(0.5, 0.2, 0.8))
            except Exception as exc:  # a config that does not compile or fit: skip it
                errors[config] = exc
                timings[config] = float("inf")
            if verbose:
                outcome = (f"failed: {_one_line(errors[config])}" if config in errors
                           else f"{_first(timings[config]):.4f} ms")
                print(f"autotuning {self.__name__} for key {key}: config {i + 1}/"
                      f"{len(candidates)} ({config}): {outcome}", file=sys.stderr)
        if self.user_do_bench is None:
            again = self._retime_close(candidates, timings, bench, args, kwargs, grid, named)
            if verbose and again:
                print(f"autotuning {self.__name__} for key {key}: timed the {again} configs "
                      f"within {RETIME_WITHIN:g}x of the best in {RETIME_PASSES} more passes, "
                      f"reverse order first",
                      file=sys.stderr)
        self.bench_time = time.time() - start
        self.configs_timings = timings
        self.bench_results[key] = {repr(c): _first(t) for c, t in timings.items()}
        best = min(timings, key=lambda c: _first(timings[c]))
        if len(errors) == len(candidates):
            lines = "\n".join(f"  {c!r}: {_describe(e)}" for c, e in errors.items())
            raise AutotuneError(f"no autotune config of {self.__name__} could run (key "
                                f"{key}); each config's error:\n{lines}") \
                from errors[candidates[-1]]
        if verbose:
            print(f"autotuning {self.__name__} for key {key}: picked {best} after "
                  f"{self.bench_time:.2f} s", file=sys.stderr)
        return best

    def _retime_close(self, candidates, timings, bench, args, kwargs, grid, named) -> int:
        """Configs timed first and last ran seconds apart, and a GPU's clock drifts under
        sustained load (the H100 lowers it as it heats, and at its power cap kernels that do
        the same work run alike), enough to reorder configs a few percent apart: at
        16k-token attention, one run of tutorial 06 picked BLOCK_N=64 / 4 warps and the next
        128 / 8, 16% faster at a fixed clock. So with the default `do_bench` (a user's is
        trusted as given, as Triton does), the configs within `RETIME_WITHIN` of the best
        are timed in `RETIME_PASSES` more passes, alternating reverse and forward order, and
        each keeps the median of its times: a drift that favoured the early configs in one
        pass favours the late ones in the next, and one disturbed pass does not pick."""
        first = {c: _first(timings[c]) for c in candidates if timings[c] != float("inf")}
        if not first:
            return 0
        best = min(first.values())
        close = [c for c in candidates if c in first and first[c] <= best * RETIME_WITHIN]
        if len(close) < 2:
            return 0
        times = {c: [first[c]] for c in close}
        for number in range(RETIME_PASSES):
            for config in (reversed(close) if number % 2 == 0 else close):
                times[config].append(_first(bench(
                    self._kernel_call(config, args, kwargs, grid, named),
                    quantiles=(0.5, 0.2, 0.8))))
        for config in close:
            rest = list(timings[config][1:]) if isinstance(timings[config], (list, tuple)) \
                else []
            timings[config] = [statistics.median(times[config])] + rest
        return len(close)

    def _kernel_call(self, config, args, kwargs, grid, named):
        full = {**named, **config.all_kwargs()}

        def call():
            if config.pre_hook is not None:
                config.pre_hook(full)
            if self.user_pre_hook is not None:
                self.user_pre_hook(full)
            saved = self._pre_hook(named)
            try:
                self.fn.run(*args, grid=grid, **self._merge(kwargs, config))
            except Exception as exc:
                if self.user_post_hook is not None:
                    self.user_post_hook(full, exception=exc)
                raise
            finally:
                self._post_hook(named, saved)
            if self.user_post_hook is not None:
                self.user_post_hook(full, exception=None)

        return call


def _print_autotuning() -> bool:
    from shared_codegen import config as sc_config
    return bool(sc_config.get("SC_PRINT_AUTOTUNING") or
                sc_config.get("TRITON_PRINT_AUTOTUNING"))


# Configs within this factor of the best first-pass time are timed again, in this many more
# passes of alternating order (`Autotuner._retime_close`).
RETIME_WITHIN = 1.15
RETIME_PASSES = 2


def _first(timing) -> float:
    return timing[0] if isinstance(timing, (list, tuple)) else timing


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    body = text.replace("\n", "\n    ")
    return f"{type(exc).__name__}: {body}"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _zero(x) -> None:
    if hasattr(x, "zero_"):
        x.zero_()
    else:
        x[...] = 0


def _copy(x):
    return x.clone() if hasattr(x, "clone") else x.copy()


def _restore(x, saved) -> None:
    if hasattr(x, "copy_"):
        x.copy_(saved)
    else:
        x[...] = saved


def _default_bench(warmup, rep):
    def bench(call, quantiles):
        from tile.testing import do_bench
        return do_bench(call, warmup=warmup, rep=rep, quantiles=quantiles)
    return bench


def _cudagraph_bench(rep):
    def bench(call, quantiles):
        from tile.testing import do_bench_cudagraph
        return do_bench_cudagraph(call, rep=rep, quantiles=quantiles)
    return bench


def _key_value(v):
    if hasattr(v, "dtype") and hasattr(v, "shape"):
        return (str(v.dtype),)
    return v


def _hashable(v):
    """`v`, or its repr when it cannot be a dict key (a constexpr list, say)."""
    try:
        hash(v)
    except TypeError:
        return repr(v)
    return v


def autotune(configs: List[Config], key: List[str], prune_configs_by=None, reset_to_zero=None,
             restore_value=None, pre_hook=None, post_hook=None, warmup=25, rep=100,
             use_cuda_graph=False, do_bench=None, cache_results=False):
    """Decorator: pick the fastest of `configs` for each value of the `key` arguments.

    - `prune_configs_by`: {'early_config_prune': f(configs, named_args, **kwargs) -> configs,
      'perf_model': f(**args, **kwargs, **config) -> estimated time, 'top_k': how many of
      the best-rated to time (an int, or a fraction of the configs)}.
    - `reset_to_zero`: arguments zeroed before each timed run (and before the real launch).
    - `restore_value`: arguments copied before each timed run and restored after it.
    - `pre_hook(args)` / `post_hook(args, exception)`: called around each timed run.
    - `do_bench(fn, quantiles)`: the timer (default `tile.testing.do_bench`); given one,
      configs are timed with it even in the CPU interpreter.
    - SC_PRINT_AUTOTUNING=1 (or TRITON_PRINT_AUTOTUNING=1) prints each config's time or
      error and the pick to stderr.

    If every config fails, the error lists each config's exception. `cache_results`
    (Triton's on-disk cache of tuning results) is accepted; results are kept in memory only."""
    if use_cuda_graph and do_bench is None:
        do_bench = _cudagraph_bench(rep)

    def decorate(fn):
        names = list(getattr(fn, "arg_names", []))
        return Autotuner(fn, names, configs, key, reset_to_zero, restore_value,
                         prune_configs_by, warmup, rep, do_bench, pre_hook, post_hook)

    return decorate


class Heuristics:
    def __init__(self, fn, values: Dict[str, Callable]):
        self.fn = fn
        self.values = values
        self.arg_names = list(getattr(fn, "arg_names", []))
        self.__name__ = getattr(fn, "__name__", "kernel")

    def __getitem__(self, grid):
        def launcher(*args, **kwargs):
            return self.run(*args, grid=grid, **kwargs)

        return launcher

    def run(self, *args, grid, **kwargs):
        named = dict(zip(self.arg_names, args))
        named.update(kwargs)
        for name, rule in self.values.items():
            kwargs[name] = rule(named)
            named[name] = kwargs[name]
        return self.fn.run(*args, grid=grid, **kwargs)


def heuristics(values: Dict[str, Callable]):
    """Decorator: compute meta-parameters from the other arguments (`{'BLOCK': fn(args)}`)."""

    def decorate(fn):
        return Heuristics(fn, values)

    return decorate
