"""Bamboogle: the official formats (CSV, JSON list, FlashRAG JSONL), SQuAD-style metrics and the paper
(ToolRL) protocol, on hand-written fixtures (tests/fixtures/bamboogle). Expected numbers are worked out by
hand in each test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from genenv_cli.core.errors import InputError
from genenv_cli.families.bamboogle import benchmark as bb
from genenv_cli.families.bamboogle.benchmark import (
    Bamboogle,
    answer_contained,
    extract_answer,
    normalize_answer,
    token_f1,
)
from paths import FIXTURES

FIX = FIXTURES / "bamboogle"
GOLD = ["Benjamin Harrison", "Brasília", "Grover Cleveland", "1979", "The Eiffel Tower", "Jane Austen"]


def load(data=FIX / "bamboogle.csv", protocol="official"):
    return Bamboogle().load(data=data, split=None, version=None, protocol=protocol, cache_dir=Path("/nonexistent"))


def run(samples, outputs, protocol):
    bench = Bamboogle()
    verdicts = [bench.score(s, outputs[int(s.id)], protocol) for s in samples]
    return bench.summarize(samples, verdicts, protocol), verdicts


def test_formats_load_the_same_samples():
    csv_data = load()
    assert [s.id for s in csv_data.samples] == ["0", "1", "2", "3", "4", "5"]
    assert [s.gold for s in csv_data.samples] == [[g] for g in GOLD]
    assert csv_data.samples[5].meta["question"] == 'Who wrote the novel that the film "Clueless" is based on?'
    for other in (FIX / "bamboogle.json", FIX / "test.jsonl"):
        data = load(other)
        assert [(s.id, s.gold, s.messages) for s in data.samples] == [
            (s.id, s.gold, s.messages) for s in csv_data.samples]
    assert load(FIX).source.endswith("bamboogle.csv")  # a folder: its bamboogle.csv
    assert csv_data.version == "local file" and len(csv_data.fingerprint) == 64


def test_prompts():
    s = load().samples[0]
    assert s.messages == [{"role": "user", "content": bb.OFFICIAL_PROMPT.format(
        question="Who was the US president when the Eiffel Tower opened?")}]
    assert "<answer>" in s.messages[0]["content"]
    p = load(protocol="paper").samples[0]
    assert [m["role"] for m in p.messages] == ["system", "user"]
    assert "<response>" in p.messages[0]["content"]
    assert p.messages[1]["content"].startswith(
        "**Dialogue Records History**\n<user> Who was the US president when the Eiffel Tower opened?\n")


def test_gold_100():
    samples = load().samples
    summary, _ = run(samples, [f"<answer>{g}</answer>" for g in GOLD], "official")
    assert summary["overall"] == {"em": 100.0, "f1": 100.0, "acc": 100.0, "n": 6}
    assert summary["categories"] == {"bamboogle": {"em": 100.0, "f1": 100.0, "acc": 100.0, "n": 6}}
    summary, _ = run(load(protocol="paper").samples, [f"<think>t</think>\n<response>{g}</response>" for g in GOLD],
                     "paper")
    assert summary["overall"]["accuracy"] == 100.0 and summary["overall"]["em"] == 100.0


def test_one_defect_per_item_official():
    outputs = [
        "<think>Paris 1889 ... </think>\n<answer> Benjamin Harrison </answer>",   # right: em 1, f1 1, acc 1
        "<answer>Rio de Janeiro</answer>",                                         # wrong: 0, 0, 0
        "<answer>Cleveland</answer>",                                              # partial: 0, 2/3, 0
        "<answer>It happened in 1979.</answer>",                                   # verbose: 0, 2*(1/4*1)/(5/4)=0.4, 1
        "Let me think.\nAnswer: eiffel tower!",                                    # last line, label, article: 1, 1, 1
        "",                                                                        # nothing: 0, 0, 0
    ]
    summary, verdicts = run(load().samples, outputs, "official")
    assert [v.scores["em"] for v in verdicts] == [1, 0, 0, 0, 1, 0]
    assert [v.scores["acc"] for v in verdicts] == [1, 0, 0, 1, 1, 0]
    assert [round(v.scores["f1"], 6) for v in verdicts] == [1, 0, round(2 / 3, 6), 0.4, 1, 0]
    assert [v.correct for v in verdicts] == [True, False, False, False, True, False]
    overall = summary["overall"]
    assert overall["em"] == pytest.approx(100 * 2 / 6)
    assert overall["f1"] == pytest.approx(100 * (1 + 2 / 3 + 0.4 + 1) / 6)
    assert overall["acc"] == pytest.approx(50.0)
    assert summary["categories"]["bamboogle"] == overall
    assert verdicts[4].parsed == {"answer": "eiffel tower!"}
    assert verdicts[5].reason == "no answer found"


def test_one_defect_per_item_paper():
    outputs = [
        "<think>...</think>\n<response> It was Benjamin Harrison. </response>",   # contained: 1
        "<think>...</think>\n<response>Rio</response>",                           # wrong: 0
        "<think>the statue, 1886</think> Grover Cleveland",                       # after </think>: 1
        "<response>1978</response>",                                              # wrong: 0
        "<response>The Eiffel Tower, in Paris</response>",                        # contained (em 0): 1
        '<tool_call>\n{"name": "Search", "parameters": {"query": "Clueless film novel"}}\n</tool_call>',  # 0
    ]
    summary, verdicts = run(load(protocol="paper").samples, outputs, "paper")
    assert [v.correct for v in verdicts] == [True, False, True, False, True, False]
    assert summary["overall"]["accuracy"] == pytest.approx(50.0)
    assert summary["overall"]["em"] == pytest.approx(100 / 6)  # only item 2 matches exactly
    assert summary["paper_reference"] == {"GenEnv 7B": 76.0, "Qwen2.5-7B-Instruct": 68.0}


def test_metric_helpers():
    assert normalize_answer("  The Eiffel-Tower!! ") == "eiffeltower"
    assert normalize_answer("A Tale of Two Cities") == "tale of two cities"
    assert token_f1("the grover cleveland administration", "Grover Cleveland") == pytest.approx(2 * 1 * (2 / 3) / (5 / 3))
    assert token_f1("", "x") == 0.0
    assert answer_contained("In 1979, I think", "1979") and not answer_contained("197", "1979")
    assert extract_answer("<answer>a</answer> then <answer>b</answer>") == "b"
    assert extract_answer("reasoning...\n<answer> Jane Austen") == "Jane Austen"       # unterminated final tag
    assert extract_answer("<think>x\nAnswer: no</think>\nThe final answer is: 42") == "42"


def test_bad_files(tmp_path):
    bad = tmp_path / "b.csv"
    bad.write_text("Q,A\nx,y\n", encoding="utf-8")
    with pytest.raises(InputError, match="Question and an Answer column"):
        load(bad)
    bad.write_text("Question,Answer\nWho?,Me\nWhere?,\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"b.csv, row 3: missing the `Answer`"):
        load(bad)
    bad.write_text("Question,Answer\nWho?,Me\n,\n", encoding="utf-8")  # a blank row is skipped
    assert [s.id for s in load(bad).samples] == ["0"]
    bad.write_text("Bamboogle,\nQuestion,Answer,Notes\nWho?,Me,-\n", encoding="utf-8")  # a title row above
    assert [s.gold for s in load(bad).samples] == [["Me"]]
    js = tmp_path / "b.json"
    js.write_text(json.dumps([{"Question": "q", "Answer": "a"}, {"Answer": "a"}]), encoding="utf-8")
    with pytest.raises(InputError, match=r"b.json, record 1: missing the `Question`"):
        load(js)
    js.write_text('{"Question": "q"}', encoding="utf-8")
    with pytest.raises(InputError, match="expected a JSON list"):
        load(js)
    with pytest.raises(InputError, match="does not exist"):
        load(tmp_path / "nope")


def test_download_falls_back_and_offline_error(monkeypatch, tmp_path):
    def fake(url, dest, tried):
        dest.parent.mkdir(parents=True, exist_ok=True)
        if url == bb.SHEET_CSV_URL:  # the sheet answers with a sign-in page: rejected, removed
            dest.write_text("<html><body>Sign in</body></html>", encoding="utf-8")
        else:
            assert url == bb.TOOLRL_JSON_URL
            shutil.copy(FIX / "bamboogle.json", dest)
        return dest

    monkeypatch.setattr(bb, "try_download", fake)
    data = Bamboogle().load(data=None, split=None, version=None, protocol="official", cache_dir=tmp_path)
    assert data.version == bb.VERSION_TOOLRL and data.source == bb.TOOLRL_JSON_URL
    assert [s.gold for s in data.samples] == [[g] for g in GOLD]
    assert not any(p.suffix == ".csv" for p in tmp_path.rglob("*"))

    def offline(url, dest, tried):
        tried.append(f"{url}: offline")
        return None

    monkeypatch.setattr(bb, "try_download", offline)
    with pytest.raises(InputError, match="--data PATH") as err:
        Bamboogle().load(data=None, split=None, version=None, protocol="official", cache_dir=tmp_path / "x")
    assert "docs.google.com" in str(err.value)
