"""The family domains' promise on ALFWorld's real training games: `genenv init --domain alfworld --seeds FOLDER`
(a json_2.1.1/train folder, one game per task type, played in alfworld's TextWorld environment) gives training
items whose prompt equals the one `genenv evaluate --protocol paper --export` writes for the same step of the same
game, and whose reward on a right and on a wrong answer equals the verdict `evaluate --predictions` records.

Runs in `nox -s alfworld`; skipped, with the reason, without the alfworld extra or ../shared/data."""

from __future__ import annotations

import json

import pytest
from test_domain_promise import check_promise

from alfworld_real import TRAIN_TYPES, need_alfworld
from genenv_cli.domains.answers import PromiseCase

pytestmark = [pytest.mark.alfworld, pytest.mark.slow]


def test_training_items_from_real_training_games_equal_evaluate_paper_steps(alfworld_train_sample, tmp_path,
                                                                            monkeypatch):
    need_alfworld()
    monkeypatch.chdir(tmp_path)
    train = alfworld_train_sample / "json_2.1.1" / "train"
    n, odd = check_promise("alfworld", PromiseCase([alfworld_train_sample], train, "paper"), tmp_path)
    assert odd == {"right": [], "wrong": []}, odd
    seeds = [json.loads(line) for line in (tmp_path / "run" / "seeds" / "seeds.jsonl").read_text().splitlines()]
    assert len(seeds) == n and {s["shape"] for s in seeds} == set(TRAIN_TYPES)
    # each step's history holds the real game's observations: the first says where the expert's first command led
    first_moves = [s for s in seeds if len(s["payload"]["trajectory"]) == 1]
    assert len(first_moves) == len(TRAIN_TYPES)
    assert all(s["payload"]["trajectory"][0]["observation"].startswith("You arrive at ") for s in first_moves)
    manifest = json.loads((tmp_path / "run" / "seeds" / "manifest.json").read_text())
    assert manifest["files"][0]["source"] == str(alfworld_train_sample.resolve())
