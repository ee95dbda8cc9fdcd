"""`genenv status`: every epoch's stages (done / stale / incomplete / missing / running) and its numbers.

States: **done** — manifest present, inputs and config unchanged, outputs as written; **stale** — an input
or the config changed since (the reasons are listed); **incomplete** — an output is missing or was
modified; **missing** — never completed; **running** — another process holds the epoch's lock for it.
"""

from __future__ import annotations

from typing import Any

from genenv_cli.config import Config
from genenv_cli.contract import check_state, manifests_problem
from genenv_cli.errors import GenenvError
from genenv_cli.metrics import gather
from genenv_cli.rundir import RunDir, shard_of, shard_stage
from genenv_cli.stages import EPOCH_STAGES, STAGES, available, stage_module


def stage_state(run: RunDir, cfg: Config, epoch: int, stage: str) -> dict[str, Any]:
    base = stage.split(".")[0]
    try:
        mod = stage_module(base)
        if base == "rollout" and shard_of(stage):
            p = mod.plan(run, cfg, epoch, shard=shard_of(stage))
        else:
            p = mod.plan(run, cfg, epoch)
        st = check_state(run, cfg, p)
        state, reasons, manifest = st.state, st.reasons, st.manifest
    except GenenvError as exc:
        manifest = run.manifest_record(epoch, stage) or None
        problem = manifests_problem(run, epoch)
        state = "incomplete" if problem else "stale" if manifest else "missing"
        reasons = [problem or str(exc).split(". ")[0]]
    if not isinstance(manifest, dict) or not all(isinstance(manifest.get(k, {}), dict) for k in ("counts", "metrics")):
        manifest = None  # a manifest of the wrong shape: check_state already calls the stage incomplete
    return {"state": state, "reasons": reasons,
            "counts": (manifest or {}).get("counts", {}), "metrics": (manifest or {}).get("metrics", {}),
            "finished": (manifest or {}).get("finished"), "seconds": (manifest or {}).get("seconds")}


def collect(run: RunDir, cfg: Config) -> list[dict[str, Any]]:
    c = cfg.curriculum
    band = (c.band_low, c.band_high)
    rows = []
    for epoch in run.epochs():
        running = run.running(epoch)
        stages: dict[str, Any] = {}
        names = [s for s in EPOCH_STAGES if available(s)]
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
        # from the manifests, not metrics.json: that file is derived state, and a stale copy must never show
        metrics = {k: v for k, v in gather(run, epoch, band, c.alpha).items() if k != "epoch"}
        rows.append({"epoch": epoch, "stages": stages, "metrics": metrics,
                     "running": ", ".join(sorted(running)) or None})
    return rows


def _fmt(v: Any, pct: bool = False, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, int | float):  # a hand-edited manifest: show it, do not format it
        return str(v)[:12]
    return f"{100 * v:.0f}%" if pct else f"{v:.{digits}f}" if isinstance(v, float) else str(v)


COLUMNS = ("p̂ batch", "in band", "inform.", "R_env", "valid gen", "env inf.", "task tok", "agent R", "env KL", "|Δlogp|",
           "KL samp", "IS trunc")


def table_cells(rows: list[dict[str, Any]]) -> tuple[list[str], list[list[tuple[str, str]]]]:
    """(header, rows of (text, state) cells): what both the rich and the plain table show."""
    stages = [n for n in EPOCH_STAGES if available(n)]
    header = ["epoch", *(STAGES[n].column for n in stages), *COLUMNS]
    out = []
    for row in rows:
        cells = [(str(row["epoch"]), "")]
        for name in stages:
            keys = [name] if name in row["stages"] else [k for k in row["stages"] if k.startswith(name + ".")]
            parts = []
            for k in keys:
                st = row["stages"][k]
                n = st["counts"].get(STAGES[name].count or "", None)
                label = st["state"] + (f" {n}" if n is not None and st["state"] != "missing" else "")
                if (shard := shard_of(k)) is not None:
                    label = f"{shard[0]}/{shard[1]} {label}"
                parts.append((label, st["state"]))
            cells.append((" / ".join(p for p, _ in parts) or "-", parts[0][1] if len(parts) == 1 else ""))
        m = row["metrics"]
        kl = _fmt(m.get("env_kl")) + (" (cap)" if m.get("env_kl_stopped") else "")
        cells += [(v, "") for v in (_fmt(m.get("batch_p_mean")), _fmt(m.get("band_share"), pct=True),
                                    _fmt(m.get("informative_share"), pct=True), _fmt(m.get("env_r_mean")), _fmt(m.get("valid_generation_rate"), pct=True),
                                    _fmt(m.get("env_groups_informative_share"), pct=True),
                                    _fmt(m.get("mean_prompt_tokens"), digits=0), _fmt(m.get("agent_train_reward")), kl,
                                    _fmt(m.get("agent_logp_mismatch"), digits=4), _fmt(m.get("agent_sampler_kl"), digits=5),
                                    _fmt(m.get("agent_is_truncated"), digits=4))]
        out.append(cells)
    return header, out


def caption(cfg: Config) -> str:
    c = cfg.curriculum
    return ("p̂ batch: mean over the epoch's task batches; in band: share of tasks with p̂ in "
            f"[{c.band_low:g}, {c.band_high:g}]; inform.: GRPO groups whose rewards are not all equal; valid gen: environment generations that became tasks; env inf.: the environment's batches whose "
            "generations' rewards are not all equal (what env_update.algo = grpo learns from); "
            "task tok: mean agent prompt length; agent R: training reward; env KL: to the initial model; "
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


def stale_notes(rows: list[dict[str, Any]]) -> list[str]:
    notes = []
    for row in rows:
        for name, s in row["stages"].items():
            if s["state"] in ("stale", "incomplete", "running"):
                notes.append(f"epoch {row['epoch']} {name}: {s['state']} — {'; '.join(s['reasons'])}")
    return notes
