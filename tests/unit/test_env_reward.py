"""`curriculum.env_reward`: the paper's exp(-beta (p - alpha)^2), the default, or R-Zero's 1 - 2|p - alpha|, under
which a generation that became no task earns what a task at p = 0 or 1 earns."""

import math

import polars as pl
import pytest

from genenv_cli.catalogue.config import ConfigError, config_from_dict
from genenv_cli.catalogue.settings import CurriculumConfig
from genenv_cli.core.curriculum import env_reward, invalid_generation_reward
from genenv_cli.stages.score import generation_rewards


def _gens(rows: list[tuple[str | None, str | None]]) -> pl.DataFrame:
    """env_generations rows of one batch: (task_id, reason)."""
    n = len(rows)
    return pl.DataFrame({
        "generation_id": [f"b0/g{i}" for i in range(n)], "batch_id": ["b0"] * n, "domain": ["arith"] * n,
        "parent_id": [None] * n, "round": [1] * n, "prompt": ["[]"] * n, "prompt_token_ids": [[1, 2]] * n,
        "output": ["x"] * n, "completion_token_ids": [[3]] * n, "logprobs": [[-0.5]] * n,
        "finish_reason": ["stop"] * n, "temperature": [0.7] * n, "top_p": [0.95] * n, "env_model": ["base"] * n,
        "task_id": [t for t, _ in rows], "reason": [r for _, r in rows]},
        schema_overrides={"parent_id": pl.String, "task_id": pl.String, "reason": pl.String})


ROWS = [("t0", None), ("t1", None), ("t2", None), ("t3", None), (None, "parse: no EXERCISE: line"),
        (None, "duplicate of ar-1"), (None, "surplus: the epoch's tasks were already written")]
STATS = pl.DataFrame({"task_id": ["t0", "t1", "t2", "t3"], "p_task": [0.5, 0.0, 0.75, 1.0]})


def test_the_default_is_the_papers_exp_reward_and_validity_pays():
    c = config_from_dict({}, "test").curriculum
    assert c.env_reward == "exp"
    r = generation_rewards(_gens(ROWS), STATS, 1, c)["reward"].to_list()
    assert r[:4] == pytest.approx([1.0, math.exp(-0.5), math.exp(-0.125), math.exp(-0.5)])
    assert r[4:6] == [0.0, 0.0] and r[6] is None
    assert r[1] - r[4] == pytest.approx(math.exp(-0.5))  # a valid task at p = 0 earns 0.61 more than none


def test_uncertainty_pays_for_aim_only():
    c = CurriculumConfig(alpha=0.5, env_reward="uncertainty")
    out = generation_rewards(_gens(ROWS), STATS, 1, c)
    r = out["reward"].to_list()
    assert r[:4] == pytest.approx([1.0, 0.0, 0.5, 0.0])        # 1 - 2|p - alpha|
    assert r[4:6] == [0.0, 0.0] and r[6] is None              # no task: what p = 0 or 1 earns; surplus: none
    assert r[1] == r[3] == r[4] == r[5]                       # validity by itself is worth nothing
    assert out["valid"].to_list() == [True] * 4 + [False] * 3


def test_uncertainty_off_centre_gives_no_task_the_lower_end():
    c = CurriculumConfig(alpha=0.3, env_reward="uncertainty")
    assert invalid_generation_reward(c) == pytest.approx(1 - 2 * 0.7)
    assert invalid_generation_reward(CurriculumConfig(invalid_reward=-0.25)) == -0.25  # exp: the setting
    r = pl.DataFrame({"p_batch": [0.3, 0.0, 1.0]}).select(env_reward(alpha=0.3, beta=2.0, kind="uncertainty"))
    assert r["r_env"].to_list() == pytest.approx([1.0, 0.4, -0.4])
    assert min(r["r_env"].to_list()) == pytest.approx(invalid_generation_reward(c))


def test_the_batch_reward_follows_the_setting():
    from genenv_cli.stages.score import task_statistics

    scored = pl.DataFrame({"task_id": ["t0"] * 4 + ["t1"] * 4, "success": [True, False, True, False] + [False] * 4,
                           "reward": [1.0, 0.0, 1.0, 0.0] + [0.0] * 4, "prompt_tokens": [10] * 8})
    tasks = [{"task_id": "t0", "batch_id": "b0", "source": "env", "domain": "arith", "shape": "add-1d"},
             {"task_id": "t1", "batch_id": "b1", "source": "env", "domain": "arith", "shape": "add-2d"}]
    for kind, want in (("exp", [1.0, math.exp(-0.5)]), ("uncertainty", [1.0, 0.0])):
        stats = task_statistics(scored, tasks, CurriculumConfig(env_reward=kind))
        assert stats.sort("task_id")["r_env"].to_list() == pytest.approx(want)


def test_config_names_the_choices_and_refuses_an_unused_invalid_reward():
    assert config_from_dict({"curriculum": {"env_reward": "uncertainty"}}, "t").curriculum.env_reward == "uncertainty"
    with pytest.raises(ConfigError, match="env_reward.*exp.*uncertainty"):
        config_from_dict({"curriculum": {"env_reward": "rzero"}}, "t")
    with pytest.raises(ConfigError, match="invalid_reward.*uncertainty.*not used"):
        config_from_dict({"curriculum": {"env_reward": "uncertainty", "invalid_reward": -0.5}}, "t")
    with pytest.raises(ValueError, match="unknown environment reward"):
        env_reward(alpha=0.5, beta=2.0, kind="rzero")


def test_a_neutral_duplicate_leaves_its_group_and_an_invalid_one_stays():
    rows = [("t0", None), (None, "duplicate of ar-1"), (None, "near duplicate of e0001-b0002-v0"),
            (None, "parse: no EXERCISE: line")]
    stats = pl.DataFrame({"task_id": ["t0"], "p_task": [0.5]})
    assert config_from_dict({}, "t").curriculum.duplicate_reward == "invalid"
    r = generation_rewards(_gens(rows), stats, 1, CurriculumConfig())["reward"].to_list()
    assert r == [1.0, 0.0, 0.0, 0.0]
    r = generation_rewards(_gens(rows), stats, 1, CurriculumConfig(duplicate_reward="neutral"))["reward"].to_list()
    assert r == [1.0, None, None, 0.0]
    with pytest.raises(ConfigError, match="duplicate_reward.*invalid.*neutral"):
        config_from_dict({"curriculum": {"duplicate_reward": "zero"}}, "t")


def test_the_binomial_control_draws_k_attempts_from_the_teacher_forced_p():
    """curriculum.p_estimator = "teacher_forced_binomial": p_task = X / K, X ~ Binomial(K, p_tf), the same draw for
    the same seed and task, its mean over many tasks near p_tf; the rollouts' share and p_tf are kept beside it."""
    from genenv_cli.stages.score import task_statistics

    n, k, p = 400, 8, 0.3
    scored = pl.DataFrame({"task_id": [f"t{i:03d}" for i in range(n) for _ in range(k)],
                           "success": [False] * (n * k), "reward": [0.0] * (n * k), "prompt_tokens": [10] * (n * k),
                           "p_teacher_forced": [p] * (n * k)})
    tasks = [{"task_id": f"t{i:03d}", "batch_id": f"b{i // 4}", "source": "env", "domain": "arith", "shape": "add-1d"}
             for i in range(n)]
    c = CurriculumConfig(p_estimator="teacher_forced_binomial")
    a = task_statistics(scored, tasks, c, seed=3).sort("task_id")
    assert a["p_task"].to_list() == task_statistics(scored, tasks, c, seed=3).sort("task_id")["p_task"].to_list()
    assert a["p_task"].to_list() != task_statistics(scored, tasks, c, seed=4).sort("task_id")["p_task"].to_list()
    assert all(x * k == round(x * k) for x in a["p_task"].to_list())
    assert a["p_task"].mean() == pytest.approx(p, abs=0.03)          # sd of the mean 0.008
    assert a["p_task"].var() == pytest.approx(p * (1 - p) / k, rel=0.25)
    assert set(a["p_task_teacher_forced"].to_list()) == {p} and set(a["p_task_rollouts"].to_list()) == {0.0}
    batch = a.group_by("batch_id").agg(pl.col("p_task").mean().alias("m"), pl.col("p_batch").first())
    assert batch["m"].to_list() == pytest.approx(batch["p_batch"].to_list())
