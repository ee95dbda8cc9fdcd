"""Progress and summaries: rich bars on a terminal, plain lines off one, nothing with --quiet, JSON with --json."""

import io
import json

from genenv_cli.core.ui import UI


class FakeTTY(io.StringIO):
    def isatty(self):
        return True


def test_plain_lines_off_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_PROGRESS_INTERVAL", "0")
    err, out = io.StringIO(), io.StringIO()
    ui = UI(stream=err, out=out, log_path=tmp_path / "stage.log")
    with ui.progress("rollout e1", 4, "rollouts") as bar:
        for _ in range(4):
            bar.advance(1, tokens=10)
    ui.summary("rollout", 1, {"rollouts": 4}, "rollout epoch 1: 4 rollouts")
    lines = err.getvalue().splitlines()
    assert lines[0].startswith("rollout e1: 1/4 rollouts (25%)") and "tok/s" in lines[0] and "ETA" in lines[0]
    assert lines[-1].startswith("rollout e1: 4/4 rollouts (100%)") and len(lines) == 4
    assert "\x1b[" not in err.getvalue()                    # no terminal control codes
    assert out.getvalue() == "rollout epoch 1: 4 rollouts\n"
    log = (tmp_path / "stage.log").read_text()
    assert "4/4 rollouts" in log and '"rollouts": 4' in log


def test_rich_bar_on_a_terminal(monkeypatch):
    monkeypatch.setenv("TERM", "xterm")
    err = FakeTTY()
    ui = UI(stream=err, out=io.StringIO())
    with ui.progress("score e1", 3, "completions") as bar:
        for _ in range(3):
            bar.advance(1)
    text = err.getvalue()
    assert "score e1" in text and "3/3" in text and "completions/s" in text


def test_quiet_and_json(tmp_path):
    err, out = io.StringIO(), io.StringIO()
    ui = UI(quiet=True, json_summary=True, stream=err, out=out)
    with ui.progress("x", 2, "items") as bar:
        bar.advance(2)
    ui.info("hidden")
    ui.summary("score", 2, {"success_rate": 0.5}, "human text")
    assert err.getvalue() == ""
    assert json.loads(out.getvalue()) == {"stage": "score", "epoch": 2, "success_rate": 0.5}
