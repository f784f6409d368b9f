"""The converter's forms for tensor-core matmuls and their shared-memory pipelines: what
`tl.dot` and the software pipeliner leave in the IR, printed as the Gluon a person would write
(`gl.allocate_shared_memory`, `.index`, `.load`, `async_copy.*`, `warpgroup_mma` /
`warpgroup_mma_wait`, `fence_async_shared`, `mma_v2`, `gl.dot_fma`).

`MmaForms` is a mixin of `tile.convert.GluonPrinter`; `mma_op` prints one op and returns
False for ops it does not know. The modules the forms need are imported at the top of the
output (`self.imports`).
"""

from __future__ import annotations

from shared_codegen.ops.async_copy.definition import (AsyncCommitGroupOp,
                                                      AsyncCopyGlobalToLocalOp, AsyncWaitOp)
from shared_codegen.ops.dot.definition import DotFmaOp, MmaV2Op
from shared_codegen.ops.fence.definition import FenceAsyncSharedOp
from shared_codegen.ops.shared_memory.definition import (LocalAllocOp, LocalLoadOp,
                                                         MemDescIndexOp, MemDescTransOp)
from shared_codegen.ops.wgmma.definition import WarpGroupDotOp, WarpGroupDotWaitOp

AMPERE = "from gluon.language.nvidia.ampere import async_copy, mma_v2"
HOPPER = "from gluon.language.nvidia.hopper import fence_async_shared"
WGMMA = "from gluon.language.nvidia.hopper._wgmma import warpgroup_mma, warpgroup_mma_wait"


class MmaForms:
    def mma_op(self, op, out, indent) -> bool:
        pad = "    " * indent
        kind = op.opdef
        args = [self.expr.get(v) for v in op.operands]
        res = op.results[0] if op.results else None
        if isinstance(kind, LocalAllocOp):
            ty = res.type
            value = f", {args[0]}" if op.operands else ""
            self.bind(res, f"gl.allocate_shared_memory({self.dtype(ty.element)}, "
                           f"{list(ty.shape)}, {self.layout(ty.layout)}{value})", out, indent)
        elif isinstance(kind, MemDescIndexOp):
            self.bind(res, f"{args[0]}.index({args[1]})", out, indent)
        elif isinstance(kind, MemDescTransOp):
            self.bind(res, f"{args[0]}.permute({list(op.attrs['order'])})", out, indent)
        elif isinstance(kind, LocalLoadOp):
            self.bind(res, f"{args[0]}.load({self.layout(res.type.layout)})", out, indent)
        elif isinstance(kind, AsyncCopyGlobalToLocalOp):
            self.imports.add(AMPERE)
            ptr, mem, mask = AsyncCopyGlobalToLocalOp.parts(op)
            parts = [self.value(mem), self.value(ptr)]
            if mask is not None:
                parts.append(f"mask={self.value(mask)}")
            if op.attrs.get("cache"):
                parts.append(f"cache_modifier={op.attrs['cache']!r}")
            if op.attrs.get("evict"):
                parts.append(f"eviction_policy={op.attrs['evict']!r}")
            out.append(pad + f"async_copy.async_copy_global_to_shared({', '.join(parts)})")
        elif isinstance(kind, AsyncCommitGroupOp):
            self.imports.add(AMPERE)
            out.append(pad + "async_copy.commit_group()")
        elif isinstance(kind, AsyncWaitOp):
            self.imports.add(AMPERE)
            out.append(pad + f"async_copy.wait_group({op.attrs['num']})")
        elif isinstance(kind, FenceAsyncSharedOp):
            self.imports.add(HOPPER)
            cluster = "cluster=True" if op.attrs.get("cluster") else ""
            out.append(pad + f"fence_async_shared({cluster})")
        elif isinstance(kind, WarpGroupDotOp):
            self.imports.add(WGMMA)
            extra = [f"use_acc={args[3]}"]
            if "input_precision" in op.attrs:
                extra.append(f"precision={op.attrs['input_precision']!r}")
            if op.attrs.get("max_num_imprecise_acc") is not None:
                extra.append(f"max_num_imprecise_acc={op.attrs['max_num_imprecise_acc']}")
            if op.attrs.get("is_async"):
                extra.append("is_async=True")
            self.bind(res, f"warpgroup_mma({', '.join(args[:3] + extra)})", out, indent)
        elif isinstance(kind, WarpGroupDotWaitOp):
            self.imports.add(WGMMA)
            call = (f"warpgroup_mma_wait(num_outstanding={op.attrs['pendings']}, "
                    f"deps=[{', '.join(args)}])")
            names = [self.names.fresh(r.name_hint) for r in op.results]
            out.append(pad + f"{', '.join(names)} = {call}")
            for r, n in zip(op.results, names):
                self.expr[r] = n
        elif isinstance(kind, MmaV2Op):
            self.imports.add(AMPERE)
            precision = op.attrs.get("input_precision")
            extra = f", input_precision={precision!r}" if precision else ""
            self.bind(res, f"mma_v2({', '.join(args)}{extra})", out, indent)
        elif isinstance(kind, DotFmaOp):
            self.bind(res, f"gl.dot_fma({', '.join(args)})", out, indent)
        else:
            return False
        return True


__all__ = ["MmaForms"]
