"""Parallel grading gives exactly the serial verdicts, in order."""

import json

import genenv_cli.machinery.grading as grading
from genenv_cli.catalogue.domains import get_domain


def gold_text(payload):
    if not payload["calls"]:  # "no call" is right as a plain-text answer, not as an empty one
        return "None of the offered tools fits this request."
    return "".join(f'<tool_call>{json.dumps(c)}</tool_call>' for c in payload["calls"])


def test_parallel_grading_matches_serial(monkeypatch):
    seeds = get_domain("tool_call").seeds("train")[:40]
    payloads = {s.id: s.payload for s in seeds}
    tids, comps = [], []
    for s in seeds:
        for text in ['<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>', "no idea",
                     "<tool_call>{broken", gold_text(s.payload)]:
            tids.append(s.id)
            comps.append(text)
    serial = grading.grade_pairs("tool_call", payloads, tids, comps, workers=1)
    assert serial.reward[3::4] == [1.0] * len(seeds)  # every gold completion scores 1
    assert not any(serial.valid[2::4])                # broken JSON is never valid
    assert all(isinstance(v, grading.TaskVerdict) for v in serial.verdicts()) and len(serial.verdicts()) == len(tids)
    monkeypatch.setattr(grading, "PARALLEL_MIN", 10)
    monkeypatch.setattr(grading, "CHUNK", 7)
    done = []
    parallel = grading.grade_pairs("tool_call", payloads, tids, comps, advance=done.append, workers=2)
    assert parallel == serial and sum(done) == len(tids)
