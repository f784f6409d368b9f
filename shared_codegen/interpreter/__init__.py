"""The CPU interpreter: runs the IR of either language on numpy arrays."""
