"""What the benchmarks (benchmarks/) and the experiments (experiments/) share, so that neither imports the other."""
