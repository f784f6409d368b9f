"""shared_codegen/lowering/backend.performance_losses: ptxas' "Potential Performance Loss"
notes read out of an nvJitLink info log; the one the compiler handles itself (C7504,
setmaxnreg dropped: the kernel goes through the driver JIT) is left out."""

from shared_codegen.lowering.backend import performance_losses

LOG = """\
ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in the function 'dkdv_kernel' in line 1193
ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the function 'attention_kernel'
ptxas info    : (C7504) Potential Performance Loss: setmaxnreg ignored; unable to determine register count at entry in the function 'ws_kernel'
ptxas info    : 0 bytes gmem
ptxas info    : Used 242 registers, used 1 barriers
"""


def test_notes_with_their_code_reason_function_and_ptx_line():
    assert performance_losses(LOG) == [
        {"code": "C7515", "reason": "wgmma.mma_async instructions are serialized due to non "
         "wgmma instructions defining accumulator registers of a wgmma between start and end "
         "of the pipeline stage", "function": "dkdv_kernel", "ptx_line": 1193},
        {"code": "C7512", "reason": "wgmma.mma_async instructions are serialized due to "
         "insufficient register resources", "function": "attention_kernel", "ptx_line": 0},
    ]


def test_a_log_without_notes_has_none():
    assert performance_losses("ptxas info    : Used 32 registers\n") == []
