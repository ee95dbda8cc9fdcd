"""A plugin domain's code runs under a guard in `genenv domains`, `domains check` and `domains preview`: a parser
that loops or a scorer that sleeps is stopped after the stages' per-item limit, a `SystemExit` or an `os._exit`
never passes for success, a plugin's exception is reported as the plugin's (its name, the method, the message),
and one plugin that fails at import never hides the others from the listing.

The plugins are installed the way pip installs one: a `.dist-info` folder with an `entry_points.txt` on the path
of a genenv process of their own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a genenv process per case, two of them stopped at the 10 s limit: about 80 s

PLUGINS = {  # entry-point name -> the ArithDomain method it breaks, and how
    "loops": ("parse_env_output", "while True:\n    pass"),
    "sleeps": ("score", "import time\ntime.sleep(3600)"),
    "exits": ("score", "raise SystemExit(0)"),
    "dies": ("score", "import os\nos._exit(0)"),
    "raises": ("parse_env_output", "raise ValueError('the parser tripped')"),
    "nomessages": ("agent_messages", "return None"),
}


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory) -> Path:
    site = tmp_path_factory.mktemp("site")
    body = ["from genenv_cli.domains.arith import ArithDomain", ""]
    for name, (method, code) in PLUGINS.items():
        body += [f"class {name.title()}(ArithDomain):",
                 f"    description = 'arith whose {method} is broken ({name})'",
                 f"    def {method}(self, *args, **kwargs):",
                 textwrap.indent(code, " " * 8), ""]
    (site / "hostile_plugins.py").write_text("\n".join(body))
    (site / "broken_at_import.py").write_text("raise RuntimeError('this plugin cannot be imported')\n")
    dist = site / "hostile_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: hostile-plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[genenv.domains]\n" + "".join(f"{n} = hostile_plugins:{n.title()}\n" for n in PLUGINS)
        + "unimportable = broken_at_import:Domain\n")
    return site


def genenv(plugin_path: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin_path), *sys.path])}
    try:
        return subprocess.run([sys.executable, "-m", "genenv_cli", *args], capture_output=True, text=True, env=env,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"genenv {' '.join(args)} did not finish in {timeout} s: the plugin hung it")


def _no_bug_claimed(r: subprocess.CompletedProcess) -> None:
    assert "bug in genenv" not in r.stderr and "Traceback" not in r.stderr + r.stdout, r.stderr


def test_the_listing_shows_every_domain_when_one_plugin_cannot_be_imported(plugin_path):
    r = genenv(plugin_path, "domains")
    _no_bug_claimed(r)
    assert r.returncode == 1, r.stdout + r.stderr
    lines = {line.split()[0]: line for line in r.stdout.splitlines() if line.strip()}
    assert {"arith", "tool_call", "bfcl", *PLUGINS, "unimportable"} <= set(lines), r.stdout
    assert "BROKEN" in lines["unimportable"] and "plugin `unimportable`" in lines["unimportable"]
    assert "RuntimeError: this plugin cannot be imported" in lines["unimportable"]
    assert "BROKEN" not in lines["loops"] and "BROKEN" not in lines["arith"]


def test_check_of_a_plugin_that_cannot_be_imported_fails_naming_it(plugin_path):
    r = genenv(plugin_path, "domains", "check", "unimportable")
    _no_bug_claimed(r)
    assert r.returncode == 1 and "FAIL" in r.stdout and "plugin `unimportable`" in r.stdout, r.stdout + r.stderr
    assert "RuntimeError: this plugin cannot be imported" in r.stdout


@pytest.mark.parametrize("name", ["loops", "sleeps", "exits", "dies", "raises"])
def test_check_fails_a_plugin_that_hangs_exits_or_raises_and_names_it(plugin_path, name):
    r = genenv(plugin_path, "domains", "check", name, "--json")
    _no_bug_claimed(r)
    assert r.returncode == 1, r.stdout + r.stderr
    report = json.loads(r.stdout)
    failed = [c["detail"] for c in report["checks"] if c["status"] == "fail"]
    method = PLUGINS[name][0]
    assert failed and any(f"plugin `{name}`" in d and f"{method}()" in d for d in failed), failed
    expected = {"loops": "did not return within", "sleeps": "did not return within", "exits": "SystemExit(0)",
                "dies": "ended the process", "raises": "ValueError: the parser tripped"}[name]
    assert any(expected in d for d in failed), failed


@pytest.mark.parametrize("name", ["loops", "exits", "dies", "raises", "nomessages"])
def test_preview_of_a_broken_plugin_exits_non_zero_naming_it(plugin_path, name):
    r = genenv(plugin_path, "domains", "preview", name)
    _no_bug_claimed(r)
    assert r.returncode != 0, r.stdout + r.stderr
    assert f"plugin `{name}`" in r.stderr and f"{PLUGINS[name][0]}()" in r.stderr, r.stderr
