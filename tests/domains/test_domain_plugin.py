"""A domain written as a plugin, the way docs/domains.md ("Writing a domain") tells an author to: the example in
examples/unitconv is installed into a fresh virtual environment with pip, as the guide says (offline: no
dependencies, no build isolation, the test environment's packages visible), then `genenv domains check` passes
it, `genenv domains preview` shows its prompts and verdicts, and it runs an epoch on the tiny model. Editing its
parser or its agent prompt makes the stages that used them stale, and a seed file is found in the package that
defines the domain."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sysconfig
import textwrap
import venv
from pathlib import Path

import pytest

from paths import ROOT

EXAMPLE = ROOT / "examples" / "unitconv"
SMALL = ["generate.tasks_per_epoch=6", "generate.variations=2", "generate.seed_share=0.5", "generate.max_new_tokens=24",
         "generate.max_rounds=1", "rollout.group_size=3", "rollout.max_new_tokens=12", "rollout.batch_size=16",
         "agent_update.batch_size=4", "env_update.batch_size=4", "curriculum.k_min=0.5", "run.eval_every=0"]


def install_example(tmp_path: Path) -> tuple[Path, Path]:
    """(the fresh environment's python, the plugin's source folder): a copy of the example installed editable, as
    `pip install -e examples/unitconv` in the guide, offline. The environment sees the test environment's packages
    (genenv, torch, pip, setuptools) through a .pth file: `--system-site-packages` would show the interpreter's
    own site-packages, not the test environment's."""
    src = tmp_path / "unitconv"
    shutil.copytree(EXAMPLE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    purelib = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                           text=True).strip())
    (purelib / "test-environment.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    pip = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                          "--no-index", "-e", str(src)], capture_output=True, text=True, timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    return python, src


def genenv(python: Path, *args: object, code: int = 0) -> subprocess.CompletedProcess:
    out = subprocess.run([python, "-m", "genenv_cli", *map(str, args)], capture_output=True, text=True, timeout=600)
    assert out.returncode == code, (out.stdout + out.stderr)[-4000:]
    return out


def stages(python: Path, run: Path) -> dict[str, dict]:
    (row,) = json.loads(genenv(python, "status", "--run", run, "--json").stdout)["epochs"]
    return row["stages"]


@pytest.mark.slow  # a virtual environment, pip and a few genenv processes: about 15 s
def test_the_example_installs_as_the_guide_says_and_passes_check_and_preview(tmp_path):
    python, _ = install_example(tmp_path)
    assert "unitconv" in genenv(python, "domains").stdout
    check = genenv(python, "domains", "check", "unitconv").stdout
    assert "plugin (entry point `unitconv` in genenv.domains)" in check
    assert "unitconv: 5 passed, 0 failed, 0 skipped" in check, check
    rows = json.loads(genenv(python, "domains", "check", "unitconv", "--json").stdout)["checks"]
    assert [r["status"] for r in rows] == ["ok"] * 5 and rows[0]["detail"].startswith("24 train and 12 validation")
    preview = genenv(python, "domains", "preview", "unitconv", "--seed", "m03").stdout
    assert "The environment's prompt (epoch 1: no statistics yet):" in preview
    assert "Example exercise:\n    CONVERT: " in preview and "Convert 2 m to cm" in preview
    assert "-> accepted: a task of shape mass" in preview and "-> reward 1 (partial 1, valid)" in preview
    bad = tmp_path / "env-output.txt"
    bad.write_text("Here is an exercise: convert 3 km into m.")
    answer = tmp_path / "answer.txt"
    answer.write_text("Answer: 12")
    refused = genenv(python, "domains", "preview", "unitconv", "--output", bad, "--answer", answer, code=1).stdout
    assert "-> rejected: parse: no 'CONVERT: <number> <unit> TO <unit>' line" in refused
    assert re.search(r"-> reward 0 \(partial [\d.]+, valid\): answered 12, expected \d+", refused), refused


@pytest.mark.slow
@pytest.mark.heavy
def test_the_example_runs_an_epoch_on_the_tiny_model(tmp_path, tiny_model):
    python, _ = install_example(tmp_path)
    run = tmp_path / "run"
    genenv(python, "init", run, "--domain", "unitconv", "--agent-model", tiny_model, "--env-model", tiny_model,
           *[a for s in SMALL for a in ("--set", s)])
    genenv(python, "run", "--epochs", "1", "--run", run, "--quiet")
    st = stages(python, run)
    assert {name: s["state"] for name, s in st.items()} == dict.fromkeys(
        ["generate-tasks", "rollout", "score", "update-agent", "update-env", "eval-agent"], "done")
    tasks = [json.loads(line) for line in (run / "epochs/0001/tasks.jsonl").read_text().splitlines()]
    assert len(tasks) == 6 and {t["domain"] for t in tasks} == {"unitconv"}
    assert all(t["payload"]["unit"] and t["payload"]["answer"] >= 1 for t in tasks)


@pytest.mark.slow
@pytest.mark.heavy
def test_an_edited_parser_or_prompt_makes_the_stages_that_used_it_stale(tmp_path, tiny_model):
    python, src = install_example(tmp_path)
    run = tmp_path / "run"
    genenv(python, "init", run, "--domain", "unitconv", "--agent-model", tiny_model, "--env-model", tiny_model,
           "--set", "env.mode=seeds", *[a for s in SMALL for a in ("--set", s)])
    for stage in ("generate-tasks", "rollout", "score"):
        genenv(python, stage, "--epoch", 1, "--run", run, "--quiet")
    assert {s["state"] for s in stages(python, run).values() if s["state"] != "missing"} == {"done"}
    module = src / "genenv_unitconv" / "domain.py"
    text = module.read_text()
    # the parser (generate-tasks) and the scorer (score) live in the module: both stale, rollout stale upstream
    module.write_text(text.replace("no 'CONVERT: <number> <unit> TO <unit>' line", "no CONVERT line"))
    st = stages(python, run)
    assert st["generate-tasks"]["label"] == "stale: domain code"
    assert st["generate-tasks"]["changes"][0]["key"] == "domain_code"
    assert st["rollout"]["label"] == "stale upstream" and st["score"]["label"] == "stale: domain code"
    # a comment is no change of code
    module.write_text(module.read_text() + "\n# a comment\n")
    assert stages(python, run)["generate-tasks"]["label"] == "stale: domain code"  # still the parser's edit only
    # the agent's prompt: rollout's own reason
    module.write_text(module.read_text().replace("Reply with the number only", "Reply with the number alone"))
    assert stages(python, run)["rollout"]["label"] == "stale: agent prompt"
    out = genenv(python, "generate-tasks", "--epoch", 1, "--run", run)
    assert "up to date" not in out.stdout
    for stage in ("rollout", "score"):
        genenv(python, stage, "--epoch", 1, "--run", run, "--quiet")
    assert {s["state"] for s in stages(python, run).values() if s["state"] != "missing"} == {"done"}


def test_a_seed_file_is_read_from_the_package_that_defines_the_domain(tmp_path, monkeypatch):
    """A plugin's `seed_file` is found in its own package's data/ folder; a plugin that subclasses a built-in domain
    without naming a seed file keeps the built-in seeds; a missing file or a bad record names the file."""
    pkg = tmp_path / "site" / "toyseeds"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "domain.py").write_text(textwrap.dedent('''
        from genenv_cli.domains.arith import ArithDomain

        class Own(ArithDomain):
            name = "toyseeds"
            seed_file = "toy.jsonl"

        class Inherits(ArithDomain):
            name = "toyinherits"
    '''))
    rows = [{"id": "a", "split": "train", "shape": "add-1d", "expression": "1 + 2", "answer": 3},
            {"id": "b", "split": "validation", "shape": "add-1d", "expression": "2 + 2", "answer": 4}]
    (pkg / "data" / "toy.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    monkeypatch.syspath_prepend(str(pkg.parent))
    from toyseeds.domain import Inherits, Own

    own = Own()
    assert own.seed_path() == pkg / "data" / "toy.jsonl"
    assert [s.id for s in own.seeds("train")] == ["a"] and [s.id for s in own.seeds("validation")] == ["b"]
    assert own.data_fingerprint() != Inherits().data_fingerprint()
    assert len(Inherits().seeds("train")) == 128  # arith's own seed set
    (pkg / "data" / "toy.jsonl").write_text('{"id": "a", "split": "train", "shape": "add-1d", "expression": "1 + 2"}\n')
    from genenv_cli.core.errors import InputError

    with pytest.raises(InputError, match=r"toy.jsonl, line 1: missing answer"):
        Own().seeds()
    (pkg / "data" / "toy.jsonl").unlink()
    with pytest.raises(InputError, match=r"the seed file of domain 'toyseeds' \(seed_file = 'toy.jsonl'\) is not there"):
        Own().seeds()


def test_the_guide_shows_the_example_as_it_is():
    """docs/domains.md quotes the example's entry point and names every method the example defines."""
    guide = (ROOT / "docs" / "domains.md").read_text(encoding="utf-8")
    pyproject = (EXAMPLE / "pyproject.toml").read_text()
    assert '[project.entry-points."genenv.domains"]\nunitconv = "genenv_unitconv.domain:UnitConvDomain"' in pyproject
    assert '[project.entry-points."genenv.domains"]\nunitconv = "genenv_unitconv.domain:UnitConvDomain"' in guide
    source = (EXAMPLE / "genenv_unitconv" / "domain.py").read_text()
    methods = set(re.findall(r"^    def (\w+)\(", source, re.M))
    table = guide.split("### 3. The class: the methods", 1)[1].split("\n### ", 1)[0]
    named = set(re.findall(r"`(\w+)\(", table))
    assert methods <= named, f"methods of the example the guide's table does not name: {methods - named}"
    assert os.path.exists(EXAMPLE / "genenv_unitconv" / "data" / "unitconv_seeds.jsonl")



def test_the_verdicts_earlier_name_still_imports_with_a_warning():
    """A plugin written against `Score` (TaskVerdict's earlier name) keeps working, told the new name."""
    import genenv_cli.domains.base as base

    with pytest.warns(FutureWarning, match="TaskVerdict"):
        old = base.Score
    assert old is base.TaskVerdict
    with pytest.raises(AttributeError):
        base.Scores  # noqa: B018 - the attribute access is the test
