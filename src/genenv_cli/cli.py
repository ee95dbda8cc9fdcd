"""The `genenv` command line: one thin command per stage, plus init and status.

Every command finds its run from --run DIR, else $GENENV_RUN, else the current directory, and takes
`--set SECTION.KEY=VALUE` overrides for that invocation. Heavy libraries (torch, transformers, trl) are
imported inside the stages, never here, so `genenv --help` and `genenv status` start fast.
"""

# no `from __future__ import annotations` here: typer would have to evaluate every annotation string at start-up

import json
import os
import sys
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from genenv_cli import __version__
from genenv_cli.errors import ConfigError, GenenvError, shorten_message
from genenv_cli.stages import STAGES

app = typer.Typer(
    name="genenv",
    help="Train LLM agents by co-evolution with an LLM environment simulator (GenEnv). Each stage reads and "
         "writes files in a run directory; an epoch is generate-tasks -> rollout -> score -> update-agent -> "
         "update-env.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain click help: typer's rich help renderer imports rich.markdown & co. and doubles `genenv --help`'s
    # start-up (benchmarks/speed/cli_startup.py)
    rich_markup_mode=None,
)

RunOpt = Annotated[Path | None, typer.Option("--run", help="Run directory (default: $GENENV_RUN, else the current directory).",
                                             show_default=False)]
SetOpt = Annotated[list[str] | None, typer.Option("--set", help="Override a config key for this command: "
                                                  "SECTION.KEY=VALUE (VALUE read as TOML, else as a string). Repeatable.",
                                                  show_default=False)]
EPOCH_MAX = 99_999  # rundir.EPOCH_MAX (not imported: the CLI's import path stays light)
EpochOpt = Annotated[int, typer.Option("--epoch", min=1, max=EPOCH_MAX, help="Epoch number (from 1).")]
ForceOpt = Annotated[bool, typer.Option("--force", help="Redo the stage even if it is up to date.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress output.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the final summary as one JSON object.")]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"genenv {__version__}")
        raise typer.Exit()


_DEBUG = {"on": False}


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Show the version and exit.")] = False,
          debug: Annotated[bool, typer.Option("--debug", envvar="GENENV_DEBUG",
                                              help="Show the Python traceback of an error (also GENENV_DEBUG=1).")] = False,
          ) -> None:
    """genenv command line."""
    _DEBUG["on"] = debug


class _Where:
    """What the error path knows about the command so far: the run (a fallback path for messages) and its log."""

    run: Path | None = None
    log: Path | None = None


def _fail(message: str, code: int = 2) -> None:
    typer.secho(f"error: {shorten_message(message)}", fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


# Click's own exits and usage errors pass through _errors untouched. typer >= 0.28 vendors click (its exceptions
# are typer's, not the `click` package's, and importing `click` would cost ~25 ms of start-up and a dependency
# we do not declare); ClickException is found through typer's BadParameter so that older typer works too.
_CLICK_EXITS = (typer.Exit, typer.Abort,
                next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"))


@contextmanager
def _errors():
    """Every failure a user, a disk or a model can cause: one paragraph on stderr (the path, what was wrong, what
    to do) and exit 2, no traceback; `--debug` shows the traceback. Anything else is a bug in genenv: one
    paragraph saying so, the traceback in the command's log, exit 1."""
    where = _Where()
    try:
        yield where
    except KeyboardInterrupt:
        typer.secho("interrupted; completed stages keep their outputs, this one left none.", err=True)
        raise typer.Exit(130) from None
    except _CLICK_EXITS:
        raise
    except BaseException as exc:
        if _DEBUG["on"] or isinstance(exc, SystemExit | GeneratorExit):
            raise
        from genenv_cli.errors import describe_os_error, disk_full

        if isinstance(exc, GenenvError):
            _fail(str(exc), exc.exit_code)
        if isinstance(exc, OSError):
            _fail(describe_os_error(exc, where.run))
        if disk_full(exc):
            _fail(f"no space left on device at {where.run or Path.cwd()} ({str(exc)[:200]}). Free some space and "
                  f"rerun the command; completed stages keep their outputs.")
        if isinstance(exc, UnicodeDecodeError):
            _fail(f"a file of {where.run or 'the run'} is not UTF-8 text ({exc}). Fix or remove it and rerun.")
        if isinstance(exc, MemoryError):
            _fail("out of memory. Lower the sizes in the config (generate.tasks_per_epoch, rollout.group_size, the "
                  "batch sizes) or use a bigger machine, and rerun.")
        _report_bug(exc, where)


def _report_bug(exc: BaseException, where: _Where) -> None:
    import traceback

    trace = "".join(traceback.format_exception(exc))
    kept = None
    if where.log is not None:
        try:
            from genenv_cli.ui import open_log

            where.log.parent.mkdir(parents=True, exist_ok=True)
            with open_log(where.log) as fh:
                fh.write(trace)
            kept = where.log
        except OSError:
            kept = None
    _fail(f"unexpected {type(exc).__name__}: {str(exc)[:300]}. This is a bug in genenv, not something you did; "
          f"{'the traceback is in ' + str(kept) if kept else 'rerun with --debug to see the traceback'}. Please "
          f"report it.", 1)


def _open(run: Path | None, sets: list[str] | None):
    from genenv_cli.rundir import find_run

    run_dir = find_run(run)
    return run_dir, run_dir.load_config(sets or [])


def _stage(stage: str, run: Path | None, sets: list[str] | None, quiet: bool, as_json: bool,
           call: Callable[[Any, Any, Any, Any], Any], epoch: int | None) -> None:
    """Run `call(stage module, run_dir, cfg, ui)` for a stage command, with its log and its summary line."""
    from genenv_cli.summaries import summarize
    from genenv_cli.ui import UI

    with _errors() as where:
        where.run = run
        run_dir, cfg = _open(run, sets)
        where.run, where.log = run_dir.root, run_dir.logs_dir() / f"{stage}.log"
        ui = UI(quiet=quiet or as_json, json_summary=as_json, log_path=run_dir.logs_dir() / f"{stage}.log")
        ui.log(f"START {stage} epoch={epoch} pid={os.getpid()} argv={sys.argv[1:]}")
        result = call(STAGES[stage].load(), run_dir, cfg, ui)
        fields, text = summarize(result)
        ui.summary(stage, epoch, fields, text)


def _domain_specs(specs: list[str]) -> tuple[str, dict[str, float]]:
    """--domain values -> (run.domain, run.domains): one NAME is a single-domain run; several (NAME or
    NAME=SHARE) a mixed one, where the domains given no share split what the others leave equally."""
    from genenv_cli.config import MIXED
    from genenv_cli.errors import ConfigError

    parsed: dict[str, float | None] = {}
    for text in specs:
        name, _, raw = text.partition("=")
        name = name.strip()
        if name in parsed:
            raise ConfigError(f"--domain {name} is given twice.")
        share = None
        if raw:
            try:
                share = float(raw)
            except ValueError:
                raise ConfigError(f"--domain {text}: the share must be a number, e.g. --domain {name}=0.5.") from None
            if not 0.0 < share <= 1.0:
                raise ConfigError(f"--domain {text}: the share must be above 0 and at most 1.")
        parsed[name] = share
    if len(parsed) == 1:
        (name, share), = parsed.items()
        if share is not None:
            raise ConfigError(f"--domain {specs[0]}: a share is for a run on several domains "
                              f"(--domain A=0.6 --domain B=0.4); one domain takes them all.")
        return name, {}
    given = sum(v for v in parsed.values() if v is not None)
    open_ = [k for k, v in parsed.items() if v is None]
    if open_ and given >= 1.0:
        raise ConfigError(f"--domain: the shares given sum to {given:g}, leaving nothing for "
                          f"{', '.join(open_)}; give every domain a share (summing to 1) or fewer shares.")
    rest = (1.0 - given) / len(open_) if open_ else 0.0
    return MIXED, {k: (rest if v is None else v) for k, v in parsed.items()}


def _seed_specs(texts: list[str], names: list[str], mixed: bool) -> dict[str, list[Path]]:
    """--seeds values -> {domain: files}: FILE for a single-domain run, NAME=FILE in a mixed one."""
    from genenv_cli.errors import ConfigError

    if not mixed:
        return {names[0]: [Path(t) for t in texts]}
    out: dict[str, list[Path]] = {}
    for text in texts:
        name, sep, path = text.partition("=")
        if not sep or name not in names or not path:
            raise ConfigError(f"--seeds {text}: this run has several domains ({', '.join(names)}); say which one a "
                              f"seed file is for: --seeds NAME=FILE, e.g. --seeds {names[0]}=tasks.jsonl.")
        out.setdefault(name, []).append(Path(path))
    return out


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(help="Run directory to create (an existing folder gets a genenv.toml).")],
    domain: Annotated[list[str] | None, typer.Option(
        "--domain", help="Task domain (see `genenv domains`); repeat it for a run on several domains, each NAME or "
                         "NAME=SHARE (a share of each epoch's tasks; domains given none split the rest equally). "
                         "Default: tool_call.")] = None,
    agent_model: Annotated[str | None, typer.Option(help="Base agent model: HF id, local folder or `embedded` "
                                                    "(default: the preset's, else embedded).")] = None,
    env_model: Annotated[str | None, typer.Option(help="Base environment model: HF id, local folder or `embedded` "
                                                  "(default: the preset's, else embedded).")] = None,
    preset: Annotated[str | None, typer.Option("--preset", help="Start from a named preset: `paper` is the GenEnv "
                                               "paper's protocol; --set given alongside still wins.")] = None,
    sets: SetOpt = None,
    seeds: Annotated[list[str] | None, typer.Option(
        "--seeds", help="Base tasks in the domain's own file format (a benchmark's file, read by the loader "
                        "`evaluate --data` uses); repeatable. Copied into RUN/seeds. With several domains: "
                        "NAME=FILE. Default: the built-in seeds.")] = None,
    validation_share: Annotated[float, typer.Option(
        help="Share of --seeds tasks drawn (with run.seed) as validation when the file states no split.")] = 0.2,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing genenv.toml (and RUN/seeds).")] = False,
) -> None:
    """Create a run directory with a genenv.toml listing every setting (defaults visible)."""
    from genenv_cli.config import CONFIG_NAME, apply_overrides, config_from_dict, render_config
    from genenv_cli.domains import get_domain
    from genenv_cli.errors import ConfigError

    with _errors():
        run_domain, shares = _domain_specs(domain or ["tool_call"])
        names = list(shares) or [run_domain]
        doms = {name: get_domain(name) for name in names}
        by_domain = _seed_specs(list(seeds or []), names, bool(shares))
        target = directory / CONFIG_NAME
        if target.exists() and not force:
            raise ConfigError(f"{target} already exists; edit it, or pass --force to overwrite it.")
        header, preset_sets, notes = "", [], []
        if preset is not None:
            from genenv_cli.presets import get_preset, preset_header, preset_overrides, vllm_installed

            chosen = get_preset(preset)
            preset_sets, notes = preset_overrides(chosen, vllm_installed())
            overridden = [s for s in sets or [] if s.split("=", 1)[0].strip() in
                          {p.split("=", 1)[0] for p in preset_sets}]
            header = preset_header(chosen, notes, overridden)
        run_keys: dict[str, Any] = {"domain": run_domain, **({"domains": shares} if shares else {})}
        data = apply_overrides({"run": run_keys}, preset_sets)
        for section, model in (("agent", agent_model), ("env", env_model)):
            if model is not None or preset is None:
                data.setdefault(section, {})["model"] = model or "embedded"
        data = apply_overrides(data, sets or [])
        where = "genenv init options" + (f" with preset {preset}" if preset else "")
        cfg = config_from_dict(data, where)
        for name, dom in doms.items():
            if not by_domain.get(name) and not dom.builtin_seeds:
                how = f"--seeds {name}=FILE" if shares else "--seeds FILE"
                raise ConfigError(f"domain {name} ships no seed tasks: {how} is required ({dom.seed_format}).")
        seed_notes = []
        staged = []  # every domain's seed folder is built and checked before any of them replaces the run's own
        try:
            for name, paths in by_domain.items():
                if not paths:
                    continue
                from genenv_cli.domains.seedfiles import SEEDS_DIR, SEEDS_FILE, stage_seeds

                folder = f"{SEEDS_DIR}/{name}" if shares else SEEDS_DIR
                one = stage_seeds(doms[name], paths, directory, seed=cfg.run.seed,
                                  validation_share=validation_share, force=force, folder=folder)
                staged.append(one)
                manifest = one.manifest
                if shares:
                    data.setdefault("run", {}).setdefault("domain_seeds", {})[name] = f"{folder}/seeds.jsonl"
                else:
                    data.setdefault("run", {})["seeds"] = SEEDS_FILE
                cfg = config_from_dict(data, where)
                counts = manifest["counts"]
                note = (f"{name + ': ' if shares else ''}{counts['train']} train + {counts['validation']} "
                        f"validation seeds ({manifest['split']})")
                if manifest["skipped"]:
                    note += (f"; {len(manifest['skipped'])} items left out as not self-consistent, reasons in "
                             f"{directory / folder / 'manifest.json'}")
                if manifest.get("skipped_files"):
                    note += (f"; {len(manifest['skipped_files'])} files without tasks left out: "
                             + ", ".join(f"{Path(f['file']).name} ({f['reason']})" for f in manifest["skipped_files"]))
                seed_notes.append(note)
            directory.mkdir(parents=True, exist_ok=True)
            # the seed folders and genenv.toml in one commit: genenv.toml's rename is the commit point, and a
            # failure before it puts every previous seed folder back (rundir.swap_in)
            from genenv_cli.rundir import refuse_link, swap_in, tmp_name, write_new

            refuse_link(target, "the run's config")
            config_tmp = tmp_name(target)
            write_new(config_tmp, (header + render_config(cfg)).encode("utf-8"))
            swap_in([(one.tmp, one.final) for one in staged], config_tmp, target)
        finally:
            import shutil

            for one in staged:
                shutil.rmtree(one.tmp, ignore_errors=True)
            if directory.is_dir():
                from genenv_cli.rundir import remove_entry, tmp_name

                remove_entry(tmp_name(target))
        for note in notes:
            typer.echo(f"note: {note}", err=True)
        said = ("domains " + ", ".join(f"{k} {100 * v:.0f}%" for k, v in cfg.run.shares().items())
                if shares else f"domain {run_domain}")
        seed_note = "".join(f", {n}" for n in seed_notes)
        typer.echo(f"created {target} ({said}, agent {cfg.agent.model}, environment {cfg.env.model}"
                   f"{f', preset {preset}' if preset else ''}{seed_note}). "
                   f"Next: genenv generate-tasks --run {directory} --epoch 1")


# The stage commands: typer reads their options from real signatures; their names and help come from STAGES.

@app.command("generate-tasks", help=STAGES["generate-tasks"].help)
def generate_tasks(epoch: EpochOpt, run: RunOpt = None, sets: SetOpt = None, force: ForceOpt = False,
                   quiet: QuietOpt = False, as_json: JsonOpt = False) -> None:
    _stage("generate-tasks", run, sets, quiet, as_json, lambda m, r, c, ui: m.run(r, c, epoch, force=force, ui=ui),
           epoch)


@app.command("rollout", help=STAGES["rollout"].help)
def rollout(epoch: EpochOpt, run: RunOpt = None, sets: SetOpt = None, force: ForceOpt = False,
            shard: Annotated[str | None, typer.Option(help="Do shard I of N of the tasks, e.g. 2/4; `score` merges them.")] = None,
            quiet: QuietOpt = False, as_json: JsonOpt = False) -> None:
    _stage("rollout", run, sets, quiet, as_json,
           lambda m, r, c, ui: m.run(r, c, epoch, shard=m.parse_shard(shard), force=force, ui=ui), epoch)


@app.command("score", help=STAGES["score"].help)
def score(epoch: EpochOpt, run: RunOpt = None, sets: SetOpt = None, force: ForceOpt = False,
          quiet: QuietOpt = False, as_json: JsonOpt = False) -> None:
    _stage("score", run, sets, quiet, as_json, lambda m, r, c, ui: m.run(r, c, epoch, force=force, ui=ui), epoch)


@app.command("update-agent", help=STAGES["update-agent"].help)
def update_agent(epoch: EpochOpt, run: RunOpt = None, sets: SetOpt = None, force: ForceOpt = False,
                 quiet: QuietOpt = False, as_json: JsonOpt = False) -> None:
    _stage("update-agent", run, sets, quiet, as_json, lambda m, r, c, ui: m.run(r, c, epoch, force=force, ui=ui),
           epoch)


@app.command("update-env", help=STAGES["update-env"].help)
def update_env(epoch: EpochOpt, run: RunOpt = None, sets: SetOpt = None, force: ForceOpt = False,
               quiet: QuietOpt = False, as_json: JsonOpt = False) -> None:
    _stage("update-env", run, sets, quiet, as_json, lambda m, r, c, ui: m.run(r, c, epoch, force=force, ui=ui),
           epoch)


@app.command("run")
def run_cmd(epochs: Annotated[int, typer.Option("--epochs", min=1, max=EPOCH_MAX, help="Run epochs 1..N.")],
            run: RunOpt = None, sets: SetOpt = None,
            from_stage: Annotated[str | None, typer.Option("--from", help="Redo this stage and every later one.")] = None,
            from_epoch: Annotated[int | None, typer.Option("--from-epoch", min=1, max=EPOCH_MAX, help="Epoch of --from (default 1).")] = None,
            quiet: QuietOpt = False, as_json: JsonOpt = False) -> None:
    """Run whole epochs (generate-tasks -> rollout -> score -> update-agent -> update-env), each stage in its own
    process, resuming where it stopped."""
    from genenv_cli.runner import spawn_epochs
    from genenv_cli.ui import UI

    with _errors() as where:
        where.run = run
        run_dir, _ = _open(run, sets)  # a bad config or --set fails here, before any stage starts
        where.run, where.log = run_dir.root, run_dir.logs_dir() / "run.log"
        ui = UI(quiet=quiet or as_json, json_summary=as_json, log_path=run_dir.logs_dir() / "run.log")
        ui.log(f"START run pid={os.getpid()} argv={sys.argv[1:]}")
        spawn_epochs(run_dir, epochs, ui=ui, sets=sets or [], from_stage=from_stage, from_epoch=from_epoch,
                     quiet=quiet, as_json=as_json)


@app.command()
def status(run: RunOpt = None, sets: SetOpt = None,
           as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Each epoch's stages (done / stale / incomplete / missing / running) and its curriculum numbers."""
    from genenv_cli import status as st

    with _errors() as where:
        where.run = run
        run_dir, cfg = _open(run, sets)
        where.run = run_dir.root
        rows = st.collect(run_dir, cfg)
        from genenv_cli.pruning import disk_lines

        if as_json:
            typer.echo(json.dumps({"run": str(run_dir.root), "epochs": rows}, indent=2, default=str))
            return
        if not rows:
            typer.echo(f"{run_dir.root}: no epoch started yet. Next: genenv generate-tasks --epoch 1")
            return
        if not sys.stdout.isatty():
            typer.echo(st.render_plain(rows, run_dir, cfg))
            for line in st.domain_lines(rows, cfg) + disk_lines(run_dir):
                typer.echo(line)
            for note in st.stale_notes(rows):
                typer.echo(note)
            return
        from rich.console import Console

        console = Console()
        console.print(st.render(rows, run_dir, cfg))
        for line in st.domain_lines(rows, cfg) + disk_lines(run_dir):
            console.print(line, highlight=False)
        for note in st.stale_notes(rows):
            console.print(note, style="yellow")


@app.command("evaluate", help=STAGES["evaluate"].help)
def evaluate(
    bench: Annotated[str | None, typer.Option("--bench", help="Benchmark (see --list).")] = None,
    epoch: Annotated[int | None, typer.Option("--epoch", min=0, max=EPOCH_MAX, help="Evaluate epoch N's agent (default: the run's latest; 0: the base agent model).")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Evaluate this model instead: HF id, folder or `embedded`.")] = None,
    data: Annotated[Path | None, typer.Option("--data", help="The benchmark's official files (a file or folder).")] = None,
    predictions: Annotated[Path | None, typer.Option("--predictions", help="Score this JSONL of {id, output} instead of running a model.")] = None,
    export: Annotated[Path | None, typer.Option("--export", help="Write the evaluation inputs (id, messages, tools, gold) as JSONL and stop.")] = None,
    limit: Annotated[int | None, typer.Option("--limit", min=1, max=10**9, help="Only the first K samples.")] = None,
    split: Annotated[str | None, typer.Option("--split", help="Benchmark split / subset.")] = None,
    version: Annotated[str | None, typer.Option("--version", help="Data version (bfcl: v4 or v3).")] = None,
    protocol: Annotated[str, typer.Option("--protocol", help="official, or paper (the GenEnv paper's decomposition).")] = "official",
    list_: Annotated[bool, typer.Option("--list", help="List the benchmarks and exit.")] = False,
    run: RunOpt = None, sets: SetOpt = None, quiet: QuietOpt = False, as_json: JsonOpt = False,
) -> None:
    from genenv_cli.stages import evaluate as stage

    with _errors() as where:
        where.run = run
        if list_:
            _list_benchmarks(stage.list_benchmarks(), as_json)
            return
        if bench is None:
            raise ConfigError("--bench NAME is required (see `genenv evaluate --list`).")
        from genenv_cli.evals import BENCHMARKS

        BENCHMARKS.get(bench)  # an unknown name fails here, with the nearest known one
        run_dir, cfg = _open_optional(run, sets, required=predictions is None and export is None and model is None)
        from genenv_cli.ui import UI

        if run_dir is not None:
            where.run, where.log = run_dir.root, run_dir.logs_dir() / "evaluate.log"
        ui = UI(quiet=quiet or as_json, json_summary=as_json,
                log_path=run_dir.logs_dir() / "evaluate.log" if run_dir else None)
        out_dir = None
        if run_dir is not None and export is None and not _writable(run_dir.evals_dir(bench)):
            out_dir = _elsewhere(run_dir, "evals")
            ui.warn(f"{run_dir.root} is read-only; the results go to {out_dir / bench} instead")
        result = stage.evaluate(run_dir, cfg, bench, epoch=epoch, model=model, data=data, predictions=predictions,
                                export=export, limit=limit, split=split, version=version, protocol=protocol, ui=ui,
                                out_dir=out_dir)
        if export is not None:
            ui.summary("evaluate", None, result, f"exported {result['exported']} samples to {result['path']}")
            return
        if not quiet and not as_json:
            from rich.console import Console

            from genenv_cli.views import eval_table

            Console(stderr=True).print(eval_table(result))
        h = result["headline"]
        value = "-" if h["value"] is None else f"{h['value']:.1f}"
        ui.summary("evaluate", result["epoch"], {k: result[k] for k in ("bench", "model_tag", "protocol", "n", "headline", "path")},
                   f"evaluate {bench} ({result['protocol']}) {result['model_tag']}: {h['name']} {value} over "
                   f"{result['n']} samples; wrote {result['path']}")


def _writable(folder: Path) -> bool:
    """Whether files can be created in `folder` (or, when it does not exist yet, in its nearest existing parent)."""
    import os

    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK):
        return False
    try:  # os.access says yes to root on a read-only mount: ask the file system itself
        import tempfile

        with tempfile.TemporaryFile(dir=probe):
            return True
    except OSError:
        return False


def _elsewhere(run_dir: Any, kind: str) -> Path:
    """Where a read-only run's report or evaluation results go: the user cache, one folder per run."""
    import hashlib

    from genenv_cli.paths import cache_dir

    tag = hashlib.sha256(str(run_dir.root).encode()).hexdigest()[:8]
    return cache_dir() / kind / f"{run_dir.root.name}-{tag}"


def _open_optional(run: Path | None, sets: list[str] | None, required: bool):
    from genenv_cli.config import Config, apply_overrides, config_from_dict
    from genenv_cli.errors import ConfigError as _CE

    try:
        return _open(run, sets)
    except _CE:
        if required or run is not None:
            raise
        return None, config_from_dict(apply_overrides({}, sets or []), "--set") if sets else Config()


def _list_benchmarks(rows: list[dict], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console

    from genenv_cli.views import benchmark_table

    Console(width=160).print(benchmark_table(rows))


@app.command()
def report(run: RunOpt = None, sets: SetOpt = None,
           out: Annotated[Path | None, typer.Option("--out", help="HTML file to write (default RUN/report/report.html); "
                                                   "the PNG charts go beside it.")] = None,
           as_json: Annotated[bool, typer.Option("--json", help="Print the paths and the numbers as JSON.")] = False) -> None:
    """One self-contained HTML report of the curriculum (opens offline), plus each chart as a PNG."""
    from genenv_cli.report import build_report

    with _errors() as where:
        where.run = run
        run_dir, cfg = _open(run, sets)
        where.run = run_dir.root
        if out is None and not _writable(run_dir.root / "report"):
            out = _elsewhere(run_dir, "report") / "report.html"
            typer.secho(f"note: {run_dir.root} is read-only; writing the report to {out} instead (--out FILE to "
                        f"choose)", err=True)
        result = build_report(run_dir, cfg, out)
        if as_json:
            typer.echo(json.dumps(result, indent=2, default=str))
        else:
            typer.echo(f"wrote {result['html']} and {len(result['pngs'])} PNG charts ({result['epochs']} epochs)")


@app.command()
def compare(runs: Annotated[list[Path], typer.Argument(help="Run directories; runs equal in all but run.seed form one arm.")],
            out: Annotated[Path, typer.Option("--out", help="HTML file to write; the PNG charts go beside it.")] = Path("compare/compare.html"),
            as_json: Annotated[bool, typer.Option("--json", help="Print the paths, arms, flags and numbers as JSON.")] = False) -> None:
    """Overlay several runs on one offline HTML page: arms with a 95% band across seeds (in-band share, shape mix,
    informative groups, held-out success against rollouts consumed)."""
    from genenv_cli.compare import build_compare

    with _errors():
        result = build_compare(runs, out)
        if as_json:
            typer.echo(json.dumps(result, indent=2, default=str))
            return
        typer.echo(f"wrote {result['html']}: {len(result['arms'])} arm(s), {sum(map(len, result['arms'].values()))} run(s)")
        for flag in result["flags"]:
            typer.echo(f"warning: {flag}", err=True)


@app.command()
def table(run: RunOpt = None,
          protocol: Annotated[str, typer.Option("--protocol", help="Which evaluate results: paper or official.")] = "paper",
          model_tag: Annotated[str | None, typer.Option("--model-tag", help="Only results of this model tag.")] = None,
          as_json: JsonOpt = False) -> None:
    """Table 1's layout (ALFWorld, BFCL, API-Bank, Bamboogle, TravelPlanner, avg) from the run's evaluate results,
    beside the paper's reference rows."""
    import json as _json

    from genenv_cli.paper_table import render_table, table_rows

    with _errors() as where:
        where.run = run
        run_dir, _ = _open(run, None)
        rows = table_rows(run_dir.root, protocol, model_tag)
        typer.echo(_json.dumps(rows) if as_json else render_table(rows))


@app.command()
def domains() -> None:
    """List the task domains (built-in and plugins)."""
    from genenv_cli.domains import DOMAINS

    with _errors():
        for name in DOMAINS.names():
            d = DOMAINS.get(name)
            typer.echo(f"{name:12s} {d.description}")


def main() -> None:
    app()
