"""`tile.runtime` (`triton.runtime` after `import tile as triton`): the names of Triton 3.6's
runtime package that user code reads, and its `errors` submodule.

    from tile.runtime import driver
    props = driver.active.utils.get_device_properties(driver.active.get_current_device())

As in Triton, `driver` is the driver object, not a submodule (`tile/runtime/_driver.py`).
"""

from shared_codegen.errors import CompilationError, InterpreterError, OutOfResources
from shared_codegen.frontend.jit import JITFunction
from shared_codegen.runtime.allocation import get_allocator, set_allocator
from tile.autotune import Autotuner, Config, Heuristics, autotune, heuristics
from tile.runtime._driver import GPUTarget, driver

__all__ = ["driver", "GPUTarget", "Autotuner", "Config", "Heuristics", "autotune", "heuristics",
           "JITFunction", "CompilationError", "InterpreterError", "OutOfResources",
           "set_allocator", "get_allocator", "errors"]


def __getattr__(name):
    # `triton.runtime.errors.OutOfResources` as an attribute chain, as in Triton.
    if name == "errors":
        import importlib
        return importlib.import_module(".errors", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
