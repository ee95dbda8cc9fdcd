"""The `genenv` command line: it parses arguments, calls the module that does the work, and prints.

Every command finds its run from --run DIR, else $GENENV_RUN, else the current directory, and takes
`--set SECTION.KEY=VALUE` overrides for that invocation. Each command imports the module that does its work
inside its own body, so `genenv --help` imports none of them and heavy libraries (torch, transformers, trl) load
only inside the stages that use them (benchmarks/speed/cli_startup.py measures it).
"""

# no `from __future__ import annotations` here: typer would have to evaluate every annotation string at start-up

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from genenv_cli.catalogue.stages import STAGES
from genenv_cli.core.errors import ConfigError
from genenv_cli.core.library_noise import library_output_to_log
from genenv_cli.core.ui import UI
from genenv_cli.core.version import __version__
from genenv_cli.views.errorpath import DEBUG, Where, reported


class _Commands(TyperGroup):
    """genenv's commands, and one for every stage row beyond the built-ins (a plugin's, from the entry-point group
    `genenv.stages`, or one registered in this process), made when it is named or the commands are listed: so
    `genenv run`'s process per stage runs a plugin's stage, and `genenv --help` reads no entry points."""

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        return names + [n for n in STAGES if n not in names]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        if found is None and cmd_name not in STAGES.builtins and cmd_name in STAGES:
            one = typer.Typer(add_completion=False, rich_markup_mode=None)
            one.command(cmd_name, help=STAGES[cmd_name].help)(_stage_command(cmd_name))
            found = typer.main.get_command(one)
        return found


app = typer.Typer(
    cls=_Commands,
    name="genenv",
    help="Train LLM agents by co-evolution with an LLM environment simulator (GenEnv). Each stage reads and "
         "writes files in a run directory; an epoch is generate-tasks -> rollout -> score -> update-agent -> "
         "update-env -> eval-agent.",
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


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                                help="Show the version and exit.")] = False,
          debug: Annotated[bool, typer.Option("--debug", envvar="GENENV_DEBUG",
                                              help="Show the Python traceback of an error (also GENENV_DEBUG=1).")] = False,
          verbose: Annotated[bool, typer.Option("--verbose", "-v", envvar="GENENV_VERBOSE",
                                                help="Also print what goes only to the command's log: the libraries' "
                                                     "warnings and genenv's internal lines (also GENENV_VERBOSE=1).")] = False,
          ) -> None:
    """genenv command line."""
    DEBUG["on"] = debug
    if verbose:  # read where the output is made (core/library_noise.py, UI.detail), and by `genenv run`'s stages
        os.environ["GENENV_VERBOSE"] = "1"


def _open(run: Path | None, sets: list[str] | None, where: Where, log: str | None = None, required: bool = True,
          recorded: list[str] | None = None):
    """(run, config) of --run/$GENENV_RUN/the current directory, recorded in `where` for the error path (with the
    command's log). `required=False`: a command that can work without a run gets (None, the defaults + --set).
    `recorded`: the config sections the command's manifests record; a --set in them that differs from genenv.toml
    is noted (what the command writes will then show stale)."""
    from genenv_cli.rundir import open_run

    where.run = run
    run_dir, cfg = open_run(run, sets or [], required=required)
    if run_dir is not None:
        where.run, where.log = run_dir.root, run_dir.logs_dir() / f"{log}.log" if log else None
        if recorded and sets and not os.environ.get(SETS_NOTED):
            _note_sets(run_dir, cfg, sets, recorded)
    return run_dir, cfg


SETS_NOTED = "GENENV_SETS_NOTED"  # set by `genenv run` for its stages: it said it once already


def _note_sets(run_dir: Any, cfg: Any, sets: list[str], recorded: list[str]) -> None:
    """A one-off --set that differs from genenv.toml in a section the command's manifests record: what it writes
    records the --set value, so status (which reads genenv.toml) will show it stale. Said before the work starts,
    on stderr."""
    from genenv_cli.rundir.staleness import override_changes

    for c in override_changes(run_dir.load_config(), cfg, sets):
        if c.key not in recorded and c.key.split(".")[0] not in recorded:
            continue  # a key this command does not record: nothing it writes will look stale
        typer.echo(f"note: --set {c.key}={json.dumps(c.now)} is not what genenv.toml says ({json.dumps(c.was)}); "
                   f"what this command writes records {json.dumps(c.now)}, so `genenv status` will show it stale "
                   f"(stale: {c.key} {json.dumps(c.now)} → {json.dumps(c.was)}) unless genenv.toml is changed to "
                   f"match.", err=True)


def _ui(run_dir: Any, command: str, quiet: bool, as_json: bool, start: str | None = None) -> UI:
    """The command's progress and summary output, appended to RUN/logs/<command>.log (from a START line)."""
    ui = UI(quiet=quiet or as_json, json_summary=as_json,
            log_path=run_dir.logs_dir() / f"{command}.log" if run_dir is not None else None,
            root=run_dir.root if run_dir is not None else None)
    if start is not None:
        ui.log(f"START {start} pid={os.getpid()} argv={sys.argv[1:]}")
    return ui


def _stage(stage: str, run: Path | None, sets: list[str] | None, quiet: bool, as_json: bool,
           call: Callable[[Any, Any, Any, Any], Any], epoch: int | None,
           log: Callable[[Any], str] | None = None) -> None:
    """Run `call(stage module, run_dir, cfg, ui)` for a stage command, with its log and its summary line; `log(stage
    module)` names the log where it is not the stage's (a shard's own)."""
    from genenv_cli.views.command_output import summarize

    with reported() as where:
        module = STAGES[stage].load()
        name = log(module) if log is not None else stage
        run_dir, cfg = _open(run, sets, where, name, recorded=getattr(module, "CONFIG_SECTIONS", []))
        ui = _ui(run_dir, name, quiet, as_json, start=f"{name} epoch={epoch}")
        with library_output_to_log(ui):
            fields, text = summarize(call(module, run_dir, cfg, ui))
        ui.summary(stage, epoch, fields, text)


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
    from genenv_cli.actions.create_run import create_run

    with reported():
        created = create_run(directory, domain, agent_model=agent_model, env_model=env_model, preset=preset,
                             sets=sets, seeds=seeds, validation_share=validation_share, force=force)
        for note in created.notes:
            typer.echo(f"note: {note}", err=True)
        typer.echo(created.message(directory, preset))


# The stage commands: typer reads their options from real signatures; their names and help come from STAGES.
def _stage_command(name: str) -> Callable[..., None]:
    def command(epoch: EpochOpt, run: RunOpt = None, sets: SetOpt = None, force: ForceOpt = False,
                quiet: QuietOpt = False, as_json: JsonOpt = False) -> None:
        _stage(name, run, sets, quiet, as_json, lambda m, r, c, ui: m.run(r, c, epoch, force=force, ui=ui), epoch)
    return command


def rollout(epoch: EpochOpt, run: RunOpt = None, sets: SetOpt = None, force: ForceOpt = False,
            shard: Annotated[str | None, typer.Option(help="Do shard I of N of the tasks, e.g. 2/4; `score` merges them.")] = None,
            quiet: QuietOpt = False, as_json: JsonOpt = False) -> None:
    def log(module: Any) -> str:  # each shard its own log and progress line: shards run at the same time
        from genenv_cli.rundir.layout import shard_stage

        parsed = module.parse_shard(shard)
        return "rollout" if parsed is None else shard_stage("rollout", parsed)

    _stage("rollout", run, sets, quiet, as_json,
           lambda m, r, c, ui: m.run(r, c, epoch, shard=m.parse_shard(shard), force=force, ui=ui), epoch, log)


for _name in STAGES.builtins:  # one command per stage, in epoch order; rollout's (above) has --shard too
    app.command(_name, help=STAGES[_name].help)(rollout if _name == "rollout" else _stage_command(_name))


@app.command("run")
def run_cmd(epochs: Annotated[int, typer.Option("--epochs", min=1, max=EPOCH_MAX, help="Run epochs 1..N.")],
            run: RunOpt = None, sets: SetOpt = None,
            from_stage: Annotated[str | None, typer.Option("--from", help="Redo this stage and every later one.")] = None,
            from_epoch: Annotated[int | None, typer.Option("--from-epoch", min=1, max=EPOCH_MAX, help="Epoch of --from (default 1).")] = None,
            quiet: QuietOpt = False, as_json: JsonOpt = False) -> None:
    """Run whole epochs (every stage in order: generate-tasks -> rollout -> score -> update-agent -> update-env ->
    eval-agent), each stage in its own process, resuming where it stopped."""
    from genenv_cli.actions.runner import spawn_epochs

    with reported() as where:
        recorded = [s for name in STAGES for s in getattr(STAGES[name].load(), "CONFIG_SECTIONS", [])]
        run_dir, _ = _open(run, sets, where, "run", recorded=recorded)  # a bad config or --set fails here, first
        spawn_epochs(run_dir, epochs, ui=_ui(run_dir, "run", quiet, as_json, start="run"), sets=sets or [],
                     from_stage=from_stage, from_epoch=from_epoch, quiet=quiet, as_json=as_json)


@app.command()
def status(run: RunOpt = None, sets: SetOpt = None,
           as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Each epoch's stages (done / stale / incomplete / missing / running) and its curriculum numbers."""
    from genenv_cli.views.command_output import print_status

    with reported() as where:
        print_status(*_open(run, sets, where), as_json=as_json)


@app.command("evaluate")
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
    label: Annotated[str | None, typer.Option("--label", help="Add NAME to the result's file name (keeps results of "
                                              "other settings side by side).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an earlier result made with other settings.")] = False,
    run: RunOpt = None, sets: SetOpt = None, quiet: QuietOpt = False, as_json: JsonOpt = False,
) -> None:
    """Run an agent on a benchmark, or score predictions made elsewhere, with the benchmark's metric."""
    from genenv_cli.actions import evaluate as evaluation
    from genenv_cli.catalogue.suites import BENCHMARKS, list_benchmarks
    from genenv_cli.views import command_output as views

    with reported() as where:
        if list_:
            views.print_benchmarks(list_benchmarks(), as_json=as_json)
            return
        if bench is None:
            raise ConfigError("--bench NAME is required (see `genenv evaluate --list`).")
        # an unknown name fails here, with the nearest known one; a plugin's is imported later, under the guard
        if bench not in BENCHMARKS.rows and bench not in BENCHMARKS.names():
            BENCHMARKS.get(bench)
        run_dir, cfg = _open(run, sets, where, "evaluate",
                             required=predictions is None and export is None and model is None)
        ui = _ui(run_dir, "evaluate", quiet, as_json)
        with library_output_to_log(ui):
            result = evaluation.evaluate(run_dir, cfg, bench, epoch=epoch, model=model, data=data,
                                         predictions=predictions, export=export, limit=limit, split=split,
                                         version=version, protocol=protocol, ui=ui, force=force, label=label)
        if export is not None:
            ui.summary("evaluate", None, result, f"exported {result['exported']} samples to {result['path']}")
            return
        if not quiet and not as_json:
            views.print_eval_table(result)
        h = result["headline"]
        value = "-" if h["value"] is None else f"{h['value']:.1f}"
        ui.summary("evaluate", result["epoch"], {k: result[k] for k in ("bench", "model_tag", "protocol", "n", "headline", "path")},
                   f"evaluate {bench} ({result['protocol']}) {result['model_tag']}: {h['name']} {value} over "
                   f"{result['n']} samples; wrote {result['path']}")


@app.command()
def report(run: RunOpt = None, sets: SetOpt = None,
           out: Annotated[Path | None, typer.Option("--out", help="HTML file to write (default RUN/report/report.html); "
                                                   "the PNG charts go beside it.")] = None,
           as_json: Annotated[bool, typer.Option("--json", help="Print the paths and the numbers as JSON.")] = False) -> None:
    """One self-contained HTML report of the curriculum (opens offline), plus each chart as a PNG."""
    from genenv_cli.actions.report import build_report, report_output

    with reported() as where:
        run_dir, cfg = _open(run, sets, where)
        out, moved = report_output(run_dir, out)
        if moved:
            typer.secho(f"note: {run_dir.root} is read-only; writing the report to {out} instead (--out FILE to "
                        f"choose)", err=True)
        result = build_report(run_dir, cfg, out)
        typer.echo(json.dumps(result, indent=2, default=str) if as_json else
                   f"wrote {result['html']} and {len(result['pngs'])} PNG charts; epochs {result['epochs_text']}")


@app.command()
def compare(runs: Annotated[list[Path], typer.Argument(help="Run directories; runs equal in all but run.seed form one arm.")],
            out: Annotated[Path, typer.Option("--out", help="HTML file to write; the PNG charts go beside it.")] = Path("compare/compare.html"),
            label: Annotated[list[str] | None, typer.Option(
                "--label", help="RUN=NAME: the name of RUN's arm (one run of an arm names it; runs given different "
                                "names are different arms). Repeatable.", show_default=False)] = None,
            baseline: Annotated[list[str] | None, typer.Option(
                "--baseline", help="NAME: the arm every other arm is compared with; ARM=NAME: one arm's baseline. "
                                   "Repeatable. Default: the first arm.", show_default=False)] = None,
            as_json: Annotated[bool, typer.Option("--json", help="Print the paths, arms, flags and numbers as JSON.")] = False) -> None:
    """Several runs on one offline HTML page: per claim (in-band share, informative groups, held-out success) each
    arm minus its baseline with a 95% interval across seeds, then each arm's own curves, the shape mix, and tables."""
    from genenv_cli.actions.compare import build_compare

    with reported():
        result = build_compare(runs, out, labels=label, baselines=baseline)
        if as_json:
            typer.echo(json.dumps(result, indent=2, default=str))
            return
        typer.echo(f"wrote {result['html']}: {len(result['arms'])} arm(s), {sum(map(len, result['arms'].values()))} run(s)")
        for flag in result["flags"]:
            typer.echo(f"warning: {flag}", err=True)


@app.command()
def export(epoch: Annotated[int, typer.Option("--epoch", min=1, max=EPOCH_MAX, help="The epoch whose checkpoint to export.")],
           out: Annotated[Path, typer.Option("--out", help="The folder to write (a transformers model folder).")],
           model: Annotated[str, typer.Option("--model", help="agent or env: which checkpoint.")] = "agent",
           merge: Annotated[bool, typer.Option("--merge/--no-merge", help="Merge a LoRA adapter into the base weights "
                                               "(a standalone model), or export the adapter with its base named.")] = True,
           dtype: Annotated[str, typer.Option("--dtype", help="Dtype of the saved weights: float32 (training's), "
                                              "bfloat16 or float16.")] = "float32",
           force: Annotated[bool, typer.Option("--force", help="Replace --out if it exists.")] = False,
           run_sampling: Annotated[bool, typer.Option(
               "--run-sampling", help="Write the run's sampling (temperature, top-p, max_new_tokens) as "
                                      "generation_config.json instead of the base model's own defaults.")] = False,
           run: RunOpt = None, sets: SetOpt = None) -> None:
    """A trained checkpoint as a standard transformers model folder: the weights (LoRA merged, or the adapter with
    its base named portably), the tokenizer and chat template, the base model's generation_config.json (the run's
    sampling with --run-sampling), and a model card. Loads with AutoModelForCausalLM and `vllm serve`."""
    from genenv_cli.actions.export import export_checkpoint

    with reported() as where:
        run_dir, cfg = _open(run, sets, where)
        # library warnings (transformers' deprecations) are not the user's business: shown with GENENV_VERBOSE=1
        with library_output_to_log(_ui(None, "export", False, False)):
            result = export_checkpoint(run_dir, cfg, epoch, model, out, merge=merge, dtype=dtype, force=force,
                                       run_sampling=run_sampling)
        for note in result["notes"]:
            typer.echo(f"note: {note}", err=True)
        typer.echo(f"wrote {result['out']}: epoch {epoch}'s {model} "
                   f"({'merged' if result['merged'] else 'adapter on ' + result['base']}, {result['dtype']}); "
                   f"{len(result['files'])} files")


@app.command()
def table(run: RunOpt = None,
          protocol: Annotated[str, typer.Option("--protocol", help="Which evaluate results: paper or official.")] = "paper",
          model_tag: Annotated[str | None, typer.Option("--model-tag", help="Only results of this model tag.")] = None,
          as_json: JsonOpt = False) -> None:
    """Table 1's layout (ALFWorld, BFCL, API-Bank, Bamboogle, TravelPlanner, avg) from the run's evaluate results,
    beside the paper's reference rows."""
    from genenv_cli.views.paper_table import render_table, table_rows

    with reported() as where:
        rows = table_rows(_open(run, None, where)[0], protocol, model_tag)
        typer.echo(json.dumps(rows) if as_json else render_table(rows))


domains_app = typer.Typer(help="The task domains (built-in and plugins): list them (no subcommand), check one "
                                "against the domain contract, or preview its prompts and parsers.",
                           invoke_without_command=True, rich_markup_mode=None)
app.add_typer(domains_app, name="domains")
NameArg = Annotated[str, typer.Argument(help="A registered domain (`genenv domains` lists them).")]
DomainRunOpt = Annotated[Path | None, typer.Option("--run", help="Use this run's imported seeds (genenv init --seeds).",
                                                   show_default=False)]


@domains_app.callback()
def domains(ctx: typer.Context) -> None:
    """List the task domains (built-in and plugins)."""
    if ctx.invoked_subcommand is not None:
        return
    from genenv_cli.views.domain_commands import listing

    with reported():
        code = listing()
    raise typer.Exit(code)


@domains_app.command("check")
def domains_check(name: NameArg, run: DomainRunOpt = None,
                  as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False) -> None:
    """Run the domain contract on NAME with the answers it declares: seeds, scorer, parser, prompts, fingerprints
    (exit status 1 when a clause fails). No model is loaded."""
    from genenv_cli.views.domain_commands import check

    with reported():
        code = check(name, run, as_json=as_json)
    raise typer.Exit(code)


@domains_app.command("preview")
def domains_preview(
    name: NameArg, run: DomainRunOpt = None,
    seed: Annotated[str | None, typer.Option("--seed", help="The seed to render (default: the first train seed).")] = None,
    output: Annotated[Path | None, typer.Option("--output", help="A file holding an environment output to parse "
                                                "(- reads standard input); default: the seed as the domain writes it.")] = None,
    answer: Annotated[Path | None, typer.Option("--answer", help="A file holding an agent answer to score (- reads "
                                                "standard input); default: the seed's right answer.")] = None,
    say: Annotated[list[str] | None, typer.Option(
        "--say", help="Multi-turn domains: the agent's answer at the next turn of the episode played (repeat it, "
                      "once per turn).")] = None,
    answers: Annotated[Path | None, typer.Option(
        "--answers", help="Multi-turn domains: a file of the agent's answers, one per turn (a JSON list of strings, "
                          "or one per line).")] = None,
    model: Annotated[str | None, typer.Option(
        "--model", help="Multi-turn domains: a model that plays the episode (greedy): a Hugging Face id, a folder "
                        "such as RUN/epochs/0003/agent, or embedded.")] = None,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1, help="With --model: the longest answer "
                                                "per turn, in tokens.")] = 256,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show the environment's and the agent's prompts for a seed, the parser's verdict on an environment output and
    the score of an answer, with no model loaded; for a multi-turn domain, one episode played turn by turn (the
    seed's right answer at every turn, scripted answers, or a model). Exit status 1 when the output is rejected or
    the answer (the episode) is not right."""
    from genenv_cli.views.domain_commands import preview

    with reported():
        code = preview(name, run, seed_id=seed, output=output, answer=answer, as_json=as_json, says=say,
                       answers=answers, model=model, max_new_tokens=max_new_tokens)
    raise typer.Exit(code)


def main() -> None:
    app()
