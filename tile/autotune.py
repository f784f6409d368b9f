"""`@tile.autotune` and `@tile.heuristics`, with Triton 3.6's names and semantics.

    @tile.autotune(configs=[tile.Config({"BLOCK": 128}, num_warps=4),
                            tile.Config({"BLOCK": 256}, num_warps=8)], key=["n"])
    @tile.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr): ...

On the GPU, the first launch for each value of the `key` arguments times every config (after
`prune_configs_by`) and remembers the fastest; later launches with that key reuse it. In the
CPU interpreter timing means nothing, so the first config is used.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional


class Config:
    """One candidate: constexpr values plus launch options."""

    def __init__(self, kwargs: Dict[str, Any], num_warps: int = 4, num_stages: int = 3,
                 num_ctas: int = 1, maxnreg: Optional[int] = None, pre_hook=None):
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def all_kwargs(self) -> Dict[str, Any]:
        out = dict(self.kwargs)
        out["num_warps"] = self.num_warps
        out["num_stages"] = self.num_stages
        return out

    def __repr__(self):
        items = ", ".join(f"{k}: {v}" for k, v in self.kwargs.items())
        return f"Config({items}, num_warps={self.num_warps}, num_stages={self.num_stages})"


class Autotuner:
    def __init__(self, fn, arg_names: List[str], configs: List[Config], key: List[str],
                 reset_to_zero=None, restore_value=None, prune_configs_by=None, warmup=5,
                 rep=20, do_bench=None):
        if not configs:
            raise ValueError("autotune needs at least one Config")
        self.fn = fn
        self.arg_names = arg_names
        self.configs = configs
        self.key = list(key)
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self.prune = prune_configs_by or {}
        self.warmup = warmup
        self.rep = rep
        self.cache: Dict[tuple, Config] = {}
        self.best_config: Optional[Config] = None
        self.bench_results: Dict[tuple, Dict[str, float]] = {}
        self.__name__ = getattr(fn, "__name__", "kernel")
        missing = [k for k in self.key if k not in arg_names]
        if missing:
            raise ValueError(f"autotune key names {missing} are not parameters of "
                             f"{self.__name__} ({', '.join(arg_names)})")

    def __getitem__(self, grid):
        def launcher(*args, **kwargs):
            return self.run(*args, grid=grid, **kwargs)

        return launcher

    def _named(self, args, kwargs):
        named = dict(zip(self.arg_names, args))
        named.update(kwargs)
        return named

    def run(self, *args, grid, interpret=None, **kwargs):
        named = self._named(args, kwargs)
        key = tuple(_key_value(named.get(k)) for k in self.key)
        config = self.cache.get(key)
        if config is None:
            candidates = self._pruned(named)
            if len(candidates) == 1 or not self._on_gpu(named, interpret):
                config = candidates[0]
            else:
                config = self._tune(candidates, args, kwargs, grid)
            self.cache[key] = config
        self.best_config = config
        if config.pre_hook is not None:
            config.pre_hook({**named, **config.all_kwargs()})
        return self.fn.run(*args, grid=grid, interpret=interpret, **self._merge(kwargs, config))

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

    def _pruned(self, named) -> List[Config]:
        configs = list(self.configs)
        early = self.prune.get("early_config_prune")
        if early is not None:
            configs = list(early(configs, named))
        model = self.prune.get("perf_model")
        top_k = self.prune.get("top_k")
        if model is not None and top_k:
            top_k = int(top_k * len(configs)) if isinstance(top_k, float) else int(top_k)
            configs = sorted(configs, key=lambda c: model(**named, **c.all_kwargs()))[:top_k]
        return configs or list(self.configs)

    def _on_gpu(self, named, interpret) -> bool:
        if interpret:
            return False
        from shared_codegen import config as sc_config
        from shared_codegen.frontend.launch import _is_host_array
        from shared_codegen.runtime.driver import has_gpu

        if sc_config.get("SC_INTERPRET") or any(map(_is_host_array, named.values())):
            return False
        return has_gpu()

    def _tune(self, candidates, args, kwargs, grid) -> Config:
        import torch

        named = self._named(args, kwargs)
        saved = {n: named[n].clone() for n in self.restore_value if n in named}
        timings = {}
        for config in candidates:
            def call():
                for n in self.reset_to_zero:
                    named[n].zero_()
                if config.pre_hook is not None:
                    config.pre_hook({**named, **config.all_kwargs()})
                self.fn.run(*args, grid=grid, **self._merge(kwargs, config))

            try:
                timings[config] = _bench(call, self.warmup, self.rep, torch)
            except Exception as exc:  # a config that does not compile or fit is skipped
                timings[config] = float("inf")
                if len(candidates) == 1:
                    raise exc
            for n, v in saved.items():
                named[n].copy_(v)
        self.bench_results[tuple(_key_value(named.get(k)) for k in self.key)] = {
            repr(c): t for c, t in timings.items()}
        best = min(timings, key=timings.get)
        if timings[best] == float("inf"):
            raise RuntimeError(f"no autotune config of {self.__name__} could run")
        return best


def _bench(call, warmup_ms, rep_ms, torch) -> float:
    """Median milliseconds of `call` with CUDA events (after warming up)."""
    call()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end), 1e-3)
    for _ in range(max(1, int(warmup_ms / estimate))):
        call()
    times = []
    for _ in range(max(3, int(rep_ms / estimate))):
        start.record()
        call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def _key_value(v):
    if hasattr(v, "dtype") and hasattr(v, "shape"):
        return (str(v.dtype),)
    return v


def autotune(configs: List[Config], key: List[str], prune_configs_by=None, reset_to_zero=None,
             restore_value=None, warmup=25, rep=100, do_bench=None, **_ignored):
    """Decorator: pick the fastest of `configs` for each value of the `key` arguments."""

    def decorate(fn):
        names = list(getattr(fn, "arg_names", []))
        return Autotuner(fn, names, configs, key, reset_to_zero, restore_value,
                         prune_configs_by, warmup, rep)

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
