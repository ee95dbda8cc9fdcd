"""`genenv status`: every epoch's stages (done / stale / incomplete / missing / running) and its numbers.

States: **done** — manifest present, inputs and config unchanged, outputs as written; **stale** — an input
or the config changed since, or a stage it reads from is stale (the reasons are listed); **incomplete** — an
output is missing or was modified; **missing** — never completed; **running** — another process holds the
epoch's lock for it.

The table says why in each cell: `stale: domain code`, `stale: rollout.max_new_tokens 16 → 24` (the first
change; the notes under the table and `--json`'s `changes` list them all), `stale upstream` for a stage whose own
inputs are as they were but which reads what a stale stage wrote (its outputs will change when that stage is
redone; `genenv run` then redoes both, in order). An update that trained on nothing, or took a single optimizer
step, says so (`done 0: trained on nothing`, `done 16: 1 step`), and an epoch whose environment wrote fewer tasks
than asked names the most common reasons its generations were refused.
"""

from __future__ import annotations

from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.catalogue.stages import STAGES, available, epoch_stages, stage_module
from genenv_cli.core.errors import GenenvError
from genenv_cli.core.progress import fmt_clock, read_progress
from genenv_cli.core.reject_reasons import describe
from genenv_cli.rundir import RunDir, log_name, shard_of, shard_stage
from genenv_cli.rundir.metrics import gather
from genenv_cli.rundir.stage_state import check_state, manifests_problem

UPDATES = ("update-agent", "update-env")


def stage_state(run: RunDir, cfg: Config, epoch: int, stage: str) -> dict[str, Any]:
    """The stage's state with its reasons (`changes`: the same, key by key), its manifest's numbers, and what it
    reads and writes (`links`, for `collect` to find the stages upstream; not shown)."""
    base = stage.split(".")[0]
    changes: list[dict[str, Any]] = []
    links: dict[str, Any] = {"reads": [], "requires": [], "writes": [run.rel(run.manifest_path(epoch, stage))]}
    try:
        mod = stage_module(base)
        if base == "rollout" and shard_of(stage):
            p = mod.plan(run, cfg, epoch, shard=shard_of(stage))
        else:
            p = mod.plan(run, cfg, epoch)
        links = {"reads": [run.rel(q) for q in p.inputs.values()], "requires": [list(r) for r in p.requires],
                 "writes": links["writes"] + [run.rel(q) for q in p.outputs.values()]}
        st = check_state(run, cfg, p)
        state, reasons, manifest = st.state, st.reasons, st.manifest
        changes = [c.to_json() for c in st.changes]
    except GenenvError as exc:
        manifest = run.manifest_record(epoch, stage) or None
        problem = manifests_problem(run, epoch)
        state = "incomplete" if problem else "stale" if manifest else "missing"
        reasons = [problem or str(exc).split(". ")[0]]
    if not isinstance(manifest, dict) or not all(isinstance(manifest.get(k, {}), dict) for k in ("counts", "metrics")):
        manifest = None  # a manifest of the wrong shape: check_state already calls the stage incomplete
    return {"state": state, "reasons": reasons, "changes": changes,
            "counts": (manifest or {}).get("counts", {}), "metrics": (manifest or {}).get("metrics", {}),
            "finished": (manifest or {}).get("finished"), "seconds": (manifest or {}).get("seconds"),
            "links": links}


def mark_upstream(rows: list[dict[str, Any]]) -> None:
    """A done stage that reads what a stale (or incomplete) stage wrote, or requires such a stage, becomes
    `stale` with `upstream` naming it: its own inputs are as they were, but they will change when that stage is
    redone. Carried down in the order stages run (every stage reads only from earlier ones)."""
    writer: dict[str, tuple[int, str]] = {}
    for row in rows:
        for name, st in row["stages"].items():
            for path in st["links"]["writes"]:
                writer[path] = (row["epoch"], name)
    states = {(row["epoch"], name): st for row in rows for name, st in row["stages"].items()}
    for row in rows:
        for name, st in row["stages"].items():
            ups = {tuple(r) for r in st["links"]["requires"]} | {writer[p] for p in st["links"]["reads"] if p in writer}
            bad = sorted(u for u in ups if u in states and u != (row["epoch"], name)
                         and states[u]["state"] in ("stale", "incomplete"))
            if bad and st["state"] == "done":
                st["state"] = "stale"
                st["upstream"] = [f"epoch {e} {s}" for e, s in bad]
                word = " or ".join(sorted({states[u]["state"] for u in bad}))
                verb, it = ("is", "it is") if len(bad) == 1 else ("are", "they are")
                st["reasons"] = [f"upstream {' and '.join(st['upstream'])} {verb} {word}: what this stage read will "
                                 f"change when {it} redone"]


def _count(counts: dict[str, Any], key: str) -> int | None:
    """A manifest's count, or None where it is absent or not an integer (a hand-edited manifest shows as it is)."""
    v = counts.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def flag(name: str, st: dict[str, Any]) -> str | None:
    """What a done update's table cell adds to `done N`: it trained on nothing, or took one optimizer step."""
    if name.split(".")[0] not in UPDATES or st["state"] != "done":
        return None
    counts = st["counts"]
    if counts.get("skipped"):
        return "not trained"
    steps = _count(counts, "steps")
    if _count(counts, "samples_used") == 0 or steps == 0:
        return "trained on nothing"
    if steps is not None and steps < 2:
        return f"{steps} step"
    return None


def _update_note(name: str, st: dict[str, Any], cfg: Config) -> str:
    """Why an update trained on nothing, or what one step means, from its manifest's counts."""
    counts = st["counts"]
    if flag(name, st) == "trained on nothing":
        if name == "update-env":
            seen = counts.get("pairs_seen")
            if not seen:
                return ("trained on nothing: the pool holds no environment generations (every task was a seed task, "
                        "or the environment wrote none that parsed); see generate-tasks' reject reasons")
            return (f"trained on nothing: none of {seen} environment generations passed the difficulty filter "
                    f"(|p̂ batch − α| ≤ curriculum.k_min = {cfg.curriculum.k_min:g}) with a non-empty output")
        why = counts.get("skipped_by_reason") or {}
        parts = ", ".join(f"{n} {reason}" for reason, n in why.items()) if isinstance(why, dict) else ""
        said = "trained on nothing: no GRPO group had rewards that differ" + (f" (skipped groups: {parts})" if parts
                                                                              else "")
        if isinstance(why, dict) and why.get("all-equal group"):
            from genenv_cli.catalogue.advice import all_equal_advice

            said += "; " + all_equal_advice(cfg, _multi_turn(cfg))
        return said
    if name.split(".")[0] == "update-env":  # its samples are the environment's generations, not the agent's rollouts
        return (f"{counts.get('steps')} optimizer step from {counts.get('samples_used')} environment generations; "
                f"more of them (generate.tasks_per_epoch with a lower generate.seed_share, more "
                f"generate.variations), a wider difficulty filter (curriculum.k_min) or a smaller batch "
                f"(env_update.batch_size, grad_accum) gives more")
    return (f"{counts.get('steps')} optimizer step from {counts.get('samples_used')} samples; more tasks "
            f"(generate.tasks_per_epoch), a larger group (rollout.group_size) or a smaller batch "
            f"(agent_update.batch_size, grad_accum) gives more")


def _multi_turn(cfg: Config) -> list[str]:
    """The run's multi-turn domains; none when a domain cannot be loaded (status still shows the rest)."""
    from genenv_cli.catalogue.domains import run_domains

    try:
        return [n for n, d in run_domains(cfg).items() if d.episodic]
    except Exception:  # noqa: BLE001 - a plugin domain that fails to load is reported elsewhere
        return []


def generation_note(st: dict[str, Any]) -> str | None:
    """generate-tasks' note when its environment wrote fewer tasks than asked: the top reject reasons."""
    counts = st["counts"]
    if st["state"] in ("missing", "running") or not _count(counts, "generations"):
        return None
    if not _count(counts, "seed_fill") and _count(counts, "accepted"):
        return None
    refused = sum(_count(counts, k) or 0 for k in ("rejected_parse", "rejected_invalid", "rejected_duplicate"))
    top = describe(counts.get("reject_reasons"), refused)
    return (f"{counts.get('accepted', 0)} of {counts.get('generations')} environment generations usable, "
            f"{counts.get('seed_fill', 0)} seed tasks filled the epoch" + (f"; top reject reasons: {top}" if top else "")
            + " (all in tasks.rejects.jsonl)")


def label(name: str, st: dict[str, Any]) -> str:
    """A stage's table cell: its state, the count it shows, and why where that is not plain."""
    state = st["state"]
    if state == "stale":
        if st.get("upstream"):
            return "stale upstream"
        changes = st.get("changes") or []
        if changes:
            from genenv_cli.rundir.staleness import Change

            first = Change(**changes[0]).short()
            return f"stale: {first}" + (f" +{len(changes) - 1}" if len(changes) > 1 else "")
        return "stale"
    n = st["counts"].get(STAGES[name.split(".")[0]].count or "", None)
    text = state + (f" {n}" if n is not None and state != "missing" else "")
    extra = flag(name, st)
    return text + (f": {extra}" if extra else "")


def last_progress(run: RunDir, stage: str, holder: dict[str, Any]) -> tuple[str, float] | None:
    """The running stage's last progress line and its age: what the holder of the lock wrote beside its log
    (core/progress.py); None when it wrote none, or the file is another process's."""
    return read_progress(run.logs_dir() / f"{log_name(stage)}.progress", holder.get("pid"))


def collect(run: RunDir, cfg: Config) -> list[dict[str, Any]]:
    c = cfg.curriculum
    band = (c.band_low, c.band_high)
    rows = []
    for epoch in run.epochs():
        running = run.running(epoch)
        stages: dict[str, Any] = {}
        names = [s for s in epoch_stages() if available(s)]
        shards = sorted(shard_stage("rollout", s) for s in run.rollout_shards(epoch))
        if shards and not run.manifest_path(epoch, "rollout").exists():
            names = [n for n in names if n != "rollout"]
            names[1:1] = shards
        for name in names:
            stages[name] = stage_state(run, cfg, epoch, name)
            if name in running:
                h = running[name]
                stages[name]["state"] = "running"
                stages[name]["reasons"] = [f"pid {h.get('pid')} on {h.get('host')} since {h.get('since')}"]
                if (said := last_progress(run, name, h)) is not None:
                    stages[name]["progress"] = said[0]
                    stages[name]["reasons"].append(f"{said[0]} ({fmt_clock(said[1])} ago)")
        # from the manifests, not metrics.json: that file is derived state, and a stale copy must never show
        metrics = {k: v for k, v in gather(run, epoch, band, c.alpha).items() if k != "epoch"}
        rows.append({"epoch": epoch, "stages": stages, "metrics": metrics,
                     "running": ", ".join(sorted(running)) or None})
    mark_upstream(rows)
    for row in rows:
        for name, st in row["stages"].items():
            del st["links"]
            st["label"] = label(name, st)
            if (f := flag(name, st)) is not None:
                st["flag"] = f
    return rows


def _fmt(v: Any, pct: bool = False, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, int | float):  # a hand-edited manifest: show it, do not format it
        return str(v)[:12]
    return f"{100 * v:.0f}%" if pct else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


COLUMNS = ("p̂ batch", "in band", "inform.", "R_env", "valid gen", "env inf.", "task tok", "agent R", "held-out",
           "env KL", "|Δlogp|", "KL samp", "IS trunc")


def table_cells(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[tuple[str, str]]]]:
    """(header, rows of (text, state) cells): what both the rich and the plain table show."""
    stages = [n for n in epoch_stages() if available(n)]
    header = ["epoch", *(STAGES[n].column for n in stages), *COLUMNS]
    out = []
    for row in rows:
        cells = [(str(row["epoch"]), "")]
        for name in stages:
            keys = [name] if name in row["stages"] else [k for k in row["stages"] if k.startswith(name + ".")]
            parts = []
            for k in keys:
                st = row["stages"][k]
                text = st["label"]
                if (shard := shard_of(k)) is not None:
                    text = f"{shard[0]}/{shard[1]} {text}"
                parts.append((text, st["state"]))
            cells.append((" / ".join(p for p, _ in parts) or "-", parts[0][1] if len(parts) == 1 else ""))
        m = row["metrics"]
        kl = _fmt(m.get("env_kl")) + (" (cap)" if m.get("env_kl_stopped") else "")
        cells += [(v, "") for v in (_fmt(m.get("batch_p_mean")), _fmt(m.get("band_share"), pct=True),
                                    _fmt(m.get("informative_share"), pct=True), _fmt(m.get("env_r_mean")), _fmt(m.get("valid_generation_rate"), pct=True),
                                    _fmt(m.get("env_groups_informative_share"), pct=True),
                                    _fmt(m.get("mean_prompt_tokens"), digits=0), _fmt(m.get("agent_train_reward")),
                                    _fmt(m.get("heldout_success"), pct=True), kl,
                                    _fmt(m.get("agent_logp_mismatch"), digits=4), _fmt(m.get("agent_sampler_kl"), digits=5),
                                    _fmt(m.get("agent_is_truncated"), digits=4))]
        out.append(cells)
    return header, out


def caption(cfg: Config) -> str:
    c = cfg.curriculum
    return ("p̂ batch: mean over the epoch's task batches; in band: share of tasks with p̂ in "
            f"[{c.band_low:g}, {c.band_high:g}]; inform.: GRPO groups whose rewards are not all equal; valid gen: environment generations that became tasks; env inf.: the environment's batches whose "
            "generations' rewards are not all equal (what env_update.algo = grpo learns from); "
            "task tok: mean agent prompt length; agent R: training reward; held-out: eval-agent's success on "
            "run.eval_limit held-out items (run.eval_every); env KL: to the initial model; "
            "|Δlogp|, KL samp: the rollout engine's logprobs against the trainer's (nats per token); IS trunc: "
            "share of tokens whose importance weight was truncated")


def title(run: RunDir, cfg: Config) -> str:
    if cfg.run.mixed:
        mix = ", ".join(f"{name} {100 * share:.0f}%" for name, share in cfg.run.shares().items())
        return f"genenv run {run.root}  (domains {mix}, env mode {cfg.env.mode})"
    return f"genenv run {run.root}  (domain {cfg.run.domain}, env mode {cfg.env.mode})"


def domain_lines(rows: list[dict[str, Any]], cfg: Config) -> list[str]:
    """A mixed run's numbers per epoch and domain (from metrics.json's by_domain); nothing for a single-domain
    run. Tasks, in-band tasks and informative groups are counts that add up to the epoch's."""
    if not cfg.run.mixed:
        return []
    out = []
    for row in rows:
        by = row["metrics"].get("by_domain")
        if not isinstance(by, dict):
            continue
        for name, d in sorted(by.items()):
            if not isinstance(d, dict):
                continue
            part = [f"{_fmt(d.get('tasks'))} tasks ({_fmt(d.get('env_tasks'))} env)",
                    f"valid gen {_fmt(d.get('valid_generation_rate'), pct=True)}"]
            if d.get("rollouts") is not None:
                part += [f"success {_fmt(d.get('success_rate'))}",
                         f"in band {_fmt(d.get('in_band'))} ({_fmt(d.get('band_share'), pct=True)})",
                         f"inform. {_fmt(d.get('informative'))}/{_fmt(d.get('groups'))}",
                         f"R_env {_fmt(d.get('env_r_mean'))}"]
            out.append(f"epoch {row['epoch']} {name}: " + ", ".join(part))
    return out


def render(rows: list[dict[str, Any]], run: RunDir, cfg: Config) -> Any:
    """A rich table, for a terminal."""
    from rich.table import Table

    header, body = table_cells(rows)
    table = Table(title=title(run, cfg),
                  caption=caption(cfg))
    n_stages = len(header) - 1 - len(COLUMNS)
    for i, col in enumerate(header):
        table.add_column(col, justify="left" if 0 < i <= n_stages else "right", no_wrap=True)
    colors = {"done": "green", "stale": "yellow", "incomplete": "red", "missing": "dim", "running": "cyan"}
    for cells in body:
        table.add_row(*[f"[{colors[st]}]{text}[/]" if st in colors else text for text, st in cells])
    return table


def render_plain(rows: list[dict[str, Any]], run: RunDir, cfg: Config) -> str:
    """The same table as aligned plain text, for pipes and logs (and without rich's import and layout cost)."""
    header, body = table_cells(rows)
    grid = [header] + [[text for text, _ in cells] for cells in body]
    widths = [max(len(r[i]) for r in grid) for i in range(len(header))]
    lines = [title(run, cfg)]
    for r in grid:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    lines.append(caption(cfg))
    return "\n".join(lines)


def stale_notes(rows: list[dict[str, Any]], cfg: Config | None = None) -> list[str]:
    """A line for every stage that is not plainly done: why it is stale, incomplete or running, why an update
    trained on nothing (or took one step), and why the environment's generations were refused."""
    cfg = cfg or Config()
    notes = []
    for row in rows:
        for name, s in row["stages"].items():
            where = f"epoch {row['epoch']} {name}"
            if s["state"] in ("stale", "incomplete", "running"):
                notes.append(f"{where}: {s['state']} — {'; '.join(s['reasons'])}")
            if s.get("flag") not in (None, "not trained"):  # a mode that trains nothing is the run's choice
                notes.append(f"{where}: {_update_note(name, s, cfg)}")
            if name == "generate-tasks" and (g := generation_note(s)):
                notes.append(f"{where}: {g}")
    return notes
