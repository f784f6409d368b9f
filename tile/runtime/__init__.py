"""`tile.runtime` (`triton.runtime` after `import tile as triton`): the names of Triton 3.6's
runtime package that user code reads.

    from tile.runtime import driver
    props = driver.active.utils.get_device_properties(driver.active.get_current_device())

As in Triton, `driver` is the driver object, not a submodule (`tile/runtime/_driver.py`).
"""

from shared_codegen.frontend.errors import CompilationError
from shared_codegen.frontend.jit import JITFunction
from shared_codegen.interpreter.memory import InterpreterError
from tile.autotune import Autotuner, Config, Heuristics, autotune, heuristics
from shared_codegen.runtime.allocation import get_allocator, set_allocator
from tile.runtime._driver import GPUTarget, driver

__all__ = ["driver", "GPUTarget", "Autotuner", "Config", "Heuristics", "autotune", "heuristics",
           "JITFunction", "CompilationError", "InterpreterError", "set_allocator",
           "get_allocator"]
