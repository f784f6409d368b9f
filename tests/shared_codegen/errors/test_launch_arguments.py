"""Every launch-argument error names the kernel and the argument, word for word: the
generated launcher's binding, the specializer, launch options, grids and `tile.compile`'s
signature."""

import numpy as np
import pytest
from error_kernels import add_kernel

import tile
from shared_codegen.frontend.launch import pack_error
from shared_codegen.runtime.launcher import PackError, get_binder

X = np.ones(8, np.float32)
SIGNATURE = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"}

LAUNCHES = {
    "a missing runtime argument": (
        lambda: add_kernel[(1,)](X, X, BLOCK=8),
        "add_kernel() missing 1 required argument: 'n'"),
    "a missing constexpr": (
        lambda: add_kernel[(1,)](X, X, 8),
        "add_kernel() missing 1 required argument: 'BLOCK'"),
    "one argument too many": (
        lambda: add_kernel[(1,)](X, X, 8, 8, 9),
        "add_kernel() takes 4 arguments but 5 were given"),
    "a misspelt keyword": (
        lambda: add_kernel[(1,)](X, X, 8, BLOCK=8, BLOK=3),
        "add_kernel() got an unexpected keyword argument 'BLOK'"),
    "a string for a pointer": (
        lambda: add_kernel[(1,)](X, "s", 8, BLOCK=8),
        "argument `out_ptr` of add_kernel: cannot pass str 's' to a kernel: expected a tensor, "
        "an int, a float, a bool or None"),
    "an int wider than 64 bits": (
        lambda: add_kernel[(1,)](X, X, 2 ** 70, BLOCK=8),
        "argument `n` of add_kernel: integer argument 1180591620717411303424 does not fit in "
        "64 bits"),
    "an array for a constexpr": (
        lambda: add_kernel[(1,)](X, X, 8, BLOCK=X),
        "argument `BLOCK` of add_kernel: a constexpr value must be hashable (an int, float, "
        "bool, str, None, dtype or layout), got numpy.ndarray"),
    "num_warps not a power of two": (
        lambda: add_kernel[(1,)](X, X, 8, BLOCK=8, num_warps=3),
        "add_kernel: num_warps must be a power of two >= 1, got 3"),
    "num_stages not an int": (
        lambda: add_kernel[(1,)](X, X, 8, BLOCK=8, num_stages="3"),
        "add_kernel: num_stages must be an int >= 0, got '3'"),
    "a four-dimensional grid": (
        lambda: add_kernel[(1, 2, 3, 4)](X, X, 8, BLOCK=8),
        "grid of add_kernel must be a tuple of 1 to 3 ints, got (1, 2, 3, 4) (4 dimensions)"),
    "a negative grid": (
        lambda: add_kernel[(-1,)](X, X, 8, BLOCK=8),
        "grid dimension 0 of add_kernel must be a non-negative int, got -1"),
    "a grid function asking for a missing name": (
        lambda: add_kernel[lambda meta: (meta["BLOK"],)](X, X, 8, BLOCK=8),
        "the grid function of add_kernel asks for META['BLOK'], which is not a parameter of "
        "add_kernel (parameters: x_ptr, out_ptr, n, BLOCK)"),
    "run() with a constexpr given twice": (
        lambda: add_kernel.run(X, X, 8, 8, BLOCK=8, grid=(1,)),
        "add_kernel() got multiple values for argument 'BLOCK'"),
    "compile() without a runtime parameter": (
        lambda: tile.compile(add_kernel, {"x_ptr": "*fp32"}, {"BLOCK": 8}),
        "add_kernel: signature is missing parameter `out_ptr`"),
    "compile() with an unknown type": (
        lambda: tile.compile(add_kernel, {**SIGNATURE, "x_ptr": "*fp99"}, {"BLOCK": 8}),
        "add_kernel: parameter `x_ptr`: unknown type '*fp99'"),
    "compile() without a constexpr": (
        lambda: tile.compile(add_kernel, SIGNATURE, {}),
        "add_kernel: constexpr parameter `BLOCK` needs a value"),
    "compile() with a stranger in the signature": (
        lambda: tile.compile(add_kernel, {**SIGNATURE, "m": "i32"}, {"BLOCK": 8}),
        "add_kernel: signature names `m`, which is not a parameter of add_kernel (parameters: "
        "x_ptr, out_ptr, n, BLOCK)"),
    "compile() with a stranger in the constexprs": (
        lambda: tile.compile(add_kernel, SIGNATURE, {"BLOCK": 8, "BLOCK_M": 4}),
        "add_kernel: constexprs names `BLOCK_M`, which is not a parameter of add_kernel "
        "(parameters: x_ptr, out_ptr, n, BLOCK)"),
}


@pytest.mark.parametrize("case", list(LAUNCHES))
def test_the_error_names_the_kernel_and_the_argument(case):
    launch, message = LAUNCHES[case]
    with pytest.raises(tile.ArgumentError) as info:
        launch()
    assert str(info.value) == message


@pytest.mark.parametrize("launch, name", [
    (lambda: add_kernel[(1,)](X, X, 8, 8, BLOCK=8), "BLOCK"),
    (lambda: add_kernel[(1,)](X, X, 8, n=8, BLOCK=8), "n"),
])
def test_an_argument_given_twice_names_the_kernel_not_the_launcher(launch, name):
    # Python binds the generated launcher's parameters itself, so this one stays Python's
    # TypeError (ArgumentError's base); the launcher carries the kernel's name for it.
    with pytest.raises(TypeError) as info:
        launch()
    assert str(info.value) == f"add_kernel() got multiple values for argument '{name}'"


class _Variant:
    runtime_positions = [0, 1, 2]


def test_a_value_the_binder_cannot_pack_is_reported_by_parameter_name():
    binder = get_binder(("ptr", "ptr", "i32"))
    with pytest.raises(PackError) as info:
        binder.pack((0, object(), 1))
    assert (info.value.index, info.value.kind) == (1, "ptr")
    error = pack_error(add_kernel, _Variant(), info.value)
    assert isinstance(error, tile.ArgumentError)
    assert str(error).startswith(
        "argument `out_ptr` of add_kernel: cannot pass <object object at ")
    assert str(error).endswith(
        "> as a ptr parameter: cannot pass object as a pointer argument: expected a torch "
        "tensor, an object with __cuda_array_interface__, or an int address")
    with pytest.raises(PackError) as info:
        binder.pack((0, 0, 2 ** 31))
    assert str(pack_error(add_kernel, _Variant(), info.value)) == (
        "argument `n` of add_kernel: cannot pass 2147483648 as a i32 parameter: 'i' format "
        "requires -2147483648 <= number <= 2147483647")
