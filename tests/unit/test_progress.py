"""Progress a reader can trust: a line every interval off a terminal while nothing finishes, no rate or ETA before
one is measured, turns and live episodes for episodes, and a running stage's last line in `genenv status`."""

import io
import json
import os
import subprocess
import sys
import time

from genenv_cli.core.progress import EpisodeProgress, Tracker, progress_file, read_progress, write_progress
from genenv_cli.core.ui import UI


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


class Lines:
    interval = 30.0

    def __init__(self):
        self.printed, self.noted = [], []

    def _progress_line(self, text):
        self.printed.append(text)

    def _progress_note(self, text):
        self.noted.append(text)


def test_no_rate_or_eta_before_anything_is_measured():
    clock, ui = Clock(), Lines()
    bar = Tracker(ui, "generate-tasks e1 round 1", 64, "gens", clock=clock)
    clock.now += 45
    line = bar.line()
    assert line == ("generate-tasks e1 round 1: 0/64 gens (0%), elapsed 0:00:45, no rate or ETA until the first gens "
                    "finish")
    assert "tok/s" not in line and "ETA ?" not in line
    bar.advance(16, tokens=0)          # vLLM counts the sequences first and the tokens at the end
    assert "tok/s" not in bar.line()
    clock.now += 15
    bar.advance(16, tokens=1200)
    line = bar.line()
    assert "32/64 gens (50%)" in line and "0.53 gens/s" in line and "20 tok/s" in line and "ETA 0:01:00" in line


def test_tokens_counted_inside_a_batch_give_a_rate_before_the_first_item_finishes():
    clock, ui = Clock(), Lines()
    bar = Tracker(ui, "rollout e1", 64, "rollouts", clock=clock)
    clock.now += 20
    bar.advance(0, tokens=400)         # the hf engine, at each decoding step of its one batch
    line = bar.line()
    assert "0/64 rollouts" in line and "20 tok/s" in line and "rollouts/s" not in line
    assert line.endswith("no ETA until the first rollouts finish")


def test_a_slow_rate_is_said_per_minute_not_as_zero():
    clock, ui = Clock(), Lines()
    bar = Tracker(ui, "update-agent e1", 10, "steps", clock=clock)
    clock.now += 300
    bar.advance(1)
    assert "0.2 steps/min" in bar.line() and "0.00" not in bar.line()


def test_heartbeat_off_a_terminal_while_nothing_finishes(tmp_path, monkeypatch):
    monkeypatch.setenv("GENENV_PROGRESS_INTERVAL", "0.05")
    err = io.StringIO()
    ui = UI(stream=err, out=io.StringIO(), log_path=tmp_path / "logs" / "evaluate.log")
    with ui.progress("evaluate bfcl", 8, "samples"):
        time.sleep(0.4)                # one long batch: nothing finishes
    lines = err.getvalue().splitlines()
    assert len(lines) >= 3, lines
    assert all(line.startswith("evaluate bfcl: 0/8 samples (0%), elapsed") for line in lines)
    assert "no rate or ETA until the first samples finish" in lines[0]
    assert "heartbeat" not in (tmp_path / "logs" / "evaluate.log").read_text()
    assert (tmp_path / "logs" / "evaluate.log").read_text().count("0/8 samples") == len(lines)


def test_a_step_with_nothing_to_count_says_it_is_working(monkeypatch):
    monkeypatch.setenv("GENENV_PROGRESS_INTERVAL", "0.05")
    err = io.StringIO()
    ui = UI(stream=err, out=io.StringIO())
    with ui.working("rollout e1: loading agent model embedded"):
        time.sleep(0.3)
    lines = err.getvalue().splitlines()
    assert len(lines) >= 2 and lines[0].startswith("rollout e1: loading agent model embedded: working, elapsed 0:00:00")


def test_heartbeat_stops_with_the_step(monkeypatch):
    monkeypatch.setenv("GENENV_PROGRESS_INTERVAL", "0.05")
    err = io.StringIO()
    ui = UI(stream=err, out=io.StringIO())
    with ui.progress("score e1", 2, "completions") as bar:
        bar.advance(2)
    time.sleep(0.2)
    n = len(err.getvalue().splitlines())
    time.sleep(0.2)
    assert len(err.getvalue().splitlines()) == n


def test_episodes_count_turns_and_live_episodes():
    clock, ui = Clock(), Lines()
    bar = Tracker(ui, "rollout e1", 8, "rollouts", clock=clock)
    eps = EpisodeProgress(bar, max_turns=3)
    eps.on_turn(0, 8)
    assert "turn 1 of at most 3, 8 episodes live" in bar.line()
    assert "no rate or ETA" in bar.line()
    clock.now += 40
    eps.on_turn(1, 8)                  # nobody finished: the ETA comes from the turns
    line = bar.line()
    assert "0/8 rollouts" in line and "turn 2 of at most 3, 8 episodes live, 0:00:40 a turn" in line
    assert "ETA 0:01:20" in line
    clock.now += 40
    eps.on_done(2)
    eps.on_turn(2, 6)
    line = bar.line()
    assert "2/8 rollouts (25%)" in line and "6 episodes live" in line and "ETA 0:00:40" in line


def test_progress_file_is_read_only_by_its_writer(tmp_path):
    path = progress_file(tmp_path / "logs" / "rollout.log")
    assert path.name == "rollout.progress"
    path.parent.mkdir()
    write_progress(path, "rollout e1: 3/8 rollouts", pid=1234)
    line, age = read_progress(path, 1234)
    assert line == "rollout e1: 3/8 rollouts" and 0 <= age < 5
    assert read_progress(path, 999) is None
    assert [p.name for p in path.parent.iterdir()] == ["rollout.progress"]


def test_status_shows_a_running_stages_last_progress_line(make_run):
    run = make_run()
    script = (
        "import os, time; from pathlib import Path; from genenv_cli.rundir import RunDir, EpochLock; "
        "from genenv_cli.core.ui import UI; "
        f"root = Path({str(run)!r}); r = RunDir(root); "
        "l = EpochLock(r.epoch_dir(1), 'generate-tasks', root=root); l.__enter__(); "
        "ui = UI(log_path=r.logs_dir() / 'generate-tasks.log', root=root); "
        "cm = ui.progress('generate-tasks e1 round 1', 64, 'gens'); bar = cm.__enter__(); "
        "time.sleep(0.3); print('held', flush=True); time.sleep(60)")
    env = dict(os.environ, GENENV_PROGRESS_INTERVAL="0.1")
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        out = subprocess.run([sys.executable, "-m", "genenv_cli", "status", "--run", str(run)],
                             capture_output=True, text=True, check=True).stdout
        assert "epoch 1 generate-tasks: running — pid" in out
        assert "generate-tasks e1 round 1: 0/64 gens (0%), elapsed 0:00:0" in out and " ago)" in out
        data = json.loads(subprocess.run([sys.executable, "-m", "genenv_cli", "status", "--json", "--run", str(run)],
                                         capture_output=True, text=True, check=True).stdout)
        assert data["epochs"][0]["stages"]["generate-tasks"]["progress"].startswith("generate-tasks e1 round 1: 0/64")
    finally:
        holder.kill()
        holder.wait()
    # the holder is gone: its line is not shown as anybody's progress
    out = subprocess.run([sys.executable, "-m", "genenv_cli", "status", "--run", str(run)],
                         capture_output=True, text=True, check=True).stdout
    assert "0/64 gens" not in out


def test_steps_that_follow_each_other_keep_the_beat(monkeypatch):
    """A model that loads for 0.7 intervals, then a step of 0.7 intervals: without the command's last line counting,
    1.4 intervals would pass with no line."""
    monkeypatch.setenv("GENENV_PROGRESS_INTERVAL", "0.2")
    err = io.StringIO()
    ui = UI(stream=err, out=io.StringIO())
    stamps = []
    ui._progress_line = lambda text: (stamps.append(time.monotonic()), UI._progress_line(ui, text))
    start = time.monotonic()
    for step in ("loading", "preparing", "training"):
        with ui.working(step):
            time.sleep(0.14)
    gaps = [b - a for a, b in zip([start, *stamps], [*stamps, time.monotonic()], strict=True)]
    assert stamps and max(gaps) < 0.4, gaps   # one interval, and some slack for a busy machine
