#!/usr/bin/env python3
"""Run Triton's tutorials 01, 02, 03, 05, 08 and 09 under the tile frontend or under Triton
itself, and check their functions against torch.

    python3 tools/upstream_tutorials/run_tutorials.py --frontend {tile,triton} --device {cuda,cpu} \
        [--sources DIR] [--small] [--configs N]
    CUDA_VISIBLE_DEVICES= SC_INTERPRET=1 python3 tools/upstream_tutorials/run_tutorials.py \
        --frontend tile --device cpu --small

The upstream sources are not part of this repository: `--sources` is the folder that holds
Triton 3.6's python/tutorials/01-vector-add.py ... 09-persistent-matmul.py (default: the
repository's git-ignored `.tutorials/`; README.md beside this file says how to get them).

Loading. Each tutorial's source is parsed and executed as a module. For `--frontend tile` only
its import lines change: `import triton` -> `import tile as triton`, and `import triton.X` /
`from triton.X import ...` -> the same-named `tile.X` module (tutorials 01-09 use
`triton.language`, `triton.runtime` (02: `from triton.runtime import driver`) and
`triton.tools.tensor_descriptor`). Two host-side imports of tutorial 09 have no tile module:
`triton.profiler` (proton's session API: `scope`, `activate`, `start`, ...) and
`triton._C.libtriton` (the cuBLAS binding its benchmark and `validate()` compare against); for
tile, `proton` binds to a stand-in whose calls do nothing, and `nvidia` to Triton's own binding
where Triton is installed (it is host code, the reference the tutorial checks against), else to
a torch stand-in (cuBLAS through torch.matmul; fp8 through torch._scaled_mm, whose rounding at
ties differs from the binding's: on the H100 at 8192x8192x512 it differed from the binding, and
from tile's and Triton's naive kernels, by 8.0 at 76400 of 67M outputs, so its fp8 line can
fail there while the binding's passes). For `--frontend triton` the source runs as written.

Not run: the tutorials' benchmarks and module-level demos. Top-level statements are dropped when
they are `if __name__ == "__main__":` blocks, call `.run(`, `print`, `torch.manual_seed`,
`torch.rand`/`randn`, the tutorial's own entry points (ENTRY below) or assert, and then every
statement that reads a name only those statements bind (`--verbose` lists them). What the
tutorial defines (kernels, wrappers, configs, `perf_report` objects) is kept.

Checks: each tutorial's functions at a few shapes against torch with the tolerances the
tutorial uses; tutorial 05's `test_layer_norm` and tutorial 09's `validate` are the tutorials'
own checks (09's printed ✅/❌/⭕ lines become PASS/FAIL/SKIP). `--configs N` keeps the first N
configs of every autotuned kernel. In the CPU interpreter tile's autotuner uses the first config
anyway, so there `--configs` only changes which config that is.

`--device cpu` (tile only): CUDA must be hidden; tile's driver then reports torch device "cpu"
and a modeled sm_90a target (H100 properties). Tutorials 08 and 09 also ask torch.cuda for the
device capability and properties and allocate on device="cuda"; for them this runner answers
from tile's modeled target and sends torch factory calls with a "cuda" device to the CPU.
"""

import argparse
import ast
import contextlib
import functools
import io
import os
import re
import sys
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)  # `import tile`
DEFAULT_SOURCES = os.path.join(ROOT, ".tutorials")

TUTORIALS = {"01": "01-vector-add.py", "02": "02-fused-softmax.py",
             "03": "03-matrix-multiplication.py", "05": "05-layer-norm.py",
             "08": "08-grouped-gemm.py", "09": "09-persistent-matmul.py"}
# The functions whose module-level calls are the tutorials' demos.
ENTRY = {"01": {"add"}, "02": {"softmax"}, "03": {"matmul"}, "05": {"test_layer_norm", "layer_norm"},
         "08": {"group_gemm_fn", "group_gemm_tma_fn"}, "09": {"validate", "bench"}}
DEMO_CALLS = {"print", "manual_seed", "rand", "randn", "run"}


# ---- loading -------------------------------------------------------------------------------
def swap_imports(source: str) -> str:
    """Triton's imports -> tile's (see the module docstring); nothing else changes."""
    def swap(m):
        indent, stmt = m.group(1), m.group(2)
        if stmt == "import triton":
            return f"{indent}import tile as triton"
        hit = re.fullmatch(r"from triton\._C\.libtriton import (\w+)", stmt)
        if hit:
            return f"{indent}from _tutorial_stand_ins import {hit.group(1)}"
        if stmt == "import triton.profiler as proton":
            return f"{indent}from _tutorial_stand_ins import proton"
        return indent + re.sub(r"^(import|from) triton\.", r"\1 tile.", stmt)
    return re.sub(r"^([ \t]*)((?:import|from) triton\b[^\n]*)$", swap, source, flags=re.M)


def _stand_ins():
    """tutorial 09's host imports that tile has no module for (tile frontend only)."""
    import torch

    mod = types.ModuleType("_tutorial_stand_ins")
    nothing = lambda *a, **k: None  # noqa: E731
    mod.proton = types.SimpleNamespace(scope=lambda *a, **k: contextlib.nullcontext(),
                                       activate=nothing, deactivate=nothing, start=nothing,
                                       finalize=nothing)
    try:  # Triton's own cuBLAS binding, where Triton is installed: the tutorial's reference
        from triton._C.libtriton import nvidia
        mod.nvidia, mod.blas = nvidia, "Triton's cuBLAS binding"
        return mod
    except ImportError:
        pass

    class CublasLt:
        def __init__(self, workspace):
            self.workspace = workspace

        def matmul(self, a, b, c):  # c = a @ b.T, as the binding computes it
            if a.element_size() == 1 and a.is_cuda:  # fp8: cuBLASLt through torch
                one = torch.ones((), device=a.device)
                c.copy_(torch._scaled_mm(a, b.T, one, one, out_dtype=c.dtype))
            elif a.element_size() == 1:  # CPU torch has no fp8 GEMM
                c.copy_(torch.matmul(a.float(), b.float().T).to(c.dtype))
            else:
                c.copy_(torch.matmul(a, b.T))

    mod.nvidia = types.SimpleNamespace(cublas=types.SimpleNamespace(CublasLt=CublasLt))
    mod.blas = "torch stand-in"
    return mod


def _names(node, ctx):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ctx)}


def _is_demo(stmt, entry) -> bool:
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)):
        return False
    if isinstance(stmt, ast.If) and "__name__" in _names(stmt.test, ast.Load):
        return True
    nodes = list(ast.walk(stmt))
    if any(isinstance(n, ast.Assert) for n in nodes):
        return True
    called = {c.func.id if isinstance(c.func, ast.Name) else getattr(c.func, "attr", None)
              for c in nodes if isinstance(c, ast.Call)}
    return bool(called & (DEMO_CALLS | entry))


def _bound(stmt):
    """The module-level names `stmt` binds."""
    if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in stmt.names}
    return _names(stmt, ast.Store)


def split_demo(tree, entry):
    """(kept, dropped) top-level statements (see the module docstring)."""
    dropped = [s for s in tree.body if _is_demo(s, entry)]
    while True:
        kept = [s for s in tree.body if s not in dropped]
        only_dropped = (set().union(*map(_bound, dropped)) - set().union(*map(_bound, kept)))
        more = [s for s in kept if not isinstance(s, (ast.FunctionDef, ast.ClassDef))
                and _names(s, ast.Load) & only_dropped]
        if not more:
            return kept, dropped
        dropped += more


def load(num, frontend, configs, verbose, sources=DEFAULT_SOURCES):
    path = os.path.join(sources, TUTORIALS[num])
    with open(path) as f:
        source = f.read()
    if frontend == "tile":
        source = swap_imports(source)  # one line for one line: tracebacks keep their lines
    tree = ast.parse(source, path)
    kept, dropped = split_demo(tree, ENTRY[num])
    if verbose:
        for s in dropped:
            print(f"  {num}: not run: lines {s.lineno}-{s.end_lineno}: "
                  f"{ast.get_source_segment(source, s).splitlines()[0]}")
    module = types.ModuleType(f"tutorial{num}_{frontend}")
    module.__file__ = path
    exec(compile(ast.Module(body=kept, type_ignores=[]), path, "exec"), module.__dict__)
    if configs:
        runtime = module.triton.runtime
        autotuner = getattr(runtime, "Autotuner", None) or runtime.autotuner.Autotuner
        for obj in vars(module).values():
            if isinstance(obj, autotuner):
                obj.configs = obj.configs[:configs]
    return module


def cpu_stand_ins(torch, driver):
    """What tutorials 08 and 09 ask of torch.cuda, answered for tile's modeled device."""
    arch = int(driver.active.get_current_target().arch)
    sms = driver.active.utils.get_device_properties(0)["multiprocessor_count"]
    torch.cuda.get_device_capability = lambda *a, **k: divmod(arch, 10)
    torch.cuda.get_device_properties = lambda *a, **k: types.SimpleNamespace(
        multi_processor_count=sms, name=f"modeled sm_{arch} (tile interpreter)")

    def on_cpu(factory):
        @functools.wraps(factory)
        def call(*args, **kwargs):
            if str(kwargs.get("device", "")).startswith("cuda"):
                kwargs["device"] = "cpu"
            return factory(*args, **kwargs)
        return call
    for name in ("empty", "zeros", "ones", "full", "rand", "randn", "tensor"):
        setattr(torch, name, on_cpu(getattr(torch, name)))


# ---- reporting -----------------------------------------------------------------------------
class Report:
    def __init__(self):
        self.counts = {"PASS": 0, "SKIP": 0, "FAIL": 0}

    def line(self, status, name, detail=""):
        self.counts[status] += 1
        print(f"{status} {name}" + (f": {detail}" if detail else ""), flush=True)

    def case(self, name, fn, skip=None):
        if skip:
            return self.line("SKIP", name, skip)
        try:
            fn()
        except Exception as exc:  # noqa: BLE001 - every failure is a FAIL line
            return self.line("FAIL", name, last_line(exc))
        self.line("PASS", name)


def last_line(exc) -> str:
    lines = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()
    return lines[-1] if lines else type(exc).__name__


def close(torch, actual, expected, atol, rtol=0.0):
    if not torch.allclose(actual.float(), expected.float(), atol=atol, rtol=rtol):
        diff = (actual.float() - expected.float()).abs().max().item()
        raise AssertionError(f"max |diff| {diff:.3g} over atol={atol}, rtol={rtol}")


# ---- the checks ----------------------------------------------------------------------------
def check_01(r, m, torch, dev, small, cap):
    for n in ([256, 1000] if small else [98432, 1823, 1 << 22]):
        x, y = torch.rand(n, device=dev), torch.rand(n, device=dev)
        r.case(f"01 add n={n}", lambda: close(torch, m.add(x, y), x + y, atol=0.0))


def check_02(r, m, torch, dev, small, cap):
    for rows, cols in ([(8, 100), (3, 256)] if small else [(1823, 781), (4096, 1024), (7, 8192)]):
        x = torch.randn(rows, cols, device=dev)
        r.case(f"02 softmax {rows}x{cols}",  # the tutorial: torch.allclose, default tolerances
               lambda: close(torch, m.softmax(x), torch.softmax(x, axis=1), atol=1e-8, rtol=1e-5))


def check_03(r, m, torch, dev, small, cap):
    shapes = [(64, 64, 64), (128, 128, 128)] if small else [(512, 512, 512), (1000, 700, 300)]
    for M, N, K in shapes:
        a = torch.rand((M, K), device=dev, dtype=torch.float16) - 0.5
        b = torch.rand((K, N), device=dev, dtype=torch.float16) - 0.5
        r.case(f"03 matmul fp16 {M}x{N}x{K}",
               lambda: close(torch, m.matmul(a, b), torch.matmul(a.float(), b.float()), 1e-2))
    M, N, K = shapes[0]
    a = torch.rand((M, K), device=dev, dtype=torch.float16) - 0.5
    b = torch.rand((K, N), device=dev, dtype=torch.float16) - 0.5
    ref = torch.nn.functional.leaky_relu(torch.matmul(a.float(), b.float()), 0.01)
    r.case(f"03 matmul fp16 leaky_relu {M}x{N}x{K}",
           lambda: close(torch, m.matmul(a, b, activation="leaky_relu"), ref, 1e-2))
    skip = None if m.TORCH_HAS_FP8 and m.is_cuda() and cap >= (8, 9) else "fp8 dot needs sm_89+"
    a = torch.randn((M, K), device=dev, dtype=torch.float16).to(torch.float8_e5m2)
    b = torch.randn((N, K), device=dev, dtype=torch.float16).T.to(torch.float8_e5m2)  # as the tutorial
    r.case(f"03 matmul fp8 {M}x{N}x{K}", lambda: close(
        torch, m.matmul(a, b), torch.matmul(a.to(torch.float16), b.to(torch.float16)), 0.125),
        skip=skip)


def check_05(r, m, torch, dev, small, cap):
    for M, N, dtype in ([(16, 256, torch.float16), (33, 128, torch.float32)] if small else
                        [(1151, 8192, torch.float16), (333, 1024, torch.float32)]):
        r.case(f"05 test_layer_norm {M}x{N} {str(dtype)[6:]}",
               lambda: m.test_layer_norm(M, N, dtype, device=dev))


def check_08(r, m, torch, dev, small, cap):
    # The plain kernel assumes whole tiles: M, N multiples of 128 and K of 64.
    groups = ([[(128, 128, 128), (256, 128, 64)]] if small else
              [[(1024, 1024, 1024), (512, 512, 512), (256, 256, 256), (128, 128, 128)],  # the tutorial's
               [(256, 384, 512), (512, 128, 256)]])
    for sizes in groups:
        A = [torch.rand((M, K), device=dev, dtype=torch.float16) for M, N, K in sizes]
        B = [torch.rand((K, N), device=dev, dtype=torch.float16) for M, N, K in sizes]
        ref = [torch.matmul(a.float(), b.float()) for a, b in zip(A, B)]
        label = ",".join(f"{M}x{N}x{K}" for M, N, K in sizes)

        def both(outs):
            for out, want in zip(outs, ref):
                close(torch, out, want, atol=1e-2, rtol=1e-2)
        r.case(f"08 group_gemm_fn {label}", lambda: both(m.group_gemm_fn(A, B)))
        B_T = [b.T.contiguous() for b in B]
        r.case(f"08 group_gemm_tma_fn {label}", lambda: both(m.group_gemm_tma_fn(A, B_T)),
               skip=None if m.supports_tma() else "TMA needs sm_90")


def check_09(r, m, torch, dev, small, cap, frontend="tile"):
    runs = [(32, 32, 32, torch.float16), (128, 128, 128, torch.float16), (64, 64, 64, torch.float8_e4m3fn)]
    if not small:
        runs = [(32, 32, 32, torch.float16), (8192, 8192, 512, torch.float16),
                (8192, 8192, 512, torch.float8_e4m3fn)]
    for M, N, K, dtype in runs:
        prefix = f"09 validate {'fp8' if dtype != torch.float16 else 'fp16'} {M}x{N}x{K}"
        if dtype != torch.float16 and cap < (9, 0):
            r.line("SKIP", prefix, "the tutorial's fp8 kernels need sm_90")
            continue
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                m.validate(M, N, K, dtype)
            error = None
        except Exception as exc:  # noqa: BLE001
            error = exc
        for row in out.getvalue().split("\n"):
            row = row.split("\r")[-1].strip()
            hit = re.fullmatch(r"(.+): (✅|❌|⭕|\.\.\.)", row)
            if not hit:
                continue
            label, icon = hit.groups()
            if frontend == "tile" and label == m.device_blas_name():
                label += f" ({sys.modules['_tutorial_stand_ins'].blas})"
            name = f"{prefix}: {label}"
            if icon == "✅":
                r.line("PASS", name)
            elif icon == "❌":
                r.line("FAIL", name, "differs from the naive matmul by more than atol=1.0")
            elif icon == "⭕":
                r.line("SKIP", name, "validate() runs torch.matmul for fp16 only" if label == "Torch"
                       else "validate() skips host-descriptor warp_specialize on Hopper"
                       if "warp_specialize=True" in label and m.is_hopper()
                       else "the tutorial's validate() skips it on this device")
            else:
                r.line("FAIL", name, last_line(error) if error else "did not finish")
                error = None
        if error is not None:
            r.line("FAIL", prefix, last_line(error))


CHECKS = {"01": check_01, "02": check_02, "03": check_03, "05": check_05, "08": check_08,
          "09": check_09}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--frontend", choices=["tile", "triton"], required=True)
    p.add_argument("--device", choices=["cuda", "cpu"], required=True)
    p.add_argument("--small", action="store_true", help="small shapes (for the interpreter)")
    p.add_argument("--configs", type=int, default=None, help="keep each autotuner's first N configs")
    p.add_argument("--only", nargs="+", choices=sorted(TUTORIALS), help="these tutorials only")
    p.add_argument("--verbose", action="store_true", help="list the statements not run")
    p.add_argument("--sources", default=DEFAULT_SOURCES,
                   help="folder with the upstream tutorial sources (default: %(default)s)")
    args = p.parse_args(argv)
    missing = [f for f in TUTORIALS.values() if not os.path.isfile(os.path.join(args.sources, f))]
    if missing:
        p.error(f"--sources {args.sources}: missing {', '.join(missing)} (see "
                f"{os.path.join(HERE, 'README.md')})")

    if args.device == "cpu":
        if args.frontend != "tile":
            p.error("--device cpu runs tile's CPU interpreter; Triton is checked on CUDA only")
        os.environ.setdefault("SC_INTERPRET", "1")
    import torch
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA GPU")
    if args.device == "cpu" and torch.cuda.is_available():
        p.error("--device cpu: hide the GPU (CUDA_VISIBLE_DEVICES=) so tile runs its interpreter")
    if args.frontend == "tile":
        sys.modules["_tutorial_stand_ins"] = _stand_ins()
        from tile.runtime import driver
    else:
        from triton.runtime import driver
    if args.device == "cpu":
        cpu_stand_ins(torch, driver)
    dev = driver.active.get_active_torch_device()
    cap = torch.cuda.get_device_capability()
    name = torch.cuda.get_device_name() if args.device == "cuda" else "CPU interpreter"
    print(f"frontend {args.frontend}, device {dev} ({name}, sm_{cap[0]}{cap[1]}), "
          f"{'small' if args.small else 'full'} shapes, configs {args.configs or 'all'}", flush=True)

    report = Report()
    for num in args.only or sorted(TUTORIALS):
        torch.manual_seed(0)
        try:
            module = load(num, args.frontend, args.configs, args.verbose, args.sources)
        except Exception as exc:  # noqa: BLE001
            traceback.print_exc()
            report.line("FAIL", f"{num} load {TUTORIALS[num]}", last_line(exc))
            continue
        kwargs = {"frontend": args.frontend} if num == "09" else {}
        CHECKS[num](report, module, torch, dev, args.small, cap, **kwargs)
    c = report.counts
    print(f"{c['PASS']} passed, {c['SKIP']} skipped, {c['FAIL']} failed")
    return 1 if c["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
