"""The positive control (experiments/env_control.py), its shape table (experiments/shape_table.py) and the measures of
aim recomputed from the recorded runs (experiments/aim_measures.py): the oracle reward, the novelty rule, the
measures from counts, the claim against the untrained arm, and the control end to end on the tiny model."""

from __future__ import annotations

import importlib
import json
import random

import pytest

from paths import ROOT


def _mod(name: str):
    return importlib.import_module(f"experiments.{name}")


def test_every_shape_is_drawn_as_itself_and_the_interval_is_wilsons():
    st = _mod("shape_table")
    from genenv_cli.domains.arith import expression_shape

    rng = random.Random(0)
    for shape in st.SHAPES:
        assert all(expression_shape(st.draw(shape, rng)) == shape for _ in range(20)), shape
    low, high = st.wilson(50, 100)
    assert low < 0.5 < high and high - low < 0.2         # 100 attempts: narrower than +-0.1 at p = 0.5, the widest
    assert st.wilson(0, 100)[0] == 0.0 and st.wilson(100, 100)[1] == 1.0


TABLE = {"add-1d": 0.5, "mul-1d": 0.3, "add-2d": 0.05}


@pytest.mark.parametrize("dup,want", [("invalid", 0.0), ("neutral", None), ("shape", 1.0)])
def test_the_oracle_pays_aim_and_a_duplicate_what_the_setting_says(dup, want):
    ec = _mod("env_control")
    judge = ec.Judge(TABLE, dup)
    ctx = None  # arith's parser does not read the context

    def fresh(op: str, low: int, top: int) -> str:  # an exercise no seed has taken
        return next(f"{a} {op} {b}" for a in range(low, top) for b in range(low, top) if f"{a}{op}{b}" not in judge.taken)

    add1, mul1, add2 = fresh("+", 0, 10), fresh("*", 0, 10), fresh("+", 10, 100)
    assert judge.judge(f"EXERCISE: {add1}", ctx) == {"kind": "novel", "shape": "add-1d", "reward": 1.0}
    assert judge.judge(f"EXERCISE: {mul1}", ctx)["reward"] == pytest.approx(1 - 2 * 0.2)
    assert judge.judge(f"EXERCISE: {add2}", ctx) == {"kind": "novel", "shape": "add-2d",
                                                     "reward": pytest.approx(1 - 2 * 0.45)}
    assert judge.judge(f"EXERCISE: {add1}", ctx) == {"kind": "duplicate", "shape": "add-1d", "reward": want}
    assert judge.judge("no exercise here", ctx) == {"kind": "parse", "shape": None, "reward": 0.0}
    assert judge.judge("EXERCISE: 3 + 12345", ctx)["kind"] == "invalid"     # five digits: past the domain's limit
    assert judge.judge("EXERCISE: 3 +  4 * 2 * 2 * 2 * 2", ctx)["kind"] == "invalid"  # five operations
    assert ec.oracle_reward("3op-4d", TABLE) == 0.0                          # a shape the table lacks


def test_held_out_exercises_are_duplicates_so_they_never_become_tasks():
    ec = _mod("env_control")
    from genenv_cli.catalogue.domains import get_domain

    held = get_domain("arith").seeds("validation")[0].payload["expression"]
    assert ec.Judge(TABLE, "shape").judge(f"EXERCISE: {held}", None)["kind"] == "duplicate"


def test_the_measures_come_from_counts_and_any_table():
    ec = _mod("env_control")
    counts = {"generations": 10, "per_shape": {"add-1d": {"valid": 4, "duplicate": 3},
                                               "add-2d": {"valid": 2, "duplicate": 0}}}
    m = ec.measures(counts, TABLE)
    assert m["valid_rate"] == 0.6 and m["novel_rate"] == 0.3 and m["duplicate_share_of_valid"] == 0.5
    assert m["frontier_share"] == round(4 / 6, 4) and m["frontier_share_novel"] == round(1 / 3, 4)
    assert m["gap"] == round((4 * 0.0 + 2 * 0.45) / 6, 4)
    assert ec.measures(counts, {"add-1d": 0.9, "add-2d": 0.5})["frontier_share"] == round(2 / 6, 4)


def _runs(front: list[list[float]], gap: list[list[float]]) -> dict[int, dict]:
    return {s + 1: {"rows": [{"epoch": e + 1, "frontier_share": f, "gap": g, "update": {"kl": 0.1}}
                             for e, (f, g) in enumerate(zip(fs, gs, strict=True))]}
            for s, (fs, gs) in enumerate(zip(front, gap, strict=True))}


def test_the_claim_needs_three_seeds_and_both_measures(monkeypatch):
    ec = _mod("env_control")
    monkeypatch.setattr(ec, "measures", lambda counts, table: {})  # the rows below carry their measures already

    class A:
        claim_epochs = 2
        epochs = 3

    base = _runs([[0.1, 0.1, 0.1]] * 3, [[0.4, 0.4, 0.4]] * 3)
    good = _runs([[0.1, 0.3, 0.4], [0.1, 0.35, 0.3], [0.1, 0.4, 0.5]], [[0.4, 0.3, 0.2], [0.4, 0.25, 0.3],
                                                                         [0.4, 0.2, 0.2]])
    only_front = _runs([[0.1, 0.3, 0.4], [0.1, 0.35, 0.3], [0.1, 0.4, 0.5]], [[0.4, 0.4, 0.5], [0.4, 0.3, 0.4],
                                                                               [0.4, 0.4, 0.4]])
    for runs in (good, only_front):
        for r in [*runs.values(), *base.values()]:
            for x in r["rows"]:
                x["per_shape"] = {}
    c = ec.summarize(A, {"control-frozen": base, "control-lr1e-3": good, "control-lr1e-4": only_front},
                     {})["claims"]
    assert c["control-lr1e-3"]["claim_holds"] and c["control-lr1e-3"]["frontier_share"]["per_seed"] == \
        [0.25, 0.225, 0.35]
    assert c["control-lr1e-4"]["frontier_share"]["holds"] and not c["control-lr1e-4"]["claim_holds"]
    two = ec.summarize(A, {"control-frozen": {1: base[1], 2: base[2]}, "control-lr1e-3": good}, {})["claims"]
    assert not two["control-lr1e-3"]["claim_holds"]  # two seeds are not enough


def test_the_recorded_frontier_share_is_reproduced_from_the_shape_mix(tmp_path):
    """With the frontier the records were made with (the greedy held-out success), the recomputed frontier share of
    env-only-grpo against env-only-frozen is the recorded one (-7.0 points over epochs 2-10)."""
    am = _mod("aim_measures")
    rec = json.loads((am.RECORDS / "env-only-grpo-s1.json").read_text())
    table = {k: round(v, 4) for k, v in rec["frontier"].items()}
    arms = am.measure(am.RECORDS, table)
    assert arms["env-only-grpo"]["frontier_share_minus_baseline"]["mean"] == pytest.approx(-0.070, abs=0.001)
    assert am.band_resolution(4, 8)["counts"] == "13-19 of 32"
    assert am.band_resolution(1, 8)["counts"] == "4-4 of 8"
    assert am.band_resolution(1, 8)["p_in_band_at_alpha"] == pytest.approx(0.273, abs=0.001)  # 70/256


def test_the_controls_reward_table_is_in_the_repository_and_is_the_one_its_runs_read():
    """heldout-table.json (written by shape_table --from-heldout) holds, shape for shape, the reward table each
    trained control run records it was paid from; and the control's two frontier shares are both reported, the
    novel-only one being the env-only arms' measure."""
    st, am = _mod("shape_table"), _mod("aim_measures")
    table = st.load_table(st.RESULTS / "heldout-table.json")
    for path in sorted((st.RESULTS / "control").glob("control-lr*.json")):
        rec = json.loads(path.read_text())["reward_table"]
        assert rec["file"] == "heldout-table.json" and rec["p"] == table, path.name
    c = am.control_measures(am.CONTROL, st.load_table())["control-lr1e-3"]
    assert c["frontier_share_minus_frozen"]["mean"] == pytest.approx(0.216, abs=0.001)
    assert c["frontier_share_novel_minus_frozen"]["mean"] == pytest.approx(0.124, abs=0.001)
    assert am.expected_uncertainty_reward(0.2) == pytest.approx(0.394, abs=0.001)


@pytest.mark.slow
def test_the_control_runs_records_and_resumes_on_the_tiny_model(tmp_path, tiny_model):
    ec = _mod("env_control")
    st = _mod("shape_table")
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"shapes": {s: {"p": 0.5 if s.endswith("-1d") else 0.0} for s in st.SHAPES}}))
    argv = ["--arms", "control-frozen", "control-lr1e-3", "--seeds", "1", "--epochs", "2", "--contexts", "2",
            "--generations", "3", "--table", str(table), "--model", str(tiny_model), "--work", str(tmp_path / "w"),
            "--out", str(tmp_path / "out"), "--set", "generate.max_new_tokens=8"]
    rec = ec.main(argv)
    arms = rec["summary"]["arms"]
    assert set(arms) == {"control-frozen", "control-lr1e-3"}
    runs = {a: json.loads((tmp_path / "out" / "control" / f"{a}-s1.json").read_text()) for a in arms}
    assert [r["generations"] for r in runs["control-frozen"]["rows"]] == [6, 6]
    assert all(r["update"]["steps"] == 0 for r in runs["control-frozen"]["rows"])
    assert (tmp_path / "out" / "control.md").read_text().startswith("# The positive control")
    again = ec.main([*argv, "--report-only"])
    assert again["summary"]["arms"] == rec["summary"]["arms"]
    assert ROOT.is_dir()
