"""Offline evaluation of a model before it ships (Spark wiring; the maths is in kernels.offline and kernels.sampled)."""
