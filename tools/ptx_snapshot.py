#!/usr/bin/env python3
"""PTX regression snapshot: compile every kernel that the tests, examples and benchmarks build,
for sm_90a and sm_100a, and record {stable key: sha256 of the PTX, or "ERROR: <Type>: <line>"}.

    python3 tools/ptx_snapshot.py --out snap.json [--ptx-dir DIR] [--jobs 2]   # in a repo root
    python3 tools/ptx_snapshot.py --compare a.json b.json      # exit 1 if any key differs

Keys survive moving modules and test files: they hold no paths, module names or ids.
  <target>|jit|<kernel name>|<sha of its source from `def` on>|w<num_warps>|<spec key, canonical>
      each (kernel, specialization) that reaches JITFunction.make_ir (interpreter runs, GPU
      launches, tile/gluon.compile), re-traced for the target and compiled by compile_module;
  <target>|lowered|<test id without its file>|<kernel name>|<n-th lowering in that test>
      modules that tests build by hand and pass to lower_module (LLVM IR -> PTX).
A key that different kernels share (same name and source, other closure values) becomes
"<key>#0", "#1", ... in the sorted order of its values: equal trees give equal JSON.
The test suite runs with this file as a pytest plugin (-p ptx_snapshot): each worker traces
when the test does (same globals and monkeypatches) and compiles at session end (so no test's
timing, warnings or captured output change). Then the specializations that the benchmarks and
the examples' GPU mode would launch (they need a GPU) go through tile/gluon.compile.
"""
from __future__ import annotations

import argparse, ast, collections, contextlib, copy, hashlib, inspect, io, json, os, re
import subprocess, sys, tempfile, textwrap, threading, time, warnings

TARGETS = ("sm_90a", "sm_100a")
_local = threading.local()              # .busy: in our own tracing; .compiling: compile_module
_pending = {}                           # dedupe key -> (snapshot key, thunk -> PTX, or error)
_alive = []                             # traced JITFunctions stay alive, so ids stay unique
_lowered_count = collections.Counter()  # (full node id, kernel name) -> lowerings so far
_test = ["<collection>", "<collection>"]  # [node id without its file, full node id]


def _sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


def _canon(text):
    """Drop what differs between trees or runs: addresses, paths, module qualifiers."""
    text = re.sub(r" at 0x[0-9a-fA-F]+", "", text)
    text = re.sub(r"<(?:\w+\.)+(\w+ object)", r"<\1", text)
    text = re.sub(r"<(class|enum) '(?:\w+\.)+(\w+)'>", r"<\1 '\2'>", text)
    text = re.sub(r"<module '([\w.]+)' from '[^']*'>", r"<module '\1'>", text)
    text = re.sub(r"JITFunction\([\w.]+:", "JITFunction(", text)
    return re.sub(r"(?<![\w.])/(?:[\w.\-]+/)+([\w.\-]+)", r"\1", text)  # path -> base name


def _error(exc):
    return _canon(f"ERROR: {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}")


@contextlib.contextmanager
def _ours():
    """Our extra traces and compiles: not recorded again, and no warnings or prints that a
    test's recwarn/capsys would see."""
    _local.busy = True
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            _local.busy = False


def _source_hash(jit_fn):
    """The kernel's dedented source from `def` on (a decorator's spelling may change)."""
    src = textwrap.dedent(inspect.getsource(jit_fn.fn))
    return _sha("".join(src.splitlines(True)[ast.parse(src).body[0].lineno - 1:]))[:16]


def _record_jit(jit_fn, spec):
    from shared_codegen.frontend.compile import compile_module

    base = (f"jit|{jit_fn.__name__}|{_source_hash(jit_fn)}|w{spec.num_warps}|"
            f"{_canon(repr(spec.key))}")
    _alive.append(jit_fn)
    with _ours():
        for target in TARGETS:
            key = f"{target}|{base}"
            if (key, id(jit_fn)) in _pending:  # the same kernel object traces the same module
                continue
            s = copy.copy(spec)
            s.target = target
            try:  # type(jit_fn).make_ir: the language's own entry (Gluon's runs its pipeline)
                module = type(jit_fn).make_ir(jit_fn, s)
                job = lambda m=module, lang=jit_fn.language, t=target: \
                    compile_module(m, lang, t).asm["ptx"]
            except Exception as exc:
                job = exc
            _pending[key, id(jit_fn)] = (key, job)


def _record_lowered(lowered):
    from shared_codegen.lowering.backend import llvm_to_ptx

    test, full = _test
    n = _lowered_count[full, lowered.name]  # counted per test: the same in every run
    _lowered_count[full, lowered.name] += 1
    for target in TARGETS:  # keyed by full id too: same-named tests of two files both stay
        key = f"{target}|lowered|{test}|{lowered.name}|{n}"
        _pending[key, full] = (key, lambda ir=lowered.llvm_ir, t=target: llvm_to_ptx(ir, t))


def install():
    """Wrap make_ir (every traced kernel), lower_module (hand-built modules) and compile_module
    (whose lowering is not hand-built). Runs before test modules import them by name."""
    import shared_codegen
    from shared_codegen.frontend import compile as compile_mod, jit
    from shared_codegen.lowering import lower

    root = os.environ["PTX_SNAPSHOT_ROOT"]  # the editable install may point at another tree
    if not os.path.abspath(shared_codegen.__file__).startswith(root + os.sep):
        raise SystemExit(f"ptx_snapshot: imports {shared_codegen.__file__}, not {root}'s")
    make_ir, compile_module, lower_module = (jit.JITFunction.make_ir,
                                             compile_mod.compile_module, lower.lower_module)

    def make_ir_recording(self, spec):
        try:
            return make_ir(self, spec)
        finally:  # also when the test's trace raises: the error is part of the snapshot
            if not getattr(_local, "busy", False):
                _record_jit(self, spec)

    def compile_module_marked(*args, **kwargs):
        _local.compiling = getattr(_local, "compiling", 0) + 1
        try:
            return compile_module(*args, **kwargs)
        finally:
            _local.compiling -= 1

    def lower_module_recording(*args, **kwargs):
        out = lower_module(*args, **kwargs)
        if not getattr(_local, "busy", False) and not getattr(_local, "compiling", 0):
            _record_lowered(out)
        return out

    jit.JITFunction.make_ir = make_ir_recording
    for old, new in ((compile_module, compile_module_marked),
                     (lower_module, lower_module_recording)):
        for mod in list(sys.modules.values()):  # the defining module and any re-export
            if vars(mod).get(old.__name__) is old:
                setattr(mod, old.__name__, new)


def flush(out_dir, tag):
    """Compile everything recorded; write part-<tag>.json: [[key, value, PTX or None], ...]."""
    rows = []
    for key, job in _pending.values():
        ptx, value = None, _error(job) if isinstance(job, Exception) else None
        if value is None:
            try:
                with _ours():
                    ptx = job()
                value = _sha(ptx)
            except Exception as exc:
                value = _error(exc)
        rows.append([key, value, ptx])
    with open(os.path.join(out_dir, f"part-{tag}.json"), "w") as f:
        json.dump(rows, f)


# ---- pytest plugin hooks (this file loaded with -p ptx_snapshot) -----------------------------
def pytest_configure(config):
    if getattr(config, "workerinput", None) is None and getattr(config.option, "numprocesses", 0):
        return  # the xdist controller runs no tests
    install()
    config._ptx_snapshot = True


def pytest_runtest_protocol(item, nextitem):
    _test[:] = [item.nodeid.split("::", 1)[-1], item.nodeid]


def pytest_sessionfinish(session):
    if getattr(session.config, "_ptx_snapshot", False):
        tag = getattr(session.config, "workerinput", {}).get("workerid", "main")
        flush(os.environ["PTX_SNAPSHOT_OUT"], tag)


# ---- benchmarks and the examples' GPU mode: what they would launch, from reading them --------
def bench_cases(root):
    import ml_dtypes, numpy as np
    for sub in ("examples", "examples/gluon", "examples/gemm", "benchmarks"):
        sys.path.insert(0, os.path.join(root, sub))
    import gluon, tile, tile.language, gemm, gluon_matmul, launch_overhead, matmul_mma_v2
    from gluon.nvidia.hopper import TensorDescriptor
    from copy_kernel import copy_kernel
    from layer_norm import layer_norm_fwd_kernel
    from softmax import softmax_kernel
    from tma_copy import tma_copy_kernel
    from transpose_kernel import transpose_kernel
    from vector_add import add_kernel

    def p(ty, names):  # the same type for several parameters
        return {name: ty for name in names.split()}
    D = "i32:16"  # an int argument that is a multiple of 16 (the benchmarks' sizes)
    T, G = tile.compile, gluon.compile
    add = p("*fp32:16", "x_ptr y_ptr out_ptr")
    sm = p("*fp16:16", "out_ptr in_ptr")
    ln = {**p("*fp16:16", "x_ptr y_ptr w_ptr b_ptr"), **p("*fp32:16", "mean_ptr rstd_ptr"),
          "eps": "fp32"}
    cases = [  # (compile, kernel, signature, constexprs, num_warps)
        (T, add_kernel, {**add, "n_elements": "i32"}, dict(BLOCK_SIZE=1024), 4),  # compile_time
        (T, add_kernel, {**add, "n_elements": D}, dict(BLOCK_SIZE=1024), 4),  # memory_bound, main
        (T, softmax_kernel, {**sm, **p("i32", "in_row_stride out_row_stride n_cols")},
         dict(BLOCK_SIZE=8192), 16),  # compile_time, profile_compile
        (T, softmax_kernel, {**sm, **p(D, "in_row_stride out_row_stride n_cols")},
         dict(BLOCK_SIZE=8192), 16),  # memory_bound, dump_softmax_asm: 8192 x 8192
        (T, softmax_kernel, {**sm, **p("i32", "in_row_stride out_row_stride n_cols")},
         dict(BLOCK_SIZE=1024), 4),  # main(): 64 x 781
        (T, layer_norm_fwd_kernel, {**ln, **p(D, "stride n_cols")}, dict(BLOCK_SIZE=8192), 8),
        (T, layer_norm_fwd_kernel, {**ln, **p("i32", "stride n_cols")}, dict(BLOCK_SIZE=256), 1),
        (G, copy_kernel, {**p("*fp16:16", "src_ptr dst_ptr"), "n": D}, dict(BLOCK=8192, VEC=8), 8),
        (G, copy_kernel, {**p("*fp16:16", "src_ptr dst_ptr"), "n": D}, dict(BLOCK=4096, VEC=8), 4),
    ]
    for hint in (D, "i32"):  # gluon_copy_transpose 16384^2; main() 200 x 136
        cases.append((G, transpose_kernel, {**p("*fp32:16", "x_ptr y_ptr"),
                                            **p(hint, "M N stride_x stride_y")},
                      dict(BLOCK_M=64, BLOCK_N=64, VEC=4), 4))
    mm = {**p("*fp16:16", "a_ptr b_ptr c_ptr"), **p(D, "M N K stride_am stride_bk stride_cm")}
    for cfg in [matmul_mma_v2.DEFAULT_CONFIG] + gluon_matmul.SWEEP:  # gluon_matmul (+ --sweep)
        cases.append((G, matmul_mma_v2.matmul_kernel, mm, cfg, cfg["WARPS_M"] * cfg["WARPS_N"]))
    x16 = np.zeros((1024, 1024), np.float16)  # host descriptors: same key as device ones
    nv = gluon.language.NVMMASharedLayout(128, 16)
    cases.append((G, tma_copy_kernel, {"in_desc": TensorDescriptor.from_tensor(x16, [64, 64], nv),
                                       "out_desc": TensorDescriptor.from_tensor(x16, [64, 64], nv)},
                  {}, 4))  # tma_copy main()
    for dt, kmajor in ((np.float16, False), (ml_dtypes.bfloat16, False),
                       (ml_dtypes.float8_e4m3fn, True)):  # gemm_vs_cublas (+ --sweep GROUP_M)
        a = np.zeros((512, 512), dt)
        c = x16 if kmajor else a
        bm, bn, bk = 128, 256, 128 // a.itemsize
        desc = TensorDescriptor.from_tensor
        descs = {"a_desc": desc(a, [bm, bk], gemm._nvmma(a, bk)),
                 "b_desc": desc(a, [bn, bk] if kmajor else [bk, bn],
                                gemm._nvmma(a, bk if kmajor else bn)),
                 "c_desc": desc(c, [bm, bn], gemm._nvmma(c, bn))}
        for group_m in (8, 16, 4):
            cases.append((G, gemm.gemm_kernel, {**descs, **p(D, "M N K")},
                          dict(STAGES=3, B_KMAJOR=kmajor, GROUP_M=group_m), gemm.CONSUMER_WARPS))
    launch_overhead.tl = tile.language  # the benchmark binds it lazily
    cases.append((T, tile.jit(launch_overhead.k), {**p("*fp32:16", "x y out"), "n": D}, {}, 4))
    for compile_fn, kernel, sig, consts, warps in cases:
        try:  # the make_ir hook records each target, errors included
            compile_fn(kernel, signature=sig, constexprs=consts, target="sm_90a", num_warps=warps)
        except Exception:
            pass


# ---- driver ----------------------------------------------------------------------------------
def merge(parts_dir):
    values = collections.defaultdict(dict)  # key -> {value: PTX}
    for name in sorted(os.listdir(parts_dir)):
        for key, value, ptx in json.load(open(os.path.join(parts_dir, name))):
            values[key][value] = ptx
    snap, texts = {}, {}
    for key, vals in values.items():
        names = [key] if len(vals) == 1 else [f"{key}#{i}" for i in range(len(vals))]
        for name, value in zip(names, sorted(vals)):
            snap[name], texts[name] = value, vals[value] or value
    return dict(sorted(snap.items())), texts


def write_ptx(texts, ptx_dir):
    """<target>/<kind>.<kernel>.<sha of key>.ptx (.err: the error); INDEX.tsv: file -> key."""
    index = []
    for key in sorted(texts):
        part = key.split("|")
        name = re.sub(r"\W", "_", part[2] if part[1] == "jit" else part[3])
        ext = "err" if texts[key].startswith("ERROR: ") else "ptx"
        fname = f"{part[0]}/{part[1]}.{name}.{_sha(key)[:12]}.{ext}"
        os.makedirs(os.path.join(ptx_dir, part[0]), exist_ok=True)
        with open(os.path.join(ptx_dir, fname), "w") as f:
            f.write(texts[key])
        index.append(f"{fname}\t{key}\n")
    with open(os.path.join(ptx_dir, "INDEX.tsv"), "w") as f:
        f.writelines(index)


def snapshot(args):
    root, start = os.getcwd(), time.time()
    parts = tempfile.mkdtemp(prefix="ptxsnap-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SC_")}  # no SC_DEBUG etc.
    env.update(SC_CACHE_DISABLE="1", PYTHONHASHSEED="0", PTX_SNAPSHOT_OUT=parts,
               PTX_SNAPSHOT_ROOT=root,
               PYTHONPATH=os.pathsep.join([root, os.path.dirname(os.path.abspath(__file__))]))
    cmd = [sys.executable, "-m", "pytest", "-p", "ptx_snapshot", "-p", "no:cacheprovider",
           "--hypothesis-seed=0"]  # hypothesis draws the same examples in every run
    if args.jobs > 1:  # loadfile: a file's tests (and module fixtures) in one worker, in order
        cmd += ["-n", str(args.jobs), "--dist", "loadfile"]
    rc = subprocess.call(cmd + args.pytest_args, cwd=root, env=env)
    brc = subprocess.call([sys.executable, os.path.abspath(__file__), "--bench-part", parts],
                          cwd=root, env=env)
    snap, texts = merge(parts)
    with open(args.out, "w") as f:
        json.dump(snap, f, indent=1)
        f.write("\n")
    if args.ptx_dir:
        write_ptx(texts, args.ptx_dir)
    per = collections.Counter(k.split("|")[0] for k in snap)
    errors = collections.Counter(k.split("|")[0] for k, v in snap.items() if v[:6] == "ERROR:")
    print(f"ptx_snapshot: {len(snap)} keys {dict(per)}, errors {dict(errors)}, "
          f"{time.time() - start:.0f} s; pytest exit {rc}, benchmarks exit {brc}")
    return 0 if rc == brc == 0 else 1


def compare(a, b):
    sa, sb = json.load(open(a)), json.load(open(b))
    keys = sorted(set(sa) | set(sb))
    bad = [k for k in keys if sa.get(k) != sb.get(k)]
    for k in bad:
        what = "DIFF" if k in sa and k in sb else "ONLY-A" if k in sa else "ONLY-B"
        print(f"{what}  {k}\n    a: {sa.get(k)}\n    b: {sb.get(k)}")
    print(f"{len(bad)} of {len(keys)} keys differ")
    return 1 if bad else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="snapshot JSON to write")
    ap.add_argument("--ptx-dir", help="also write the PTX texts (and INDEX.tsv) here")
    ap.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers (1: no xdist)")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    ap.add_argument("--bench-part", help=argparse.SUPPRESS)
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = ap.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    if args.bench_part:  # child process, in the same environment as the pytest run
        install()
        bench_cases(os.getcwd())
        flush(args.bench_part, "bench")
        return 0
    if not args.out:
        ap.error("--out or --compare is required")
    return snapshot(args)


if __name__ == "__main__":
    sys.exit(main())
