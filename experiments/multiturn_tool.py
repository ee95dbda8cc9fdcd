"""Multi-turn GRPO with a calculator against the same agent trained single-turn without it.

    python -m experiments.multiturn_tool --seeds 1 2 3 --epochs 5 --tasks 4 --group 4
    python -m experiments.multiturn_tool --report-only

Arms (same model, same exercises in the same order, same group size, tokens per turn and update settings):
  multi-turn   the `calc` domain: each task is an episode, the agent may call calc(<expression>) and read the
               exact result before it answers (at most 3 agent turns); GRPO over the episode, the environment's
               tokens (the calculator's replies, the chat template's turn markers) masked out of the loss
  single-turn  the `arith` domain: the same exercises answered in one turn, the tool disabled (arith's prompt
               offers none); GRPO as every single-turn domain trains
Each epoch samples `--tasks` exercises from the train split (the same ones for both arms of a seed), plays
`--group` episodes of each at temperature 1 with the hf engine on the model being trained, and takes one
update-agent step set on them (training/grpo_trainer.GRPOTrainer with `agent_update`'s defaults: LoRA r 16,
learning rate 1e-4, KL 0.001, batch 8, one pass), all in memory. The environment model plays no part: the
exercises are arith's seed tasks, so what differs between the arms is the episode and the tool only.

Held out: after the last epoch every run's agent plays the validation exercises (never trained on) greedily,
under both protocols: `calc` (the tool offered) and `arith` (no tool); the base model once, the same way.
Measured per protocol: success (exact integer answer), the share of episodes that call the calculator (a turn
the calculator answered), the share of calls that parse (the calculator returned a number, not
`calc error: ...`), mean agent turns, and why episodes ended.
The claim: held-out success under the tool protocol, multi-turn minus single-turn, paired by seed, the 95%
t-interval excluding zero at >= 3 seeds. Beside it, each arm under its own protocol (multi-turn with the tool,
single-turn without), and each arm's change from the base model, also paired by seed.

Runs are written under --work (default .multiturn-tool-runs/) one epoch at a time, the LoRA adapter beside
the record, so an interrupted run resumes at its next epoch (each epoch builds a fresh trainer from the
adapter, as update-agent does). Records and tables go to results/multiturn_tool/.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from lab.record import git_commit, machine, versions

from genenv_cli.views.report.compare import mean_interval

RESULTS = Path(__file__).parent / "results" / "multiturn_tool"
ARMS = {"multi-turn": "calc", "single-turn": "arith"}
PROTOCOLS = ("calc", "arith")


def arm_config(arm: str, sets: list[str], seed: int) -> Any:
    from genenv_cli.catalogue.config import apply_overrides, config_from_dict

    return config_from_dict(apply_overrides({"run": {"domain": ARMS[arm]}}, [f"run.seed={seed}", *sets]),
                            f"multiturn-tool arm {arm}")


def episode_measures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Success, tool use and call validity of played episodes (rollout_episodes rows)."""
    n = len(rows)
    calls = parsed = calling = 0
    for r in rows:
        obs = json.loads(r["observations"])
        calls += len(obs)  # in calc every observation is the calculator's reply to a call
        parsed += sum(not o.startswith("calc error") for o in obs)
        calling += bool(obs)
    return {"episodes": n, "success": round(sum(r["reward"] >= 1.0 for r in rows) / n, 4) if n else None,
            "tool_share": round(calling / n, 4) if n else None, "calls": calls, "parsed": parsed,
            "parse_share": round(parsed / calls, 4) if calls else None,
            "turns_mean": round(sum(r["turns"] for r in rows) / n, 3) if n else None,
            "ends": dict(sorted(Counter(r["end"] for r in rows).items()))}


def play(engine: Any, domain_name: str, payloads: list[dict[str, Any]], params: Any, base_seed: int) -> list[Any]:
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.stages.rollout_episodes import play_tasks

    tasks = [{"domain": domain_name, "payload": p} for p in payloads]
    return play_tasks(engine, {domain_name: get_domain(domain_name)}, tasks, params,
                      [base_seed + j * params.n for j in range(len(tasks))])


def update(policy: Any, cfg: Any, groups: list[list[dict[str, Any]]], epoch: int, temperature: float,
           ui: Any) -> dict[str, Any]:
    """update-agent's GRPO step on one epoch's episodes, in memory: group-relative advantages, the agent's
    tokens only (an episode's `agent_mask`)."""
    from genenv_cli.machinery.training.grpo import group_advantages
    from genenv_cli.machinery.training.grpo_config import GRPOConfig
    from genenv_cli.machinery.training.grpo_trainer import GRPOTrainer
    from genenv_cli.machinery.training.training_loop import train_policy

    flat = [(j, r) for j, g in enumerate(groups) for r in g]
    adv, why = group_advantages([r["reward"] for _, r in flat], [str(j) for j, _ in flat])
    rows = []
    for (_, r), a, w in zip(flat, adv, why, strict=True):
        if w is not None or not r["completion_token_ids"]:
            continue
        row = {"prompt_ids": list(r["prompt_token_ids"]), "completion_ids": list(r["completion_token_ids"]),
               "sampler_logps": list(r["logprobs"]), "advantage": a, "replay": False, "epoch": epoch}
        if 0 in r["agent_mask"]:  # a one-turn episode trains exactly as a single-turn rollout
            row["agent_mask"] = list(r["agent_mask"])
        rows.append(row)
    informative = len({j for (j, _), w in zip(flat, why, strict=True) if w is None})
    if not rows:
        return {"rows": 0, "groups_informative": informative, "steps": 0, "kl": None, "gap": None}
    u = cfg.agent_update
    config = GRPOConfig(clip_eps=u.clip_eps, kl_coef=u.kl_coef, loss_type=u.loss_type, temperature=temperature,
                        replay_clip=u.replay_clip, is_cap=u.is_cap)
    trainer, _, _ = train_policy(
        policy, u, lambda args: GRPOTrainer(policy, args, rows, config),
        seed=cfg.run.seed + epoch, device="cpu", dtype="float32", ui=ui, desc=f"update e{epoch}")
    old = trainer.old_policy_logps()
    num = den = 0.0
    for i, r in enumerate(rows):  # the sampler-trainer gap over the agent's tokens
        if i in old:
            mask = r.get("agent_mask") or [1] * len(r["completion_ids"])
            for a, b, m in zip(old[i].tolist(), r["sampler_logps"], mask, strict=True):
                num += m * abs(a - b)
                den += m
    kls = [s["kl"] for s in trainer.step_stats if s.get("kl") is not None]
    return {"rows": len(rows), "groups_informative": informative, "steps": len(trainer.step_stats),
            "kl": round(float(kls[-1]), 6) if kls else None, "gap": round(num / den, 8) if den else None}


def load(model: str, adapter: Path | None, cfg: Any, seed: int) -> Any:
    from genenv_cli.machinery.training.policy_loading import load_policy

    name = str(adapter) if adapter is not None else model
    return load_policy(name, name, base_name=model, train=cfg.agent_update,
                       need_reference=cfg.agent_update.kl_coef > 0, device="cpu", dtype="float32",
                       trust_remote_code=False, seed=seed)


def engine_for(policy: Any, model: str, batch_size: int) -> Any:
    from genenv_cli.machinery.engines.hf import HFEngine
    from genenv_cli.machinery.models import resolve

    return HFEngine(resolve(model), model=policy.model, tokenizer=policy.tokenizer, batch_size=batch_size)


def heldout(args: argparse.Namespace) -> list[dict[str, Any]]:
    from genenv_cli.catalogue.domains import get_domain

    seeds = get_domain("arith").seeds("validation")
    if args.heldout and args.heldout < len(seeds):
        seeds = random.Random(0).sample(seeds, args.heldout)
    return [s.payload for s in seeds]


def evaluate(policy: Any, args: argparse.Namespace) -> dict[str, Any]:
    """Every protocol's measures on the held-out exercises, greedy."""
    from genenv_cli.machinery.engines.base import SamplingParams

    engine = engine_for(policy, args.model, args.batch)
    params = SamplingParams(temperature=0.0, max_new_tokens=args.tokens, n=1, seed=0)
    out = {}
    for proto in PROTOCOLS:
        t0 = time.time()
        groups = play(engine, proto, heldout(args), params, 0)
        out[proto] = {**episode_measures([g[0] for g in groups]), "seconds": round(time.time() - t0, 1)}
    return out


def run_one(arm: str, seed: int, args: argparse.Namespace, path: Path) -> dict[str, Any]:
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.core.ui import UI
    from genenv_cli.machinery.engines.base import SamplingParams
    from genenv_cli.machinery.models import write_checkpoint_meta

    ui = UI(quiet=True)
    cfg = arm_config(arm, args.sets, seed)
    adapter = path.with_suffix("")  # the run's adapter folder, beside its record
    record = _read(path) if path.is_file() and (adapter / "adapter_config.json").is_file() else None
    if record is None or record.get("settings") != settings(args):
        record = {"arm": arm, "seed": seed, "settings": settings(args), "commit": git_commit(),
                  "machine": machine(), "rows": []}
    if len(record["rows"]) == args.epochs and "heldout" in record:
        return record  # finished
    policy = load(args.model, adapter if record["rows"] else None, cfg, seed)
    train = get_domain("arith").seeds("train")
    for epoch in range(len(record["rows"]) + 1, args.epochs + 1):
        t0, c0 = time.time(), time.process_time()
        rng = random.Random(seed * 1_000_003 + epoch)  # the same exercises for both arms of a seed
        payloads = [s.payload for s in rng.sample(train, args.tasks)]
        params = SamplingParams(temperature=cfg.rollout.temperature, top_p=cfg.rollout.top_p,
                                max_new_tokens=args.tokens, n=args.group, seed=0)
        groups = play(engine_for(policy, args.model, args.batch), ARMS[arm], payloads, params,
                      seed * 1_000_003 + epoch * 10_007)
        t_play = time.time() - t0
        numbers = episode_measures([r for g in groups for r in g])
        numbers["agent_tokens"] = sum(sum(r["agent_mask"]) for g in groups for r in g)
        numbers["env_tokens"] = sum(len(r["agent_mask"]) - sum(r["agent_mask"]) for g in groups for r in g)
        t1 = time.time()
        upd = update(policy, cfg, groups, epoch, cfg.rollout.temperature, ui)
        policy.model.save_pretrained(str(adapter))
        policy.tokenizer.save_pretrained(str(adapter))
        write_checkpoint_meta(adapter, kind="lora", base=args.model, role="agent", epoch=epoch)  # a genenv checkpoint
        record["rows"].append({"epoch": epoch, **numbers, "update": upd, "seconds_play": round(t_play, 1),
                               "seconds_update": round(time.time() - t1, 1),
                               "cpu_seconds": round(time.process_time() - c0, 1)})
        _write(path, record)
        print(f"{arm} s{seed} e{epoch}: success {numbers['success']} tool {numbers['tool_share']} parse "
              f"{numbers['parse_share']} informative {upd['groups_informative']}/{args.tasks} "
              f"({t_play:.0f}+{time.time() - t1:.0f} s)", flush=True)
    if "heldout" not in record:
        record["heldout"] = evaluate(policy, args)
        _write(path, record)
        print(f"{arm} s{seed} held out: " + json.dumps({p: record["heldout"][p]["success"] for p in PROTOCOLS}),
              flush=True)
    return record


def base_model(args: argparse.Namespace) -> dict[str, Any]:
    """The untrained model's held-out measures (greedy: the same for every seed)."""
    path = args.work / args.tag / "base.json"
    if path.is_file() and _read(path).get("settings") == settings(args):
        return _read(path)
    cfg = arm_config("multi-turn", args.sets, 0)
    rec = {"settings": settings(args), "heldout": evaluate(load(args.model, None, cfg, 0), args)}
    _write(path, rec)
    return rec


def _read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)


def settings(args: argparse.Namespace) -> list[str]:
    return [*([f"model={args.model}"] if args.model != "embedded" else []), f"epochs={args.epochs}",
            f"tasks={args.tasks}", f"group={args.group}", f"tokens={args.tokens}", f"heldout={args.heldout}",
            *args.sets]


def _ci(values: list[Any]) -> dict[str, Any]:
    m = mean_interval(values)
    return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in m.items()}


def summarize(args: argparse.Namespace, runs: dict[str, dict[int, dict[str, Any]]],
              base: dict[str, Any] | None) -> dict[str, Any]:
    keys = ("success", "tool_share", "parse_share", "turns_mean")
    out: dict[str, Any] = {"arms": {}, "claims": {}}
    for arm, by_seed in runs.items():
        epochs = []
        for e in range(args.epochs):
            rows = [r["rows"][e] for r in by_seed.values() if len(r["rows"]) > e]
            epochs.append({"epoch": e + 1, **{k: _ci([x.get(k) for x in rows]) for k in keys},
                           "informative": _ci([x["update"]["groups_informative"] / args.tasks for x in rows]),
                           "kl": _ci([x["update"].get("kl") for x in rows]),
                           "gap": _ci([x["update"].get("gap") for x in rows]),
                           "seconds": _ci([x["seconds_play"] + x["seconds_update"] for x in rows])})
        held = {p: {k: _ci([r["heldout"][p].get(k) for r in by_seed.values() if "heldout" in r]) for k in keys}
                for p in PROTOCOLS}
        ends = {p: dict(sum((Counter(r["heldout"][p]["ends"]) for r in by_seed.values() if "heldout" in r),
                            Counter())) for p in PROTOCOLS}
        out["arms"][arm] = {"seeds": sorted(by_seed), "epochs": epochs, "heldout": held, "heldout_ends": ends}
    mt, st = runs.get("multi-turn", {}), runs.get("single-turn", {})
    seeds = sorted(s for s in set(mt) & set(st) if "heldout" in mt[s] and "heldout" in st[s])

    def paired(a: dict[int, dict[str, Any]], pa: str, b: dict[int, dict[str, Any]] | None, pb: str,
               key: str = "success") -> dict[str, Any]:
        diffs = [a[s]["heldout"][pa][key] - (b[s]["heldout"][pb][key] if b is not None
                                              else base["heldout"][pb][key]) for s in seeds]
        m = _ci(diffs)
        m["per_seed"] = [round(d, 4) for d in diffs]
        m["holds"] = len(diffs) >= 3 and m["low"] is not None and (m["low"] > 0 or m["high"] < 0)
        return m

    out["seeds_paired"] = seeds
    if seeds:
        out["claims"] = {
            "multi-turn minus single-turn, tool protocol (the claim)": paired(mt, "calc", st, "calc"),
            "multi-turn with the tool minus single-turn without it (each its own protocol)": paired(mt, "calc", st,
                                                                                                     "arith"),
            "multi-turn minus single-turn, no-tool protocol": paired(mt, "arith", st, "arith"),
            "tool share, multi-turn minus single-turn (tool protocol)": paired(mt, "calc", st, "calc", "tool_share"),
        }
        def gain(runs_of: dict[int, dict[str, Any]], s: int) -> float:
            rows = runs_of[s]["rows"]
            return rows[-1]["success"] - rows[0]["success"]

        for name, diffs in (
                ("not held out: temperature-1 success on each epoch's new train exercises, the last epoch (after "
                 "every update but the last) minus the first (the base model), multi-turn minus single-turn",
                 [gain(mt, s) - gain(st, s) for s in seeds]),
                ("not held out: the same gain, multi-turn", [gain(mt, s) for s in seeds]),
                ("not held out: the same gain, single-turn", [gain(st, s) for s in seeds])):
            m = _ci(diffs)
            m["per_seed"] = [round(d, 4) for d in diffs]
            m["holds"] = len(diffs) >= 3 and m["low"] is not None and (m["low"] > 0 or m["high"] < 0)
            out["claims"][name] = m
        if base is not None:
            out["claims"].update({
                "multi-turn minus base model, tool protocol": paired(mt, "calc", None, "calc"),
                "single-turn minus base model, no-tool protocol": paired(st, "arith", None, "arith"),
                "single-turn minus base model, tool protocol": paired(st, "calc", None, "calc"),
            })
    return out


def _f(m: dict[str, Any] | None, pct: bool = True) -> str:
    if not m or m.get("mean") is None:
        return "-"
    s = 100.0 if pct else 1.0
    fmt = (lambda x: f"{x * s:.1f}") if pct else (lambda x: f"{x:.3g}")
    if m.get("low") is None:
        return fmt(m["mean"])
    return f"{fmt(m['mean'])} [{fmt(m['low'])}, {fmt(m['high'])}]"


def _p(x: Any) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def markdown(rec: dict[str, Any]) -> str:
    s = rec["summary"]
    lines = [f"# Multi-turn GRPO with a calculator against single-turn GRPO without it ({rec['tag']})", "",
             f"{rec['date']}, commit {rec['commit']}, {rec['machine'].get('cpu')} ({rec['machine'].get('cpus')} "
             f"cores, shared with other jobs), torch {rec['versions'].get('torch')}, transformers "
             f"{rec['versions'].get('transformers')}; model `{rec['model']}`; {rec['epochs']} epochs of "
             f"{rec['tasks']} train exercises x {rec['group']} episodes (the same exercises for both arms of a "
             f"seed), {rec['tokens']} tokens a turn, agent_update defaults; held out: {rec['heldout_n']} validation "
             f"exercises, greedy. Command: `{rec['command']}`.", "",
             "## Held out, after the last epoch", "",
             "Mean [95% t-interval] over seeds, in percent (turns: agent turns per episode). Protocol `calc`: the "
             "calculator offered (multi-turn, at most 3 turns); `arith`: one turn, no tool.", "",
             "| agent | protocol | success | episodes calling calc | calls that parse | turns | ends |",
             "|---|---|---|---|---|---|---|"]
    base = rec.get("base")
    if base is not None:
        for p in PROTOCOLS:
            h = base["heldout"][p]
            lines.append(f"| base model | {p} | {_p(h['success'])} | {_p(h['tool_share'])} | {_p(h['parse_share'])} "
                         f"({h['parsed']}/{h['calls']}) | {h['turns_mean']} | {h['ends']} |")
    for arm, data in s["arms"].items():
        for p in PROTOCOLS:
            h = data["heldout"][p]
            lines.append(f"| {arm} (seeds {data['seeds']}) | {p} | {_f(h['success'])} | {_f(h['tool_share'])} | "
                         f"{_f(h['parse_share'])} | {_f(h['turns_mean'], False)} | {data['heldout_ends'][p]} |")
    lines += ["", "## The claim", "", "Differences of held-out success in points, paired by seed (per seed in "
              "brackets); a difference holds when its 95% interval excludes zero at >= 3 seeds.", ""]
    for name, c in s["claims"].items():
        lines.append(f"- **{name}**: {_f(c)} points (per seed {[round(100 * d, 1) for d in c['per_seed']]}), "
                     f"holds = {c['holds']}")
    lines += ["", "## Training, per epoch", "", "Episodes at temperature 1 on the epoch's train exercises, mean "
              "[95% interval] over seeds, percent; informative: groups whose rewards were not all equal; gap: mean "
              "|sampler - trainer| log-probability over the agent's tokens.", ""]
    for arm, data in s["arms"].items():
        lines += [f"### {arm}", "", "| epoch | success | calling calc | calls that parse | turns | informative "
                  "groups | KL (last step) | gap (nats) | seconds |", "|---|---|---|---|---|---|---|---|---|"]
        for r in data["epochs"]:
            lines.append(f"| {r['epoch']} | {_f(r['success'])} | {_f(r['tool_share'])} | {_f(r['parse_share'])} | "
                         f"{_f(r['turns_mean'], False)} | {_f(r['informative'])} | {_f(r['kl'], False)} | "
                         f"{_f(r['gap'], False)} | {_f(r['seconds'], False)} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=8, help="train exercises per epoch (groups)")
    ap.add_argument("--group", type=int, default=4, help="episodes per exercise (the GRPO group size)")
    ap.add_argument("--tokens", type=int, default=32, help="max new tokens per agent turn")
    ap.add_argument("--batch", type=int, default=32, help="the hf engine's batch size")
    ap.add_argument("--heldout", type=int, default=0, help="held-out exercises (a fixed sample; 0: all 240)")
    ap.add_argument("--tag", default="calc", help="the name of this set of runs (folder and result file)")
    ap.add_argument("--work", type=Path, default=Path(".multiturn-tool-runs"))
    ap.add_argument("--out", type=Path, default=RESULTS)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--model", default="embedded")
    ap.add_argument("--base", action="store_true", help="also evaluate the base model (once)")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    if not args.report_only:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
        if args.base:
            base_model(args)
        for seed in args.seeds:
            for arm in args.arms:
                run_one(arm, seed, args, args.work / args.tag / f"{arm}-s{seed}.json")
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for arm in ARMS:
        for seed in dict.fromkeys([1, 2, 3, *args.seeds]):
            path = args.work / args.tag / f"{arm}-s{seed}.json"
            kept = args.out / args.tag / f"{arm}-s{seed}.json"
            src = path if path.is_file() else kept
            if src.is_file():
                data = _read(src)
                if data.get("settings") == settings(args) and len(data["rows"]) == args.epochs:
                    runs.setdefault(arm, {})[seed] = data
                    if src == path:
                        _write(kept, data)
    base_path = args.work / args.tag / "base.json"
    kept_base = args.out / args.tag / "base.json"
    base = next((_read(p) for p in (base_path, kept_base) if p.is_file()
                 and _read(p).get("settings") == settings(args)), None)
    if base is not None:
        _write(kept_base, base)
    rec = {"experiment": "multiturn-tool", "tag": args.tag, "date": time.strftime("%Y-%m-%d"),
           "commit": git_commit(), "machine": machine(), "versions": versions(), "model": args.model,
           "epochs": args.epochs, "tasks": args.tasks, "group": args.group, "tokens": args.tokens,
           "heldout_n": len(heldout(args)), "sets": args.sets, "base": base,
           "command": " ".join(["python -m experiments.multiturn_tool", *(argv if argv is not None else sys.argv[1:])]),
           "summary": summarize(args, runs, base)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.tag}.json").write_text(json.dumps(rec, indent=1) + "\n")
    (args.out / f"{args.tag}.md").write_text(markdown(rec))
    print(markdown(rec))
    return rec


if __name__ == "__main__":
    main()
