"""The prepared GPU check: `pack` gathers what a bare GPU machine lacks, `check` runs there and records its results
under benchmarks/speed/results/gpu/ (README.md says how to run it)."""
