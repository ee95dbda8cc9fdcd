"""The speed and scale benchmarks; each script writes results/<script>/<name>.json (README.md lists them)."""
