"""ALFWorld on the real games: the walkthrough oracle and the scripted engine's agreement with the real one.

For every game of the splits asked (default: the 274 evaluation games, valid_seen and valid_unseen), one worker
process:

1. **official protocol, genenv's episode loop**: the game's official sample (`ALFWorld.load`'s), played by
   `machinery.episodes.play_episodes` (what `genenv evaluate` runs) with `ReplayEngine`, a stand-in engine that answers
   each turn with the stored walkthrough's next command as `ACTION: <command>`; the episode's verdict must be won;
2. **official protocol, `score`**: the walkthrough, one command a line, scored as a predictions output
   (`ALFWorld.score`, what `genenv evaluate --predictions` runs), which replays it in a fresh game: won;
3. **paper protocol**: the game's single-step samples (the walkthrough played once, each step with the real
   observations), each answered `ACTION: <gold>` through its one-turn episode and scored: step accuracy 100%;
4. **agreement**: `evals.alfworld.agreement.compare`, the scripted engine against the real one over the
   walkthrough (games the scripted engine cannot express are counted with the reason).

Writes `<out>/games.jsonl` (a record per game, appended as each finishes) and `<out>/summary.json` with the
machine, versions, commit and settings. `nox -s alfworld -- DIR` runs it on DIR; needs the alfworld
extra:

    python -m experiments.alfworld_checks --data DIR [--splits valid_seen valid_unseen] [--workers 2] [--limit N]
        [--no-score] [--resume]
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from lab.record import git_commit, machine, versions

from genenv_cli.families.alfworld.agreement import NotExpressible, compare
from genenv_cli.families.alfworld.benchmark import ALFWorld
from genenv_cli.families.alfworld.game_files import GameRef, collect_games
from genenv_cli.families.alfworld.games import alfworld_version
from genenv_cli.machinery.engines.base import Generation, SamplingParams
from genenv_cli.machinery.episodes import play_episodes

OUT = Path(__file__).parent / "results" / "alfworld"


class ReplayEngine:
    """Answers each turn with the stored plan's command for that turn (the count of assistant turns so far)."""
    name = "replay"

    def __init__(self, plan: list[str]):
        self.plan = plan

    def generate(self, conversations: list[list[dict[str, str]]], params: Any, on_progress: Any = None,
                 seeds: Any = None) -> list[list[Generation]]:
        out = []
        for messages in conversations:
            k = sum(m["role"] == "assistant" for m in messages)
            text = f"ACTION: {self.plan[k]}" if k < len(self.plan) else "ACTION: look"
            out.append([Generation(text, [], [], "stop", [])])
        return out

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        return []

    def close(self) -> None:
        pass


def check_game(split: str, ref: GameRef, agreement: bool = True, score: bool = True) -> dict[str, Any]:
    """The four checks of the module docstring on one game (`score`: the second one too)."""
    bench = ALFWorld()
    rec: dict[str, Any] = {"split": split, "game": ref.id, "task_type": ref.task_type,
                           "walkthrough_steps": len(ref.expert_plan or [])}
    t0 = time.perf_counter()
    sample = bench._episode_sample(ref)
    (_, loop), = play_episodes(bench, [sample], ReplayEngine(ref.expert_plan or []),
                               SamplingParams(temperature=0.0, max_new_tokens=16), bench.max_steps)
    rec["loop"] = {"won": bool(loop.correct), "steps": int(loop.scores["steps"]), "end": loop.end,
                   "reason": loop.reason}
    t1 = time.perf_counter()
    if score:
        scored = bench.score(sample, "\n".join(ref.expert_plan or []), "official")
        rec["score"] = {"won": bool(scored.correct), "steps": int(scored.scores["steps"]), "reason": scored.reason}
    t2 = time.perf_counter()
    try:
        steps = bench._step_samples(ref)
        right = 0
        for s in steps:
            ep = bench.start_episode(s)
            ep.advance(f"ACTION: {s.gold}")
            right += bool(ep.result()[1].correct)
        rec["paper"] = {"steps": len(steps), "correct": right}
    except Exception as exc:  # noqa: BLE001 - recorded: a game whose walkthrough does not replay is a finding
        rec["paper"] = {"steps": 0, "correct": 0, "error": f"{type(exc).__name__}: {exc}"}
    t3 = time.perf_counter()
    if agreement:
        try:
            a = compare(ref.path)
            rec["agreement"] = {k: getattr(a, k) for k in ("steps", "admissible_set", "admissible_order",
                                                           "observation", "won", "all_three", "differences")}
        except NotExpressible as exc:
            rec["agreement"] = {"not_expressible": str(exc)}
    t4 = time.perf_counter()
    rec["seconds"] = {"loop": round(t1 - t0, 2), "score": round(t2 - t1, 2), "paper": round(t3 - t2, 2),
                      "agreement": round(t4 - t3, 2)}
    return rec


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"games": len(records)}
    for split in sorted({r["split"] for r in records}) + ["all"]:
        rs = [r for r in records if split in ("all", r["split"])]
        paper_steps = sum(r["paper"]["steps"] for r in rs)
        ag = [r["agreement"] for r in rs if "agreement" in r and "steps" in r["agreement"]]
        n_steps = sum(a["steps"] for a in ag)
        block = {
            "games": len(rs),
            "official_loop_won": sum(r["loop"]["won"] for r in rs),
            "official_score_played": sum("score" in r for r in rs),
            "official_score_won": sum(r["score"]["won"] for r in rs if "score" in r),
            "paper_steps": paper_steps,
            "paper_correct": sum(r["paper"]["correct"] for r in rs),
            "paper_accuracy": round(100.0 * sum(r["paper"]["correct"] for r in rs) / paper_steps, 3)
            if paper_steps else None,
            "paper_errors": [r["game"] for r in rs if "error" in r["paper"]],
            "not_won": [r["game"] for r in rs if not (r["loop"]["won"] and r.get("score", {"won": True})["won"])],
            "seconds_per_game": round(sum(sum(r["seconds"].values()) for r in rs) / max(len(rs), 1), 2),
        }
        if any("agreement" in r for r in rs):
            reasons: dict[str, int] = {}
            for r in rs:
                why = r.get("agreement", {}).get("not_expressible")
                if why:
                    key = why.split(" in ")[-1] if "neither" in why else why
                    key = "an object that can be neither taken nor used" if "neither" in why else key
                    reasons[key] = reasons.get(key, 0) + 1
            block["agreement"] = {
                "expressible_games": len(ag), "not_expressible_games": len(rs) - len(ag),
                "not_expressible_reasons": reasons, "steps": n_steps,
                **{f"{k}_share": round(sum(a[k] for a in ag) / n_steps, 4) if n_steps else None
                   for k in ("admissible_set", "admissible_order", "observation", "won", "all_three")},
                "games_all_steps_agree": sum(a["all_three"] == a["steps"] for a in ag),
            }
        out[split] = block
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True, help="the folder holding json_2.1.1/")
    ap.add_argument("--splits", nargs="+", default=["valid_seen", "valid_unseen"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--limit", type=int, default=None, help="the first N games of each split (sorted by id)")
    ap.add_argument("--every", type=int, default=1, help="every k-th game of each split (a fixed sample)")
    ap.add_argument("--no-agreement", action="store_true")
    ap.add_argument("--no-score", action="store_true", help="leave out check 2 (a third game load per game)")
    ap.add_argument("--resume", action="store_true", help="keep the records in <out>/games.jsonl, play the rest")
    ap.add_argument("--summarize-only", action="store_true",
                    help="write summary.json from the records in <out>/games.jsonl, playing nothing")
    ap.add_argument("--note", default="", help="a line recorded in summary.json (why a run is partial, the load)")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    jobs = []
    for split in args.splits:
        refs = collect_games(args.data / "json_2.1.1" / split)[::args.every][:args.limit]
        jobs += [(split, r) for r in refs]
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "games.jsonl"
    keep = (args.resume or args.summarize_only) and log.exists()
    records = [json.loads(line) for line in log.read_text().splitlines()] if keep else []
    done = {(r["split"], r["game"]) for r in records}
    jobs = [(split, ref) for split, ref in jobs if (split, ref.id) not in done]
    planned = len(done) + len(jobs)
    if args.summarize_only:
        jobs = []
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        futures = [pool.submit(check_game, split, ref, not args.no_agreement, not args.no_score)
                   for split, ref in jobs]
        for k, fut in enumerate(as_completed(futures), start=1):
            rec = fut.result()
            records.append(rec)
            with log.open("a") as fh:
                fh.write(json.dumps(rec) + "\n")
            print(f"[{k}/{len(jobs)}] {rec['split']} {rec['game']}: loop won {rec['loop']['won']}, score won "
                  f"{rec.get('score', {}).get('won')}, paper {rec['paper']['correct']}/{rec['paper']['steps']}",
                  flush=True)
    records.sort(key=lambda r: (r["split"], r["game"]))
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    summary = {"what": "walkthrough oracle (official protocol through genenv's episode loop and through score; "
                       "paper protocol's steps) and the scripted engine's agreement with the real one",
               "data": f"<the folder holding json_2.1.1/, named {args.data.name!r}>", "splits": args.splits,
               "limit": args.limit, "every": args.every,
               "games_planned": planned, "games_recorded": len(records), "note": args.note,
               "workers": args.workers, "wall_seconds_last_session": round(time.perf_counter() - start, 1),
               "alfworld": alfworld_version(), "machine": machine(), "versions": versions(),
               "commit": git_commit(), "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
               **summarize(records)}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: summary[k] for k in ("games", "all", "wall_seconds_last_session")}, indent=2))
    return summary


if __name__ == "__main__":
    main()
