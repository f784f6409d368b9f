"""The converter's forms for TMA: what tensor descriptors leave in the IR, printed as the
Gluon a person would write (`mbarrier.*`, `tma.async_copy_global_to_shared` /
`async_copy_shared_to_global` / `store_wait`, `tma.async_atomic_<op>` for `desc.atomic_<op>`,
`tma.make_tensor_descriptor`).

Host descriptors (`tile.tools.tensor_descriptor.TensorDescriptor` arguments) stay kernel
parameters: the converted kernel takes the same host descriptors. A descriptor the kernel
writes (`tl.make_tensor_descriptor` on sm_90a: a global-scratch slot, a staging buffer,
`tensormap_create`, a proxy fence and `reinterpret_tensor_descriptor`) prints as one
`tma.make_tensor_descriptor(base, shape, strides, block_shape, layout)` call, which Gluon
builds from the same ops; the helper ops print nothing.

`TmaForms` is a mixin of `tile.convert.GluonPrinter`; `tma_op` prints one op and returns
False for ops it does not know.
"""

from __future__ import annotations

from shared_codegen.ir.types import TensorDescriptorType
from shared_codegen.ops.arith.definition import BinaryOp, ConstantOp
from shared_codegen.ops.mbarrier.definition import (ArriveBarrierOp, BarrierExpectOp,
                                                    InitBarrierOp, InvalBarrierOp, WaitBarrierOp)
from shared_codegen.ops.shared_memory.definition import LocalAllocOp, LocalDeallocOp
from shared_codegen.ops.tma.definition import (AsyncTMACopyGlobalToLocalOp,
                                               AsyncTMACopyLocalToGlobalOp, AsyncTMAReduceOp,
                                               AsyncTMAStoreWaitOp)
from shared_codegen.ops.tma.descriptor_dims import TensorDescriptorDimOp
from shared_codegen.ops.tma.tensormap import (FILL_MODES, GlobalScratchAllocOp,
                                              ReinterpretTensorDescriptorOp, TensormapCreateOp,
                                              TensormapFenceproxyAcquireOp)

MBARRIER_TMA = "from gluon.language.nvidia.hopper import mbarrier, tma"


class TmaForms:
    def tma_op(self, op, out, indent) -> bool:
        pad = "    " * indent
        kind = op.opdef
        value = self.value
        if isinstance(kind, (GlobalScratchAllocOp, TensormapCreateOp,
                             TensormapFenceproxyAcquireOp, LocalDeallocOp)):
            # Parts of a kernel-written descriptor (printed at its reinterpret), and last
            # uses of shared memory, which Gluon needs no call for.
            return True
        if isinstance(kind, ReinterpretTensorDescriptorOp):
            self.make_descriptor(op, out, indent)
            return True
        if not isinstance(kind, (InitBarrierOp, BarrierExpectOp, ArriveBarrierOp, WaitBarrierOp,
                                 InvalBarrierOp, AsyncTMACopyGlobalToLocalOp,
                                 AsyncTMACopyLocalToGlobalOp, AsyncTMAStoreWaitOp,
                                 AsyncTMAReduceOp, TensorDescriptorDimOp)):
            return False
        self.imports.add(MBARRIER_TMA)
        if isinstance(kind, InitBarrierOp):
            out.append(pad + f"mbarrier.init({value(op.operands[0])}, count={op.attrs['count']})")
        elif isinstance(kind, BarrierExpectOp):
            pred = f", pred={value(op.operands[1])}" if len(op.operands) > 1 else ""
            out.append(pad + f"mbarrier.expect({value(op.operands[0])}, {op.attrs['size']}{pred})")
        elif isinstance(kind, ArriveBarrierOp):
            pred = f", pred={value(op.operands[1])}" if len(op.operands) > 1 else ""
            out.append(pad + f"mbarrier.arrive({value(op.operands[0])}, "
                             f"count={op.attrs['count']}{pred})")
        elif isinstance(kind, WaitBarrierOp):
            bar, phase, pred, deps = WaitBarrierOp.parts(op)
            extra = f", pred={value(pred)}" if pred is not None else ""
            if deps:
                extra += f", deps=[{', '.join(value(d) for d in deps)}]"
            out.append(pad + f"mbarrier.wait({value(bar)}, {value(phase)}{extra})")
        elif isinstance(kind, InvalBarrierOp):
            out.append(pad + f"mbarrier.invalidate({value(op.operands[0])})")
        elif isinstance(kind, AsyncTMACopyGlobalToLocalOp):
            desc, smem, bar, coords, pred = AsyncTMACopyGlobalToLocalOp.parts(op)
            extra = f", pred={value(pred)}" if pred is not None else ""
            out.append(pad + f"tma.async_copy_global_to_shared({value(desc)}, "
                             f"{self.coords(coords)}, {value(bar)}, {value(smem)}{extra})")
        elif isinstance(kind, AsyncTMACopyLocalToGlobalOp):
            desc, smem, coords = op.operands[0], op.operands[1], op.operands[2:]
            out.append(pad + f"tma.async_copy_shared_to_global({value(desc)}, "
                             f"{self.coords(coords)}, {value(smem)})")
        elif isinstance(kind, AsyncTMAStoreWaitOp):
            read_only = "" if op.attrs.get("read_only", True) else ", read_only=False"
            out.append(pad + f"tma.store_wait({op.attrs['pendings']}{read_only})")
        elif isinstance(kind, TensorDescriptorDimOp):
            self.descriptor_dim(op, out, indent)
        else:  # AsyncTMAReduceOp: newer Gluon's name (3.6 has the op behind desc.atomic_*)
            desc, smem, coords = op.operands[0], op.operands[1], op.operands[2:]
            out.append(pad + f"tma.async_atomic_{op.attrs['kind']}({value(desc)}, "
                             f"{self.coords(coords)}, {value(smem)})")
        return True

    def coords(self, coords) -> str:
        return "[" + ", ".join(self.value(c) for c in coords) + "]"

    def descriptor_dim(self, op, out, indent):
        which = {"shape": "shape", "stride": "strides"}.get(op.attrs["kind"])
        if which is None:
            raise self.fail(f"{op.loc}: a descriptor's {op.attrs['kind']} field has no "
                            f"Gluon spelling")
        self.bind(op.results[0], f"{self.value(op.operands[0])}.{which}[{op.attrs['index']}]",
                  out, indent)

    # ---- kernel-written descriptors --------------------------------------------------------
    def tensor_map_helper(self, op) -> bool:
        """A staging buffer or byte-stride product used only to write a tensor map."""
        if not isinstance(op.opdef, (LocalAllocOp, BinaryOp)) or len(op.results) != 1:
            return False
        users = self.uses.get(op.results[0], [])
        return bool(users) and all(
            isinstance(u.opdef, TensormapCreateOp) or
            (isinstance(u.opdef, LocalDeallocOp) and isinstance(op.opdef, LocalAllocOp))
            for u in users)

    def make_descriptor(self, op, out, indent):
        scratch = op.operands[0]
        create = next((u for u in self.uses.get(scratch, [])
                       if isinstance(u.opdef, TensormapCreateOp)), None)
        if create is None:
            raise self.fail(f"{op.loc}: a tensor descriptor read from global scratch no "
                            f"tensormap_create writes")
        _ptr, _staging, base, dims, byte_strides = TensormapCreateOp.parts(create)
        self.tensor_map_itemsize = base.type.element.itemsize
        ty: TensorDescriptorType = op.results[0].type
        shape = [self.value(d) for d in reversed(dims)]
        strides = [self.element_stride(s) for s in reversed(byte_strides)] + ["1"]
        padding = ", padding_option='nan'" if create.attrs["fill_mode"] == FILL_MODES["nan"] \
            else ""
        self.imports.add(MBARRIER_TMA)
        result = op.results[0]
        hint = result.name_hint
        if not hint:  # the tile kernel's name is on its aggregate: a_ptr -> a_desc
            stem = self.value(base)
            stem = stem[:-4] if stem.endswith("_ptr") else stem
            hint = f"{stem}_desc" if stem.isidentifier() else ""
        name = self.names.fresh(hint)
        out.append("    " * indent + f"{name} = tma.make_tensor_descriptor({self.value(base)}, "
                                     f"[{', '.join(shape)}], [{', '.join(strides)}], "
                                     f"{list(ty.block_shape)}, {self.layout(ty.layout)}{padding})")
        self.expr[result] = name

    def element_stride(self, byte_stride) -> str:
        """The element stride a byte stride was computed from (`stride * itemsize`)."""
        owner = byte_stride.defining_op
        if owner is not None and isinstance(owner.opdef, BinaryOp) and \
                owner.opdef.spelling_of(owner) == "*":
            return self.value(owner.operands[0])
        if owner is not None and isinstance(owner.opdef, ConstantOp):  # a folded product
            itemsize = self.tensor_map_itemsize
            return str(int(owner.attrs["value"]) // itemsize)
        raise self.fail(f"{owner.loc if owner is not None else '?'}: a tensor map's byte "
                        f"stride that is not `stride * itemsize`")
