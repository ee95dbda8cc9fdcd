"""Measurements of genenv, run from the repository root as modules (`python -m benchmarks.speed.cli_startup`):
`speed/` holds the speed and scale benchmarks, `gpu/` the prepared check for a GPU machine, `record` what every
recorded result says about the machine."""
