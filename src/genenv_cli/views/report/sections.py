"""The report's sections, one builder per chart (`BUILDERS`, in the page's order `CHARTS`): each returns the
numbers behind its chart, the chart's PNG (None without data) and its HTML section."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.views.report import charts as ch  # matplotlib is imported inside charts' functions
from genenv_cli.views.report.html import esc, img, long_table, wide_table
from genenv_cli.views.report.numbers import column, eval_groups, growth, p_task_rows

# the GenEnv paper's "Curriculum dynamics" figure (the paper: docs/design.md): agent success on generated
# tasks and agent response length, epochs 1-6
PAPER_SUCCESS = [0.138, 0.425, 0.488, 0.505, 0.517, 0.524]
PAPER_RESPONSE_TOKENS = [137, 147, 160, 174, 187, 204]

# (id, heading): the page's sections in order; `<id>.png` is the chart's file
CHARTS: list[tuple[str, str]] = [
    ("success-rate", "Agent success on generated tasks"),
    ("p-task", "Distribution of task p̂ per epoch"),
    ("band-share", "Share of tasks in the band"),
    ("env-reward", "Mean environment reward R_env"),
    ("valid-generation", "Valid-generation rate"),
    ("env-signal", "What the environment's generations teach it"),
    ("lengths", "Task length and agent response length"),
    ("agent-reward", "Agent training reward"),
    ("informative", "Informative GRPO groups and environment batches in the band"),
    ("env-kl", "Environment KL to its initial model"),
    ("domains", "By domain"),
    ("episodes", "Episodes: turns, ends and calls"),
    ("evals", "Evaluation scores by benchmark"),
]
HEADINGS = dict(CHARTS)

def _section(cid: str, what: str, body: str) -> str:
    return (f'<section id="{cid}"><h2>{esc(HEADINGS[cid])}</h2>'
            f'<p class="what">{what}</p>{body}</section>')



@dataclass
class _Run:
    """What every chart builder reads: the config, the epochs and their numbers, the evaluations."""

    cfg: Config
    epochs: list[int]
    mrows: list[dict[str, Any]]                      # each epoch's metrics.json (gaps as None)
    metrics: dict[int, dict[str, Any] | None]        # as read (None: no metrics.json yet)
    stats: dict[int, dict[str, list[Any]] | None]    # each epoch's task_stats columns
    evals: list[dict[str, Any]]
    mode_note: str                                   # what env.mode leaves out, for the environment's charts
    episodes: dict[int, dict[str, Any] | None] | None = None  # each epoch's episode numbers (report/episodes.py)

    @property
    def c(self) -> Any:
        return self.cfg.curriculum

    @property
    def band(self) -> tuple[float, float]:
        return (self.c.band_low, self.c.band_high)

    def col(self, key: str) -> list[Any]:
        return column(self.mrows, key)

    def line(self, cid: str, series: list[Any], decor: Any) -> bytes:
        return ch.timeseries(self.epochs, series, decor, title=HEADINGS[cid])


# each builder returns (the numbers behind its chart, the chart's PNG or None, its HTML section)
Built = tuple[Any, bytes | None, str]


def _success_rate(r: _Run) -> Built:
    """The paper's headline curve: success on generated tasks, beside the paper's own."""
    c, epochs = r.c, r.epochs
    succ, bpm = r.col("success_rate"), r.col("batch_p_mean")
    paper_x = list(range(1, len(PAPER_SUCCESS) + 1))
    numbers = {"epoch": epochs, "success_rate": succ, "batch_p_mean": bpm,
               "paper": {"epoch": paper_x, "success_rate": PAPER_SUCCESS}}
    png = r.line("success-rate", [
        ch.Series("GenEnv paper, Qwen2.5-7B (reference)", PAPER_SUCCESS, ch.GREY, "--", "s", paper_x,
                  linewidth=1.2, zorder=2),
        ch.Series("success rate (pooled p̂)", succ, ch.BLUE),
        ch.Series("mean p_batch", bpm, ch.PURPLE, ":", "D", linewidth=1.4),
    ], ch.Decor(ylabel="success on generated tasks", ylim=(0, 1), hlines=[(c.alpha, f"α = {c.alpha:g}", ch.RED)],
                band=r.band))
    paper_cells = [PAPER_SUCCESS[e - 1] if 1 <= e <= len(PAPER_SUCCESS) else None for e in epochs]
    return numbers, png, _section(
        "success-rate",
        f"Successful rollouts / rollouts on each epoch's generated tasks, and the mean of the per-batch rates "
        f"p_batch that R_env rewards. The environment is rewarded for keeping them near α = {c.alpha:g}. Dashed "
        f"grey: the GenEnv paper's curve (7B agent, epochs 1-6), for reference only.",
        img(png, "success rate per epoch")
        + wide_table(epochs, [("success rate", succ, "num"), ("mean p_batch", bpm, "num"),
                               ("paper (reference)", paper_cells, "num")]))


def _p_task(r: _Run) -> Built:
    """One histogram of task p̂ per epoch."""
    c, stats = r.c, r.stats
    prow, skipped = p_task_rows(r.epochs, stats, r.metrics, r.cfg)
    skip_note = "".join(f'<p class="note">Epoch {e}: no task_stats.parquet (score has not run); skipped.</p>'
                        for e in skipped)
    png = None
    if prow:
        png = ch.histograms([{"epoch": row["epoch"], "p_task": stats[row["epoch"]]["p_task"],
                              "source": stats[row["epoch"]]["source"], "alpha": row["alpha"],
                              "band": (row["band_low"], row["band_high"]), "edges": row["hist_edges"],
                              "in_band": row["in_band"]} for row in prow],
                            title=HEADINGS["p-task"])
        table = long_table([("epoch", "epoch", "int"), ("tasks", "tasks", "int"), ("seed_tasks", "seed", "int"),
                             ("env_tasks", "env", "int"), ("mean", "mean p̂", "num"), ("median", "median p̂", "num"),
                             ("zero", "p̂ = 0", "int"), ("below", "below band", "int"),
                             ("in_band", "in band", "int"), ("above", "above band", "int"),
                             ("one", "p̂ = 1", "int"), ("in_band_share", "in band %", "pct"),
                             ("estimator", "p from", "str"), ("env_gap", "env tasks' mean |p − α|", "num")]
                            + ([("env_gap_rollouts", "same, p̂ of K rollouts", "num"),
                                ("env_gap_teacher_forced", "same, teacher-forced p", "num"),
                                ("pearson_estimators", "r of the two", "num")]
                               if any(row["estimator"] == "teacher_forced" for row in prow) else []), prow)
        body = img(png, "task p-hat histograms per epoch") + table + skip_note
    else:
        body = '<p class="empty">No epoch has task_stats.parquet yet (run <code>genenv score</code>).</p>' + skip_note
    return {"epochs": prow, "skipped": skipped}, png, _section(
        "p-task",
        f"How often the agent solves each task, one histogram per epoch: seed tasks grey, environment tasks blue, "
        f"the band [{c.band_low:g}, {c.band_high:g}] green, α dashed; the table's mean |p − α| over the "
        f"environment's tasks says how near α it writes them. Each epoch names its estimator of p "
        f"(curriculum.p_estimator): `rollouts`, p̂ = successes / K; `teacher_forced`, the probability of writing "
        f"the reference answer from one forward pass (docs/curriculum.md), with the rollouts' p̂ beside it. Counts "
        f"are by where p falls: never solved, below the band, in it, above it, always solved.", body)


def _band_share(r: _Run) -> Built:
    c = r.c
    bshare = r.col("band_share")
    png = r.line("band-share", [ch.Series("tasks in band", bshare, ch.GREEN)],
                 ch.Decor(ylabel="share of tasks", percent=True, ylim=(0, 1)))
    return {"epoch": r.epochs, "band_share": bshare}, png, _section(
        "band-share", f"Share of the epoch's tasks whose p̂ is in [{c.band_low:g}, {c.band_high:g}]: the zone "
        f"where the policy gradient p(1-p) is largest.",
        img(png, "band share per epoch") + wide_table(r.epochs, [("in band", bshare, "pct")]))


def _env_reward(r: _Run) -> Built:
    c = r.c
    renv, kept = r.col("env_r_mean"), r.col("env_batches_kept")
    png = r.line("env-reward", [ch.Series("mean R_env", renv, ch.TEAL)],
                 ch.Decor(ylabel="R_env", ylim=(0, 1.05), hlines=[(1.0, "maximum (p_batch = α)", ch.GREY)]))
    return {"epoch": r.epochs, "env_r_mean": renv, "env_batches_kept": kept}, png, _section(
        "env-reward", f"Mean over the epoch's environment batches of R_env = exp(-β (p_batch - α)²), "
        f"β = {c.beta:g}; 1 when a batch's success rate is exactly α. Kept: batches within k_min = {c.k_min:g} "
        f"of α, which the environment trains on.",
        r.mode_note + img(png, "mean R_env per epoch")
        + wide_table(r.epochs, [("mean R_env", renv, "num"), ("batches kept", kept, "int")]))


def _valid_generation(r: _Run) -> Built:
    vgr, env_t, seed_t = r.col("valid_generation_rate"), r.col("env_tasks"), r.col("seed_tasks")
    png = r.line("valid-generation", [ch.Series("valid and novel", vgr, ch.ORANGE)],
                 ch.Decor(ylabel="of generations", percent=True, ylim=(0, 1.02)))
    return {"epoch": r.epochs, "valid_generation_rate": vgr, "env_tasks": env_t, "seed_tasks": seed_t}, png, _section(
        "valid-generation", "Environment generations that became tasks (parsed, valid and novel) / all its "
        "generations.",
        r.mode_note + img(png, "valid-generation rate per epoch")
        + wide_table(r.epochs, [("valid rate", vgr, "pct"), ("env tasks", env_t, "int"),
                                 ("seed tasks", seed_t, "int")]))


def _env_signal(r: _Run) -> Built:
    groups, inf = r.col("env_groups"), r.col("env_groups_informative_share")
    valid, invalid = r.col("env_reward_valid"), r.col("env_reward_invalid")
    low = min([0.0, *[v for v in invalid if v is not None]])
    png = r.line("env-signal", [ch.Series("batches with unequal rewards", inf, ch.TEAL),
                                ch.Series("mean reward: became a task", valid, ch.GREEN),
                                ch.Series("mean reward: became none", invalid, ch.RED)],
                 ch.Decor(ylabel="share / reward", ylim=(low, 1.05)))
    return ({"epoch": r.epochs, "env_groups": groups, "env_groups_informative_share": inf, "env_reward_valid": valid,
             "env_reward_invalid": invalid}, png, _section(
        "env-signal", "Every generation of the environment gets a reward of its own (pools/env_gen): "
        f"exp(-β (p_task - α)²) from its task's K rollouts when it became a task, "
        f"curriculum.invalid_reward = {r.c.invalid_reward:g} when it did not. A batch (the generations of one "
        "conditioning context) whose rewards are not all equal is what env_update.algo = \"grpo\" learns from; "
        "the paper's update (rwr) learns only from the valid generations of the batches the filter keeps.",
        r.mode_note + img(png, "the environment's generation rewards per epoch")
        + wide_table(r.epochs, [("batches (2+ rewards)", groups, "int"), ("unequal rewards", inf, "pct"),
                                ("mean reward, task", valid, "num"), ("mean reward, none", invalid, "num")])))


def _lengths(r: _Run) -> Built:
    ptok, ctok = r.col("mean_prompt_tokens"), r.col("mean_completion_tokens")
    pg, cg = growth(ptok), growth(ctok)
    png = ch.panels(r.epochs, [
        ("task length: agent prompt tokens", [ch.Series("prompt", ptok, ch.PURPLE)], ch.Decor(ylabel="tokens")),
        ("agent response length: completion tokens", [ch.Series("completion", ctok, ch.BLUE)],
         ch.Decor(ylabel="tokens")),
    ])
    numbers = {"epoch": r.epochs, "mean_prompt_tokens": ptok, "mean_completion_tokens": ctok,
               "prompt_growth": pg, "completion_growth": cg}
    return numbers, png, _section(
        "lengths", "Mean agent prompt length (the task, rendered) and mean completion length, in tokens; change "
        "against the first epoch. The paper reports the response length of its 7B agent growing "
        f"{' → '.join(str(v) for v in PAPER_RESPONSE_TOKENS)} tokens (+49%) over 6 epochs.",
        img(png, "prompt and completion length per epoch")
        + wide_table(r.epochs, [("prompt tokens", ptok, "tok"), ("change", pg, "signed"),
                                 ("completion tokens", ctok, "tok"), ("change", cg, "signed")]))


def _agent_reward(r: _Run) -> Built:
    atr, aloss, akl = r.col("agent_train_reward"), r.col("agent_loss"), r.col("agent_kl")
    dlp, skl, trunc = r.col("agent_logp_mismatch"), r.col("agent_sampler_kl"), r.col("agent_is_truncated")
    png = r.line("agent-reward", [ch.Series("train reward", atr, ch.BLUE)],
                 ch.Decor(ylabel="mean R_agent", ylim=(0, 1.02)))
    return {"epoch": r.epochs, "agent_train_reward": atr, "agent_loss": aloss, "agent_kl": akl,
            "agent_logp_mismatch": dlp, "agent_sampler_kl": skl, "agent_is_truncated": trunc}, png, _section(
        "agent-reward", "Mean reward of the samples update-agent trained on (GRPO), with its mean loss and KL "
        "to the reference policy; then how far the rollout engine's logprobs were from the trainer's before the "
        "update (mean |Δ logprob| and KL(sampler ‖ trainer) per token) and the share of tokens whose importance "
        "weight was truncated.",
        img(png, "agent training reward per epoch")
        + wide_table(r.epochs, [("train reward", atr, "num"), ("loss", aloss, "g"), ("KL", akl, "g"),
                                 ("sampler |Δ logprob|", dlp, "g"), ("KL(sampler ‖ trainer)", skl, "g"),
                                 ("IS weight truncated", trunc, "pct")]))


def _informative(r: _Run) -> Built:
    """Where GRPO's signal comes from, and whether the environment hits the band."""
    c = r.c
    inf, ebb = r.col("informative_share"), r.col("env_batch_band_share")
    png = r.line("informative", [
        ch.Series("informative groups", inf, ch.BLUE),
        ch.Series("env batches in band", ebb, ch.GREEN, "--", "s")],
        ch.Decor(ylabel="share", percent=True, ylim=(0, 1.02)))
    return {"epoch": r.epochs, "informative_share": inf, "env_batch_band_share": ebb}, png, _section(
        "informative", "Share of GRPO groups (a task's K rollouts) whose rewards are not all equal: only these "
        "give the agent a non-zero advantage, and for success rate p that happens with probability "
        "1 - p^K - (1-p)^K, largest at p = ½. Beside it, the share of the environment's batches whose p_batch is "
        f"in [{c.band_low:g}, {c.band_high:g}].",
        img(png, "informative groups per epoch")
        + wide_table(r.epochs, [("informative groups", inf, "pct"), ("env batches in band", ebb, "pct")])
        + _shape_tables(r.epochs, r.mrows))


def _env_kl(r: _Run) -> Built:
    kl_max = r.cfg.env_update.kl_max
    ekl, stop, eloss = r.col("env_kl"), r.col("env_kl_stopped"), r.col("env_loss")
    finite = [v for v in ekl if v is not None]
    top = max([*finite, kl_max])
    marks = [(e, v if v is not None else top, "stopped by kl_max") for e, v, s in zip(r.epochs, ekl, stop, strict=True)
             if s]
    png = r.line("env-kl", [ch.Series("KL at the end of update-env", ekl, ch.PURPLE)],
                 ch.Decor(ylabel="per-token KL", ylim=(0, None), markers=marks,
                          hlines=[(kl_max, f"kl_max = {kl_max:g}", ch.RED)]))
    mode_note = r.mode_note
    if r.cfg.env.mode != "genenv":
        mode_note = mode_note or (f'<p class="note">env.mode = {esc(r.cfg.env.mode)}: the environment is never '
                                  f"updated, so there is no KL to show.</p>")
    numbers = {"epoch": r.epochs, "env_kl": ekl, "env_kl_stopped": stop, "env_loss": eloss, "kl_max": kl_max}
    return numbers, png, _section(
        "env-kl", "Mean per-token KL of the environment to its initial model at the end of update-env (exact over "
        "the vocabulary under env_update.algo rwr and rwr-task, the k3 estimate on its sampled tokens under grpo). "
        "A red ring marks an epoch whose update stopped because the KL passed env_update.kl_max.",
        mode_note + img(png, "environment KL per epoch")
        + wide_table(r.epochs, [("KL", ekl, "g"), ("stopped by kl_max", stop, "bool"), ("loss", eloss, "g")]))


def _evals(r: _Run) -> Built:
    """Evaluation scores; these may exist before any epoch (base-model evaluations)."""
    evals = r.evals
    groups = eval_groups(evals)
    png = None
    if groups:
        png = ch.evals(groups, r.epochs, title=HEADINGS["evals"])
        table = long_table([("bench", "benchmark", "str"), ("protocol", "protocol", "str"),
                             ("model_tag", "model", "str"), ("epoch", "epoch", "int"), ("metric", "metric", "str"),
                             ("value", "score", "score"), ("n", "n", "int"), ("split", "split", "str"),
                             ("created", "created", "str")],
                            sorted(evals, key=lambda v: (v["bench"], v["protocol"], v["epoch"] is not None,
                                                         v["epoch"] or 0, v["created"] or "")),
                            row_class=lambda row: "" if row["charted"] else "old")
        old = "" if all(v["charted"] for v in evals) else \
            '<p class="what">Greyed rows: superseded by a newer evaluation of the same model; not charted.</p>'
        body = img(png, "evaluation scores per benchmark") + table + old
    else:
        body = ('<p class="empty">No evaluations yet: the eval-agent stage writes them into RUN/epochs/N/evals/ as '
                "each epoch ends (run.eval_every, run.eval_benches), and <code>genenv evaluate</code> into "
                "RUN/evals/&lt;bench&gt;/.</p>")
    return {"groups": groups, "files": evals}, png, _section(
        "evals", "Headline score (%) of each benchmark per epoch's agent, one line per protocol; dashed "
        "horizontal lines are models outside the run (the base model, references).", body)


# (chart id, builder, shown only once an epoch exists), in the page's order (CHARTS)
# a mixed run's per-domain numbers (metrics.json's by_domain) the report tabulates: (key, row label, kind)
DOMAIN_ROWS = [("tasks", "tasks", "int"), ("env_tasks", "env tasks", "int"),
               ("valid_generation_rate", "valid generations", "pct"), ("success_rate", "success rate", "num"),
               ("band_share", "in band", "pct"), ("informative_share", "informative groups", "pct"),
               ("env_r_mean", "mean R_env", "num")]


def _domains(r: _Run) -> Built:
    """A mixed run's success per domain, and its numbers per domain and epoch; nothing for a single domain."""
    by = [m.get("by_domain") or {} for m in r.mrows]
    names = sorted({name for d in by for name in d})
    if not r.cfg.run.mixed and not names:
        return None, None, ""

    def col(name: str, key: str) -> list[Any]:
        return [(d.get(name) or {}).get(key) if isinstance(d.get(name), dict) else None for d in by]

    numbers = {"epoch": r.epochs, "domains": {name: {key: col(name, key) for key, _, _ in DOMAIN_ROWS}
                                              for name in names}}
    png = None
    if names:
        png = r.line("domains", [ch.Series(name, col(name, "success_rate"), ch.PALETTE[i % len(ch.PALETTE)])
                                 for i, name in enumerate(names)],
                     ch.Decor(ylabel="success on generated tasks", ylim=(0, 1),
                              hlines=[(r.c.alpha, f"α = {r.c.alpha:g}", ch.RED)], band=r.band))
    rows = [(f"{name}: {label}", col(name, key), kind) for name in names for key, label, kind in DOMAIN_ROWS]
    body = (img(png, "success rate per domain and epoch") + wide_table(r.epochs, rows)) if names else \
        '<p class="empty">No per-domain numbers yet (generate-tasks and score write them).</p>'
    return numbers, png, _section(
        "domains", "A mixed run trains one agent on several domains: each domain's share of the epoch's tasks, the "
        "agent's success on them, the share of its tasks in the band and of its GRPO groups that are informative. "
        "The counts add up over the domains to the epoch's totals above.", body)


def _episodes(r: _Run) -> Built:
    """A multi-turn run's episodes per epoch; nothing when no epoch has any."""
    from genenv_cli.views.report.episodes import episodes_body

    numbers, png, body = episodes_body(r.epochs, r.episodes or {})
    if not body:
        return None, None, ""
    return numbers, png, _section(
        "episodes", "Rollouts of a multi-turn domain are episodes: how many agent turns they took, why they ended "
        "(done: the environment ended it; turn_cap: the domain's max_turns reached; context_overflow: the next "
        "prompt would not fit), the share of episodes with a call (a turn the environment replied to) and the "
        "share of calls the domain judged valid.", body)


BUILDERS: list[tuple[str, Callable[[_Run], Built], bool]] = [
    ("success-rate", _success_rate, True),
    ("p-task", _p_task, True),
    ("band-share", _band_share, True),
    ("env-reward", _env_reward, True),
    ("valid-generation", _valid_generation, True),
    ("env-signal", _env_signal, True),
    ("lengths", _lengths, True),
    ("agent-reward", _agent_reward, True),
    ("informative", _informative, True),
    ("env-kl", _env_kl, True),
    ("domains", _domains, True),
    ("episodes", _episodes, True),
    ("evals", _evals, False),
]



def _shape_tables(epochs: list[int], mrows: list[dict[str, Any]]) -> str:
    """Per shape and epoch: the environment's mix and the agent's success (from metrics.json's mappings)."""
    mixes = [m.get("env_shape_mix") or {} for m in mrows]
    succ = [m.get("shape_success") or {} for m in mrows]
    shapes = sorted({k for d in mixes + succ for k in d})
    if not shapes:
        return ""
    mix_rows = [(f"env tasks: {sh}", [d.get(sh) if mixes[i] else None for i, d in enumerate(mixes)], "pct")
                for sh in shapes]
    succ_rows = [(f"success: {sh}", [(d.get(sh) or {}).get("p") for d in succ], "num") for sh in shapes]
    return ('<p class="what">By task shape: the share of the environment\'s tasks, and the agent\'s pooled success '
            "on all tasks of that shape.</p>" + wide_table(epochs, mix_rows + succ_rows))

