"""The differential fuzzer of the tile DSL (see docs/fuzzing.md and benchmarks/fuzz_tile.py)."""
