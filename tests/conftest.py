"""Test-wide hooks: tests marked `gpu` run only where a CUDA GPU answers."""

import pytest


def pytest_configure(config):
    # Registered here too so the marker is known even when pytest runs without the pyproject.
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU; skipped without one")


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if item.get_closest_marker("gpu")]
    if not gpu_items:
        return
    from shared_codegen.runtime.driver import has_gpu

    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (shared_codegen.runtime.driver.has_gpu() is False)")
    for item in gpu_items:
        item.add_marker(skip)


@pytest.fixture
def load_source(tmp_path):
    """`load_source(name, text)` -> the module that `text` defines, written as a real file so
    that jitted functions in it can read their source (printed kernels, README snippets)."""
    import importlib.util

    def load(name, text):
        path = tmp_path / f"{name}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
