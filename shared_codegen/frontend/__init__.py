"""The shared frontend: Python AST to IR, jitted functions, compilation and launching."""
