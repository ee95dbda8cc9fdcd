"""Experiments on the method itself (README.md), run from the repository root as modules
(`python -m experiments.curriculum`)."""
