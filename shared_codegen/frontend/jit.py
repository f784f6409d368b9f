"""`@jit` functions: parsing, specialization, compilation stages, launching, interpreting.

`kernel[grid](*args, num_warps=4, **constexprs)` binds the arguments, computes the
specialization key (dtypes, 16-byte alignment, ints equal to 1 or divisible by 16, constexpr
values), finds or builds the compiled variant, and launches it. When the data lives on the
host (numpy arrays, CPU torch tensors), when no GPU is present, or when `interpret=True` /
`SC_INTERPRET=1`, the same IR runs in the CPU interpreter instead.

A language plugs in through a `Language` object: its semantic class (what builtins build)
and its stages list (frontend IR -> explicit-layout IR -> cubin; `tile/stages.py`,
`gluon/stages.py`).
"""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import linecache
import sys
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

# Descriptor arguments are traced as `tensor_descriptor` values (registers the class).
import shared_codegen.frontend.descriptors  # noqa: F401
from shared_codegen.frontend.codegen import CodeGenerator
from shared_codegen.errors import SourceUnavailableError
from shared_codegen.frontend.errors import ArgumentError, CompilationError
from shared_codegen.frontend.values import constexpr, wrap
from shared_codegen.ir.builder import Builder
from shared_codegen.ir.core import Function, Location, Module
from shared_codegen.ir.types import BY_NAME, PointerType
from shared_codegen.ops.control.definition import RETURN, YieldOp
from shared_codegen.runtime.specialize import Specializer

# The first stage every frontend shares (shared_codegen/stages.py): what comes before it are
# the language's own passes, which the interpreter and the converter run too.
EXPLICIT_LAYOUT_STAGE = "explicit_layout_ir"


@dataclass
class Language:
    name: str
    semantic_class: Any
    stages: Callable[[], list]  # the language's stages file: [(name, fn(module)), ...]
    # Whether a float multiply and an add may fuse into one FMA (Triton's enable_fp_fusion,
    # on by default there for both languages, and so here).
    fp_fusion: bool = False

    def passes(self) -> list:
        """The stages up to the explicit-layout IR: the language's own passes."""
        stages = self.stages()
        names = [name for name, _ in stages]
        return stages[:names.index(EXPLICIT_LAYOUT_STAGE)]


def source_unavailable(fn) -> SourceUnavailableError:
    """The error for a function whose source Python cannot read: defined through exec() of a
    string or read from stdin, where nothing keeps its lines. Code that registers its lines in
    `linecache` under the filename it was compiled with (as code generators and IPython do)
    has a source, as for Triton."""
    code = fn.__code__
    return SourceUnavailableError(
        f"cannot read the source of @jit function `{fn.__qualname__}`, which the compiler "
        f"parses: Python keeps no source for code defined through exec() of a string or read "
        f"from stdin. Define the kernel in a .py file, or register its lines in linecache under "
        f"the filename it was compiled with ({code.co_filename!r})",
        file=code.co_filename, line=code.co_firstlineno)


def has_source(fn) -> bool:
    """Whether Python keeps lines for the file `fn` was defined in (what inspect reads): asked
    when the function is decorated, as Triton does, without parsing it (SourceInfo does that
    at the first compile)."""
    code = getattr(fn, "__code__", None)
    return code is None or bool(linecache.getlines(code.co_filename, fn.__globals__))


class SourceInfo:
    """A jitted function's source: its AST and where its lines are in its file."""

    def __init__(self, fn):
        self.name = fn.__name__
        try:
            self.file = inspect.getsourcefile(fn) or "<unknown>"
            lines, first = inspect.getsourcelines(fn)
        except OSError:
            raise source_unavailable(fn) from None
        raw = "".join(lines)
        src = textwrap.dedent(raw)
        self.indent = len(lines[0]) - len(lines[0].lstrip())
        self.source = src
        module = ast.parse(src)
        tree = module.body[0]
        if not isinstance(tree, ast.FunctionDef):
            raise TypeError(f"@jit needs a function definition, got {type(tree).__name__}")
        self.tree = tree
        # Decorators come first in the source; lineno of the AST counts from them.
        self.first_line = first
        self._file_lines = None

    def line_text(self, line: int) -> str:
        text = linecache.getline(self.file, line)
        return text.rstrip("\n")


class JITFunction:
    """A Python function compiled as a kernel (or inlined into one when called from one)."""

    is_jit_function = True

    def __init__(self, fn, language: Language, do_not_specialize=(), debug=False,
                 noinline=False, repr=None, launch_metadata=None):
        if not has_source(fn):
            raise source_unavailable(fn)
        self.fn = fn
        self.language = language
        self.__name__ = fn.__name__
        self.__doc__ = fn.__doc__
        self.__module__ = fn.__module__
        self.__qualname__ = getattr(fn, "__qualname__", fn.__name__)
        self.signature = inspect.signature(fn)
        self.params = list(self.signature.parameters.values())
        self.arg_names = [p.name for p in self.params]
        self.constexpr_names = {p.name for p in self.params if _is_constexpr_annotation(
            p.annotation)}
        self.constexpr_positions = frozenset(i for i, p in enumerate(self.params)
                                             if p.name in self.constexpr_names)
        names = [do_not_specialize] if isinstance(do_not_specialize, (str, int)) else \
            list(do_not_specialize)
        self.do_not_specialize = frozenset(
            self.arg_names.index(d) if isinstance(d, str) else int(d) for d in names)
        self.debug = debug
        # The Timeline of the last launch with `timeline=True` (runtime/timeline.py).
        self.last_timeline = None
        self._source_info: Optional[SourceInfo] = None
        self._variants: Dict[tuple, Any] = {}
        # Variants compiled for earlier values of the globals a kernel folded in (launch.py).
        self._older_variants: Dict[tuple, list] = {}
        # Computes every specialization key of this kernel (frontend/launch.py); the launch
        # fast path only caches variants under a cheaper proxy of it (fastpath.py).
        self.specializer = Specializer(self.constexpr_positions, self.do_not_specialize)
        self._src_hash: Optional[str] = None
        self._defaults = [p.default for p in self.params]
        self._index = {n: i for i, n in enumerate(self.arg_names)}
        self._fast_variants: Dict[tuple, Any] = {}
        # Every variant by fast key, for the launcher that checks folded globals (fastpath.py);
        # `_fast_variants` holds only variants that folded none.
        self._fast_guarded_variants: Dict[tuple, Any] = {}
        self._fast_guarded = False
        self._fast_launch = None
        self._fast_has_torch = False

    # ---- source --------------------------------------------------------------------------
    @property
    def source_info(self) -> SourceInfo:
        if self._source_info is None:
            self._source_info = SourceInfo(self.fn)
        return self._source_info

    @property
    def closure_vars(self) -> Dict[str, Any]:
        cv = inspect.getclosurevars(self.fn)
        return dict(cv.nonlocals)

    def cache_hash(self) -> str:
        """Hash of this function's source and of every jitted function it calls."""
        if self._src_hash is None:
            h = hashlib.sha256(self.source_info.source.encode())
            seen = {id(self)}
            for dep in self._dependencies(seen):
                h.update(dep.source_info.source.encode())
            self._src_hash = h.hexdigest()
        return self._src_hash

    def _dependencies(self, seen):
        g = self.fn.__globals__
        for node in ast.walk(self.source_info.tree):
            if isinstance(node, ast.Name) and node.id in g:
                value = g[node.id]
                if getattr(value, "is_jit_function", False) and id(value) not in seen:
                    seen.add(id(value))
                    yield value
                    yield from value._dependencies(seen)
                elif isinstance(value, constexpr):
                    # Global constexprs are part of the program text.
                    yield _ConstSource(f"{node.id}={value.value!r}")
                elif not (callable(value) or inspect.ismodule(value)):
                    # Other values a kernel reads (layouts, dtypes) are program text too: a
                    # changed layout must not hit an old cache entry.
                    yield _ConstSource(f"{node.id}={value!r}")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"`{self.__name__}` is a kernel: launch it with "
                           f"{self.__name__}[grid](...), or call it from another jitted "
                           "function")

    def __repr__(self):
        return f"JITFunction({self.__module__}:{self.__qualname__})"

    # ---- launching -----------------------------------------------------------------------
    def __getitem__(self, grid):
        fast = self._fast_launch
        if fast is None or (not self._fast_has_torch and "torch" in sys.modules):
            fast = self._build_fast_launch()
        return functools.partial(fast, grid=grid)

    def _build_fast_launch(self):
        from shared_codegen.frontend.fastpath import build_fast_launcher
        from shared_codegen.frontend.launch import run_bound

        def slow(values, options, grid, num_warps, stream, fast_key=None):
            return run_bound(self, list(values), options, grid, num_warps, stream, fast_key)

        self._fast_has_torch = "torch" in sys.modules
        self._fast_launch = build_fast_launcher(self, slow)
        return self._fast_launch

    def bind_args(self, args, kwargs) -> List[Any]:
        """Arguments in parameter order, defaults filled in; errors name the parameter."""
        n = len(self.params)
        if len(args) > n:
            raise ArgumentError(f"{self.__name__}() takes {n} arguments but {len(args)} were "
                                "given")
        values = list(args) + [inspect.Parameter.empty] * (n - len(args))
        for key, value in kwargs.items():
            i = self._index.get(key)
            if i is None:
                raise ArgumentError(f"{self.__name__}() got an unexpected keyword argument "
                                    f"'{key}'")
            if i < len(args):
                raise ArgumentError(f"{self.__name__}() got multiple values for argument "
                                    f"'{key}'")
            values[i] = value
        missing = []
        for i, v in enumerate(values):
            if v is inspect.Parameter.empty:
                d = self._defaults[i]
                if d is inspect.Parameter.empty:
                    missing.append(self.arg_names[i])
                else:
                    values[i] = d
        if missing:
            names = ", ".join(f"'{m}'" for m in missing)
            raise ArgumentError(f"{self.__name__}() missing {len(missing)} required "
                                f"argument{'s' if len(missing) > 1 else ''}: {names}")
        return [v.value if isinstance(v, constexpr) else v for v in values]

    def run(self, *args, grid, num_warps=None, num_stages=None, num_ctas=1, interpret=None,
            target=None, stream=None, warmup=False, cluster_dims=None, maxnreg=None,
            launch_pdl=False, **kwargs):
        from shared_codegen.errors import KernelError
        from shared_codegen.frontend import launch as launch_mod
        from shared_codegen.tracebacks import user_facing
        try:
            return launch_mod.run(self, args, kwargs, grid, num_warps, num_stages, interpret,
                                  target, stream, warmup, num_ctas, cluster_dims, maxnreg,
                                  launch_pdl)
        except KernelError as error:
            raise user_facing(error, self)  # ends at the kernel line (shared_codegen/tracebacks.py)

    def warmup(self, *args, grid=(1,), **kwargs):
        return self.run(*args, grid=grid, warmup=True, **kwargs)

    # ---- compilation ---------------------------------------------------------------------
    def make_ir(self, spec: "Specialization") -> Module:
        """Trace the function for one specialization into a frontend-IR module."""
        module = Module({"num_warps": spec.num_warps, "threads_per_warp": 32,
                         "target": spec.target})
        if spec.num_stages != 3:  # the tile pipeliner's depth when not Triton's default
            module.attrs["num_stages"] = spec.num_stages
        if spec.num_ctas != 1:  # a cluster per program (docs/clusters.md)
            module.attrs["num_ctas"] = spec.num_ctas
        if self.language.fp_fusion:
            module.attrs["enable_fp_fusion"] = True
        runtime = [(i, name) for i, name in enumerate(self.arg_names)
                   if not spec.is_constexpr(i)]
        arg_types = [spec.arg_types[i] for i, _ in runtime]
        fn = Function(self.__name__, arg_types, [n for _, n in runtime], attrs={"kernel": True},
                      loc=Location(self.source_info.file, self.source_info.first_line))
        divisibility = {k: 16 for k, (i, _) in enumerate(runtime) if spec.hints[i] == "D"}
        if divisibility:
            fn.attrs["arg_divisibility"] = divisibility
        module.add(fn)
        semantic = self.language.semantic_class(Builder(fn.body.block))
        semantic.builder.module = module
        semantic.num_warps = spec.num_warps
        scope = {}
        for i, name in enumerate(self.arg_names):
            if spec.is_constexpr(i):
                scope[name] = spec.constants[i]
        for k, (i, name) in enumerate(runtime):
            arg = fn.args[k]
            # Ints equal to 1 are still passed, but the body sees the constant (as Triton).
            scope[name] = 1 if spec.hints[i] == "1" else wrap(arg, arg.type)
        gen = CodeGenerator(self, scope, semantic)
        semantic.codegen = gen
        gen.generate_body()
        # Values read from outside the kernel and folded into it (frontend/guards.py).
        module.external_reads = list((getattr(semantic, "external_reads", None) or {}).values())
        if gen.return_value is not None:
            raise CompilationError("a kernel cannot return a value", self.source_info.file,
                                   self.source_info.first_line)
        with semantic.builder.location(fn.loc):
            YieldOp.build(semantic.builder, [], name=RETURN)
        return module


class _ConstSource:
    def __init__(self, text):
        self.source_info = type("S", (), {"source": text})()

    def _dependencies(self, seen):
        return iter(())


def _is_constexpr_annotation(annotation) -> bool:
    if annotation is constexpr:
        return True
    if isinstance(annotation, str):
        return annotation.split(".")[-1] == "constexpr"
    return False


@dataclass
class Specialization:
    """What one compiled variant is specialized on."""

    key: tuple
    arg_types: List[Any]      # IR type per parameter (None for constexpr)
    constants: List[Any]      # value per constexpr parameter (else None)
    hints: List[str]          # "D" (divisible by 16), "1", or ""
    num_warps: int
    target: str
    # Software-pipelining depth for loops that feed tl.dot (Triton's num_stages; the tile
    # pipeliner reads it from the module attrs, Gluon ignores it as Triton's Gluon does).
    num_stages: int = 3
    # Instrumentation of a debug or profiling variant, as sorted (name, setting) pairs:
    # ("debug", wait budget in ms), ("timeline", events per warp). Empty for an ordinary
    # kernel.
    instrument: tuple = ()
    # CTAs per program (Triton's num_ctas): > 1 launches each program as a thread-block
    # cluster of that many CTAs along x (docs/clusters.md).
    num_ctas: int = 1
    # False: the one-program-per-tile build of a kernel tile/passes/persistent.py would make
    # persistent (what its launcher runs when the grid fits on the GPU at once).
    persistent: bool = True

    @classmethod
    def from_key(cls, key: tuple, num_warps: int, target: str,
                 num_stages: int = 3) -> "Specialization":
        """The specialization a key (`Specializer.key`) describes."""
        arg_types, constants, hints = [], [], []
        for entry in key:
            name, hint = entry
            if name == "constexpr":
                arg_types.append(None)
                constants.append(hint)  # the value (None for None args)
                hints.append("")
            else:
                arg_types.append(type_from_key(entry))
                constants.append(None)
                hints.append(hint)
        return cls(key, arg_types, constants, hints, num_warps, target, num_stages)

    def is_constexpr(self, i) -> bool:
        return self.arg_types[i] is None


def type_from_key(entry) -> Any:
    name, _hint = entry
    if not isinstance(name, str):
        return name  # argument types whose key is their IR type (tensor descriptors)
    if name == "constexpr":
        return None
    if name.startswith("*"):
        return PointerType(BY_NAME[name[1:]])
    return BY_NAME[name]
