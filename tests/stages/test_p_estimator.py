"""curriculum.p_estimator through the stages: rollout records the teacher-forced p of each task, score makes it
p_task and keeps both estimates; a domain without a reference answer is refused."""

import pytest

from genenv_cli.machinery.engines.hf import HFEngine
from genenv_cli.machinery.models import resolve
from genenv_cli.machinery.teacher_forced import task_probabilities


def test_rollout_and_score_carry_both_estimates_under_the_setting(tmp_path, tiny_model):
    """curriculum.p_estimator = "teacher_forced": rollout records each task's teacher-forced p on its rows, score
    makes it p_task (and the batch's mean p_batch, and R_env of that) and keeps the rollouts' share beside it; under
    the default the files keep their columns as they were."""
    import polars as pl
    from test_epochs import arith_run

    from genenv_cli.core.curriculum import env_reward
    from genenv_cli.rundir.datafiles import read_parquet
    from genenv_cli.stages import rollout, score

    run = arith_run(tmp_path, tiny_model, "curriculum.p_estimator=teacher_forced", "rollout.temperature=0.9",
                    "rollout.top_p=0.95", "rollout.max_new_tokens=8", "curriculum.env_reward=uncertainty")
    cfg = run.load_config()
    rollout.run(run, cfg, 1)
    roll = read_parquet(run.epoch_dir(1) / "rollouts.parquet", "rollouts")
    per_task = roll.group_by("task_id").agg(pl.col("p_teacher_forced").n_unique().alias("n"),
                                            pl.col("p_teacher_forced").first().alias("p"))
    assert per_task["n"].to_list() == [1] * per_task.height and per_task["p"].null_count() == 0
    # the recorded p is the estimator's for the task under the rollout's settings
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.machinery.taskfile import load_tasks

    eng = HFEngine(resolve(str(tiny_model)))
    tasks = load_tasks(run.file("tasks", 1), {"arith": get_domain("arith")}, None)
    want = task_probabilities(eng.model, eng.tokenizer, eng.eos_ids, {"arith": get_domain("arith")}, tasks,
                              temperature=0.9, top_p=0.95, max_new_tokens=8)
    got = dict(per_task.select("task_id", "p").iter_rows())
    assert [got[t["task_id"]] for t in tasks] == pytest.approx(want, rel=1e-4, abs=1e-12)

    score.run(run, cfg, 1)
    stats = pl.read_parquet(run.file("task_stats", 1))
    assert stats["p_task"].to_list() == stats["p_task_teacher_forced"].to_list()
    assert stats["p_task_rollouts"].to_list() == pytest.approx((stats["successes"] / stats["attempts"]).to_list())
    batch = stats.group_by("batch_id").agg(pl.col("p_task").mean().alias("m"), pl.col("p_batch").first())
    assert batch["m"].to_list() == pytest.approx(batch["p_batch"].to_list())
    r = stats.select(env_reward(alpha=0.5, beta=2.0, kind="uncertainty"))["r_env"].to_list()
    assert stats["r_env"].to_list() == pytest.approx(r)

    # the report names the estimator and sets the environment's tasks' |p - α| under both side by side
    from genenv_cli.actions.report import build_report

    rep = build_report(run, cfg, tmp_path / "report")
    row = rep["numbers"]["p-task"]["epochs"][0]
    env = stats.filter(pl.col("source") == "env")
    assert row["estimator"] == "teacher_forced"
    assert row["env_gap"] == pytest.approx((env["p_task_teacher_forced"] - 0.5).abs().mean())
    assert row["env_gap_rollouts"] == pytest.approx((env["p_task_rollouts"] - 0.5).abs().mean())
    html = rep["html"].read_text()
    assert "teacher_forced" in html and "same, teacher-forced p" in html

    (tmp_path / "default").mkdir()
    default = arith_run(tmp_path / "default", tiny_model, "rollout.max_new_tokens=8")
    dcfg = default.load_config()
    rollout.run(default, dcfg, 1)
    score.run(default, dcfg, 1)
    assert "p_teacher_forced" not in pl.read_parquet(default.file("rollouts", 1)).columns
    assert not {"p_task_rollouts", "p_task_teacher_forced"} & set(pl.read_parquet(default.file("task_stats", 1)).columns)
    row = build_report(default, dcfg, tmp_path / "report-default")["numbers"]["p-task"]["epochs"][0]
    assert row["estimator"] == "rollouts" and row["env_gap_teacher_forced"] is None


def test_a_domain_without_a_reference_is_refused():
    from genenv_cli.catalogue.domains import get_domain
    from genenv_cli.core.errors import ConfigError
    from genenv_cli.stages.rollout import refuse_without_reference

    with pytest.raises(ConfigError, match="domain calc declares none"):
        refuse_without_reference({"calc": get_domain("calc")}, [{"domain": "calc"}])
    refuse_without_reference({"arith": get_domain("arith")}, [{"domain": "arith"}])
