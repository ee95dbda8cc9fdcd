"""CLI start-up: wall time of `genenv --help` and `genenv status` on a 10-epoch run, against
`python -c "import typer"` measured in the same run. Goal: both under 2x that baseline.

    python -m benchmarks.speed.cli_startup [--repeat 15]

Writes benchmarks/speed/results/cli_startup/cli_startup.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from benchmarks.speed.common import genenv_cmd, median, synthetic_run, timed_command, write_result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run = synthetic_run(Path(tmp) / "run", epochs=10, n_tasks=64, k=8)
        genenv = genenv_cmd()
        # as users run it: Python may cache bytecode (a PYTHONDONTWRITEBYTECODE=1 shell would make every run
        # recompile genenv's own modules, an editable install having no .pyc from pip)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        cmds = {
            "baseline_import_typer": [sys.executable, "-c", "import typer"],
            "genenv_help": [*genenv, "--help"],
            "genenv_status": [*genenv, "status", "--run", str(run.root)],
        }
        for cmd in cmds.values():  # warm the file and bytecode caches once
            timed_command(cmd, 1, env)
        times = {name: timed_command(cmd, args.repeat, env) for name, cmd in cmds.items()}
    base = median(times["baseline_import_typer"])
    figures = {name: {"median_s": round(median(t), 4), "min_s": round(min(t), 4)} for name, t in times.items()}
    for name in ("genenv_help", "genenv_status"):
        figures[name]["ratio_to_baseline"] = round(median(times[name]) / base, 2)
        figures[name]["goal_met"] = median(times[name]) < 2 * base
    write_result("cli_startup", "cli_startup", figures, goal="genenv --help and genenv status (10 epochs) < 2x python -c 'import typer'",
                 repeat=args.repeat, run="synthetic: 10 epochs, 64 tool_call tasks x 8 rollouts each, all stages done")


if __name__ == "__main__":
    main()
