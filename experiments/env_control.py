"""The positive control: can GRPO steer the environment's task shapes at all, when the reward is exact?

    python -m experiments.env_control --arms control-frozen control-lr1e-4 --seeds 1 2 3
    python -m experiments.env_control --report-only

The environment-only experiment's rewards come from K = 8 rollouts of the agent and pay mostly for validity. Here
the reward is an oracle: the frozen agent's success on each task shape is read from the measured shape table
(`shape_table.py`, every shape's 95% interval narrower than +-0.1), so a valid generation of shape s earns
1 - 2|p_s - α| and needs no rollout at all; an unparseable or invalid one earns 0. A duplicate (of a seed, a
held-out exercise or an earlier task of the run: the same novelty rule as `generate-tasks`, so held-out exercises
never become tasks) earns what `--dup` says: `invalid` (0, as in the recorded runs), `neutral` (no reward: left out
of its group, as a surplus generation is) or `shape` (the oracle reward of its shape: a frontier that novelty
cannot exhaust). An epoch is therefore generation plus the environment's update, and many more generations per
epoch are affordable than in the recorded experiment.

Each run holds the environment in memory: every epoch it writes G generations for each of P conditioning contexts
(a train seed exercise as the example, the arith prompt of epoch 1, no statistics; `generate.temperature`,
`top_p`, `max_new_tokens` as the env-only experiment), parses them with the domain's parser, rewards them and
trains by the project's GRPO update for the environment (training/grpo_trainer.GRPOTrainer with `env_update`'s settings:
a batch is a group, the KL leash `kl_coef` and the cap `kl_max`). The untrained arm (`control-frozen`) generates
the same way and never trains. The numbers of an epoch are of the generations written before its update:
- frontier share: share of its valid generations (parsed, within the domain's limits, duplicates included) whose
  shape the table puts at 25-75%;
- gap: the mean |p_shape - α| of those valid generations;
- valid rate, novel-valid rate (what generate-tasks would keep), duplicates per shape, mean reward, the update's
  final KL and steps, seconds of generation and of update.
The claim: a trained arm's frontier share and gap over the last `--claim-epochs` epochs beat control-frozen's,
paired by seed, the 95% t-interval of the difference excluding zero, >= 3 seeds.

Runs are written under --work (default .env-control-runs/) one epoch at a time; a finished run (all epochs in its
file) is not run again. An unfinished one restarts from epoch 1 (the model lives in memory). Records and tables go to results/env_control/.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from lab.record import git_commit, machine, versions

from experiments import shape_table
from genenv_cli.views.report.compare import mean_interval

RESULTS = Path(__file__).parent / "results" / "env_control"
ALPHA = 0.5
# The generation settings of the env-only experiment (lab/arms.COMMON) and its update's; an arm adds its own.
COMMON = ["generate.max_new_tokens=24", "generate.batch_size=64", "env_update.lora=true",
          "env_update.learning_rate=1e-4", "env_update.passes=1", "env_update.batch_size=8", "env_update.algo=grpo"]
ARMS: dict[str, list[str]] = {
    "control-frozen": [],
    "control-lr1e-4": [],                                              # the env-only experiment's update as it is
    "control-lr1e-3": ["env_update.learning_rate=1e-3"],
    "control-lr1e-3-kl0": ["env_update.learning_rate=1e-3", "env_update.kl_coef=0", "env_update.kl_max=10"],
    "control-lr3e-3": ["env_update.learning_rate=3e-3"],
    "control-full-lr1e-5": ["env_update.lora=false", "env_update.learning_rate=1e-5"],
    "control-full-lr5e-5": ["env_update.lora=false", "env_update.learning_rate=5e-5"],
}
TRAINED = [a for a in ARMS if a != "control-frozen"]
DUP_COLUMNS = [f"{k}-{d}d" for k in ("add", "sub", "mul") for d in (1, 2)] + ["2op-1d", "2op-2d", "3op-2d"]


def arm_config(arm: str, extra: list[str], seed: int) -> Any:
    from genenv_cli.catalogue.config import apply_overrides, config_from_dict

    sets = [f"run.seed={seed}", *COMMON, *extra, *ARMS[arm]]
    return config_from_dict(apply_overrides({"run": {"domain": "arith"}}, sets), f"control arm {arm}")


def oracle_reward(shape: str | None, table: dict[str, float]) -> float:
    """1 - 2|p_shape - α| for a valid generation of `shape`, 0 for none (and for a shape the table lacks: the
    domain's rare 4-digit several-operation shapes, which the agent never solves)."""
    if shape is None or shape not in table:
        return 0.0
    return 1.0 - 2.0 * abs(table[shape] - ALPHA)


class Judge:
    """Parses and rewards generations against the novelty set of one run (every seed, held-out ones included, and
    every novel task so far), as generate-tasks does."""

    def __init__(self, table: dict[str, float], dup: str):
        from genenv_cli.catalogue.domains import get_domain

        self.domain = get_domain("arith")
        self.table, self.dup = table, dup
        self.taken = {self.domain.exact_key(s.payload) for s in self.domain.read_seeds(self.domain.seed_path())}

    def judge(self, text: str, ctx: Any) -> dict[str, Any]:
        from genenv_cli.domains.base import Reject

        try:
            payload, shape = self.domain.parse_env_output(text, ctx)
        except (Reject, ValueError, RecursionError, OverflowError) as exc:
            kind = "parse" if str(exc).startswith("parse") or not isinstance(exc, Reject) else "invalid"
            return {"kind": kind, "shape": None, "reward": 0.0}
        key = self.domain.exact_key(payload)
        if key in self.taken:
            r = {"invalid": 0.0, "neutral": None, "shape": oracle_reward(shape, self.table)}[self.dup]
            return {"kind": "duplicate", "shape": shape, "reward": r}
        self.taken.add(key)
        return {"kind": "novel", "shape": shape, "reward": oracle_reward(shape, self.table)}


def contexts(rng: random.Random, count: int) -> list[Any]:
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.domains.base import EnvContext

    seeds = get_domain("arith").seeds("train")
    return [EnvContext(parent_id=s.id, parent_shape=s.shape, parent=s.payload, parent_p=None, stats=None, frontier=[])
            for s in rng.sample(seeds, count)]


def epoch_numbers(judged: list[dict[str, Any]], table: dict[str, float]) -> dict[str, Any]:
    """An epoch's counts per shape (valid ones, and of those the duplicates), then its measures (`measures`)."""
    per_shape: dict[str, dict[str, int]] = {}
    for j in judged:
        if j["kind"] in ("novel", "duplicate"):
            row = per_shape.setdefault(j["shape"], {"valid": 0, "duplicate": 0})
            row["valid"] += 1
            row["duplicate"] += j["kind"] == "duplicate"
    rewards = [j["reward"] for j in judged if j["reward"] is not None]
    counts = {"generations": len(judged), "parse": sum(j["kind"] == "parse" for j in judged),
              "invalid": sum(j["kind"] == "invalid" for j in judged), "per_shape": per_shape,
              "reward_mean": round(sum(rewards) / len(rewards), 4) if rewards else None}
    return {**counts, **measures(counts, table)}


def measures(counts: dict[str, Any], table: dict[str, float]) -> dict[str, Any]:
    """From an epoch's counts and a shape table: valid and novel rates, the duplicates' share of the valid
    generations, the frontier share of the valid (and of the novel) ones, and their mean |p_shape - α| (gap). A
    run's measures can so be recomputed with another table."""
    front = {s for s, p in table.items() if shape_table.FRONTIER[0] <= p <= shape_table.FRONTIER[1]}
    per = counts["per_shape"]
    valid = sum(r["valid"] for r in per.values())
    dup = sum(r["duplicate"] for r in per.values())
    n = counts["generations"]

    def share(x: float, d: int) -> float | None:
        return round(x / d, 4) if d else None

    return {"valid_rate": share(valid, n), "novel_rate": share(valid - dup, n),
            "duplicate_share_of_valid": share(dup, valid),
            "frontier_share": share(sum(r["valid"] for s, r in per.items() if s in front), valid),
            "frontier_share_novel": share(sum(r["valid"] - r["duplicate"] for s, r in per.items() if s in front),
                                          valid - dup),
            "gap": share(sum(r["valid"] * abs(table.get(s, 0.0) - ALPHA) for s, r in per.items()), valid)}


def update(policy: Any, cfg: Any, rows: list[dict[str, Any]], seed: int, epoch: int, ui: Any) -> dict[str, Any]:
    """The environment's GRPO step on this epoch's generations (as update-env's, held in memory)."""
    from genenv_cli.machinery.training.grpo_config import GRPOConfig
    from genenv_cli.machinery.training.grpo_trainer import GRPOTrainer
    from genenv_cli.machinery.training.training_loop import train_policy

    u = cfg.env_update
    if not rows:
        return {"steps": 0, "kl": None, "kl_stopped": False, "rows": 0}
    config = GRPOConfig(clip_eps=u.clip_eps, kl_coef=u.kl_coef, loss_type="grpo", temperature=cfg.generate.temperature,
                        replay_clip=1.0, is_cap=u.is_cap, kl_max=u.kl_max, group_batches=True)
    trainer, _, cap = train_policy(
        policy, u, lambda args: GRPOTrainer(policy, args, rows, config),
        seed=seed + epoch, device="cpu", dtype=cfg.run.dtype if cfg.run.dtype != "auto" else "float32", ui=ui,
        desc=f"control e{epoch}")
    kls = [s["kl"] for s in trainer.step_stats if s.get("kl") is not None]
    return {"steps": len(trainer.step_stats), "kl": round(float(kls[-1]), 5) if kls else None,
            "kl_stopped": cap is not None, "rows": len(rows)}


def run_one(arm: str, seed: int, args: argparse.Namespace, table: dict[str, float], path: Path) -> dict[str, Any]:
    from genenv_cli.core.ui import UI
    from genenv_cli.machinery.engines.base import SamplingParams
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve
    from genenv_cli.machinery.training.grpo import group_advantages
    from genenv_cli.machinery.training.policy_loading import load_policy

    ui = UI(quiet=True)
    cfg = arm_config(arm, args.sets, seed)
    g = cfg.generate
    policy = load_policy(args.model, args.model, base_name=args.model, train=cfg.env_update,
                         need_reference=arm != "control-frozen", device="cpu", dtype="float32",
                         trust_remote_code=False, seed=seed)
    judge = Judge(table, args.dup)
    rng = random.Random(seed)
    record = {"arm": arm, "seed": seed, "settings": settings(args, arm), "commit": git_commit(),
              "machine": machine(), "reward_table": {"file": args.table.name, "p": table}, "rows": []}
    for epoch in range(1, args.epochs + 1):
        t0, c0 = time.time(), time.process_time()  # process time: what the stage computed, less inflated by load
        engine = HFEngine(resolve(args.model), model=policy.model, tokenizer=policy.tokenizer, batch_size=g.batch_size)
        ctxs = contexts(rng, args.contexts)
        params = SamplingParams(temperature=g.temperature, top_p=g.top_p, max_new_tokens=g.max_new_tokens,
                                n=args.generations, seed=seed * 1_000_003 + epoch * 10_007)
        gens = engine.generate([judge.domain.env_messages(c) for c in ctxs], params)
        t_gen, c_gen = time.time() - t0, time.process_time() - c0
        judged, rows = [], []
        for ci, (ctx, group) in enumerate(zip(ctxs, gens, strict=True)):
            for gen in group:
                j = judge.judge(gen.text, ctx)
                judged.append(j)
                rows.append({"prompt_ids": list(gen.prompt_token_ids), "completion_ids": list(gen.token_ids),
                             "sampler_logps": list(gen.logprobs), "reward": j["reward"], "group": f"{epoch}/{ci}"})
        numbers = epoch_numbers(judged, table)
        t1, c1 = time.time(), time.process_time()
        upd: dict[str, Any] = {"steps": 0, "kl": None, "kl_stopped": False, "rows": 0}
        if arm != "control-frozen":
            scored = [r for r in rows if r["reward"] is not None and r["completion_ids"]]
            adv, why = group_advantages([r["reward"] for r in scored], [r["group"] for r in scored])
            train = [{"prompt_ids": r["prompt_ids"], "completion_ids": r["completion_ids"],
                      "sampler_logps": r["sampler_logps"], "advantage": a, "replay": False, "epoch": epoch,
                      "group": r["group"]} for r, a, w in zip(scored, adv, why, strict=True) if w is None]
            upd = update(policy, cfg, train, seed, epoch, ui)
        record["rows"].append({"epoch": epoch, **numbers, "update": upd, "seconds_generate": round(t_gen, 1),
                               "seconds_update": round(time.time() - t1, 1), "cpu_generate": round(c_gen, 1),
                               "cpu_update": round(time.process_time() - c1, 1)})
        _write(path, record)
        print(f"{arm} s{seed} e{epoch}: frontier {numbers['frontier_share']} gap {numbers['gap']} valid "
              f"{numbers['valid_rate']} dup {numbers['duplicate_share_of_valid']} kl {upd['kl']} "
              f"({t_gen:.0f}+{time.time() - t1:.0f} s)", flush=True)
    return record


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


def settings(args: argparse.Namespace, arm: str) -> list[str]:
    return [*([f"model={args.model}"] if args.model != "embedded" else []),
            f"epochs={args.epochs}", f"contexts={args.contexts}", f"generations={args.generations}",
            f"dup={args.dup}", *COMMON, *args.sets, *ARMS[arm]]


def finished(path: Path, args: argparse.Namespace, arm: str) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    data = json.loads(path.read_text())
    if data.get("settings") != settings(args, arm) or len(data.get("rows", [])) != args.epochs:
        return None
    return data


def run_path(work: Path, args: argparse.Namespace, arm: str, seed: int) -> Path:
    return work / f"{args.tag}" / f"{arm}-s{seed}.json"


def last_mean(rows: list[dict[str, Any]], key: str, n: int) -> float | None:
    xs = [r[key] for r in rows[-n:] if r.get(key) is not None]
    return sum(xs) / len(xs) if xs else None


def summarize(args: argparse.Namespace, runs: dict[str, dict[int, dict[str, Any]]],
              table: dict[str, float]) -> dict[str, Any]:
    """Per arm: the per-epoch means over seeds; per trained arm: the claim against control-frozen, paired by seed
    over the last --claim-epochs epochs."""
    out: dict[str, Any] = {"arms": {}, "claims": {}}
    keys = ["frontier_share", "gap", "valid_rate", "novel_rate", "duplicate_share_of_valid", "reward_mean"]
    for by_seed in runs.values():  # the measures from the table given, whatever table the run was made with
        for r in by_seed.values():
            for x in r["rows"]:
                x.update(measures(x, table))
    for arm, by_seed in runs.items():
        epochs = []
        for e in range(args.epochs):
            rows = [r["rows"][e] for r in by_seed.values() if len(r["rows"]) > e]
            epochs.append({"epoch": e + 1, **{k: _ci([x.get(k) for x in rows]) for k in keys},
                           "kl": _ci([x["update"].get("kl") for x in rows]),
                           "seconds_generate": _ci([x.get("seconds_generate") for x in rows]),
                           "seconds_update": _ci([x.get("seconds_update") for x in rows]),
                           "cpu_generate": _ci([x.get("cpu_generate") for x in rows]),
                           "cpu_update": _ci([x.get("cpu_update") for x in rows])})
        out["arms"][arm] = {"seeds": sorted(by_seed), "epochs": epochs, "duplicates": duplicates(by_seed)}
    base = runs.get("control-frozen", {})
    for arm, by_seed in runs.items():
        if arm == "control-frozen":
            continue
        seeds = sorted(set(by_seed) & set(base))
        c: dict[str, Any] = {"seeds": seeds}
        for key, better in (("frontier_share", 1), ("gap", -1), ("frontier_share_novel", 1), ("valid_rate", 1)):
            pairs = [(last_mean(by_seed[s]["rows"], key, args.claim_epochs),
                      last_mean(base[s]["rows"], key, args.claim_epochs)) for s in seeds]
            diffs = [a - b for a, b in pairs if a is not None and b is not None]  # None: no valid generation
            m = _ci(diffs)
            m["per_seed"] = [round(d, 4) for d in diffs]
            m["holds"] = (len(diffs) >= 3 and m["low"] is not None
                          and (m["low"] > 0 if better > 0 else m["high"] < 0))
            c[key] = m
        c["claim_holds"] = bool(c["frontier_share"]["holds"] and c["gap"]["holds"])
        c["kl_last"] = _ci([by_seed[s]["rows"][-1]["update"].get("kl") for s in seeds])
        out["claims"][arm] = c
    return out


def duplicates(by_seed: dict[int, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per shape, pooled over seeds and epochs: valid generations, how many of them were duplicates (of a seed, a
    held-out exercise or an earlier task of the run), and that share."""
    out: dict[str, dict[str, Any]] = {}
    for r in by_seed.values():
        for x in r["rows"]:
            for shape, c in x["per_shape"].items():
                row = out.setdefault(shape, {"valid": 0, "duplicate": 0})
                row["valid"] += c["valid"]
                row["duplicate"] += c["duplicate"]
    for row in out.values():
        row["share"] = round(row["duplicate"] / row["valid"], 4) if row["valid"] else None
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["valid"]))


def _ci(values: list[Any]) -> dict[str, Any]:
    m = mean_interval(values)
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items()}


def _f(m: dict[str, Any] | None, pct: bool = True) -> str:
    if not m or m.get("mean") is None:
        return "-"
    s = 100.0 if pct else 1.0
    fmt = (lambda x: f"{x * s:.1f}") if pct else (lambda x: f"{x:.3g}")
    if m.get("low") is None:
        return fmt(m["mean"])
    return f"{fmt(m['mean'])} [{fmt(m['low'])}, {fmt(m['high'])}]"


def markdown(rec: dict[str, Any]) -> str:
    lines = [f"# The positive control: the environment steered by an exact reward ({rec['tag']})", "",
             f"{rec['date']}, commit {rec['commit']}, {rec['machine'].get('cpu')} ({rec['machine'].get('cpus')} "
             f"cores, shared), torch {rec['versions'].get('torch')}; {rec['epochs']} epochs of {rec['contexts']} "
             f"contexts x {rec['generations']} generations, duplicates `{rec['dup']}`; claim over the last "
             f"{rec['claim_epochs']} epochs. Settings: `{' '.join(rec['common'])}`.", "",
             "Per epoch, mean [95% interval] over seeds, in percent except gap (mean |p_shape - α| of valid "
             "generations) and KL (the update's last step).", ""]
    for arm, data in rec["summary"]["arms"].items():
        lines += [f"## {arm} (seeds {data['seeds']}; `{' '.join(ARMS.get(arm, [])) or 'as common'}`)", "",
                  "| epoch | frontier share | gap | valid | novel | duplicates of valid | reward | KL | s generate | "
                  "s update | CPU s generate | CPU s update |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in data["epochs"]:
            lines.append(f"| {r['epoch']} | {_f(r['frontier_share'])} | {_f(r['gap'], False)} | {_f(r['valid_rate'])} "
                         f"| {_f(r['novel_rate'])} | {_f(r['duplicate_share_of_valid'])} | "
                         f"{_f(r['reward_mean'], False)} | {_f(r['kl'], False)} | {_f(r['seconds_generate'], False)} "
                         f"| {_f(r['seconds_update'], False)} | {_f(r['cpu_generate'], False)} | "
                         f"{_f(r['cpu_update'], False)} |")
        lines.append("")
    lines += ["## Duplicates per shape", "", "Valid generations of each shape, pooled over seeds and epochs, and the "
              "share of them that were exact duplicates of a seed exercise (train or held-out) or of an earlier task "
              "of the run; the table's p_shape beside them.", "",
              "| arm | " + " | ".join(f"{s} (p {rec['table'].get(s, 0):.2f})" for s in DUP_COLUMNS) + " |",
              "|---|" + "---|" * len(DUP_COLUMNS)]
    for arm, data in rec["summary"]["arms"].items():
        d = data["duplicates"]
        lines.append(f"| {arm} | " + " | ".join(
            f"{d[s]['duplicate']}/{d[s]['valid']}" if s in d else "0/0"
            for s in DUP_COLUMNS) + " |")
    lines.append("")
    lines += ["## The claim", "", "Trained arm minus control-frozen, paired by seed, mean of the last "
              f"{rec['claim_epochs']} epochs; holds when the 95% interval excludes zero in the good direction "
              "(frontier share up, gap down) at >= 3 seeds.", ""]
    for arm, c in rec["summary"]["claims"].items():
        lines.append(f"- **{arm}** (seeds {c['seeds']}): holds = {c['claim_holds']}; frontier share "
                     f"{_f(c['frontier_share'])} points (per seed {c['frontier_share']['per_seed']}), gap "
                     f"{_f(c['gap'], False)} (per seed {c['gap']['per_seed']}), last KL {_f(c['kl_last'], False)}; "
                     f"not part of the claim: frontier share of the novel generations {_f(c['frontier_share_novel'])} "
                     f"(per seed {c['frontier_share_novel']['per_seed']}), valid rate {_f(c['valid_rate'])} "
                     f"(per seed {c['valid_rate']['per_seed']})")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arms", nargs="+", default=["control-frozen", "control-lr1e-4"], choices=list(ARMS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--contexts", type=int, default=8, help="conditioning contexts (groups) per epoch")
    ap.add_argument("--generations", type=int, default=8, help="generations per context (the group size)")
    ap.add_argument("--dup", choices=["invalid", "neutral", "shape"], default="shape",
                    help="a duplicate's reward: 0, none (left out of its group), or its shape's oracle reward")
    ap.add_argument("--claim-epochs", type=int, default=3)
    ap.add_argument("--table", type=Path, default=shape_table.TABLE)
    ap.add_argument("--tag", default="control", help="the name of this set of runs (folder and result file)")
    ap.add_argument("--work", type=Path, default=Path(".env-control-runs"))
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--model", default="embedded", help="the environment model (the embedded one in the recorded runs)")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    table = shape_table.load_table(args.table)
    if not args.report_only:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        for seed in args.seeds:
            for arm in args.arms:
                path = run_path(args.work, args, arm, seed)
                if finished(path, args, arm) is None:
                    run_one(arm, seed, args, table, path)
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for arm in ARMS:
        for seed in args.seeds:
            path = run_path(args.work, args, arm, seed)
            rec_path = args.out / args.tag / f"{arm}-s{seed}.json"
            data = finished(path, args, arm) or finished(rec_path, args, arm)
            if data is not None:
                runs.setdefault(arm, {})[seed] = data
                if data is not None and path.is_file():
                    _write(rec_path, data)
    rec = {"experiment": "env-control", "tag": args.tag, "date": time.strftime("%Y-%m-%d"), "commit": git_commit(),
           "machine": machine(), "versions": versions(), "epochs": args.epochs, "contexts": args.contexts,
           "generations": args.generations, "dup": args.dup, "claim_epochs": args.claim_epochs, "common": COMMON,
           "arms_settings": ARMS, "table_file": str(args.table.name), "table": table,
           "command": " ".join(["python -m experiments.env_control", *(argv if argv is not None else sys.argv[1:])]),
           "summary": summarize(args, runs, table)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.tag}.json").write_text(json.dumps(rec, indent=1) + "\n")
    (args.out / f"{args.tag}.md").write_text(markdown(rec))
    print(markdown(rec))
    return rec


if __name__ == "__main__":
    main()
