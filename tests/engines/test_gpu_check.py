"""The prepared GPU check, as far as a CPU can take it: the packing (offline, stand-in polars wheels), the packed
genenv installing the way the GPU machine installs it, and a dry run of every part of the check at toy sizes."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from paths import ROOT


def HEAVY(test):
    """All but the plan's arithmetic: a minute or more each; `nox -s heavy` runs them (CI too), `nox -s tests` not."""
    return pytest.mark.heavy(pytest.mark.slow(test))


def _stand_in_wheel(folder: Path, filename: str, name: str, version: str) -> None:
    """A wheel with nothing in it but its metadata: what pip needs to download and install it."""
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    with zipfile.ZipFile(folder / filename, "w") as z:
        z.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{dist}/RECORD", "")


@pytest.fixture(scope="module")
def pack(tmp_path_factory, tiny_model) -> Path:
    links = tmp_path_factory.mktemp("links")
    version = importlib.metadata.version("polars")
    _stand_in_wheel(links, f"polars-{version}-py3-none-any.whl", "polars", version)
    _stand_in_wheel(links, f"polars_runtime_32-{version}-cp311-abi3-manylinux_2_17_x86_64.whl", "polars-runtime-32",
                    version)
    out = tmp_path_factory.mktemp("pack") / ".whl"
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu.pack", "--out", str(out), "--find-links", str(links),
                           "--tokenizer-from", str(tiny_model)], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the working tree adds" in done.stdout and "--target /tmp/site" in done.stdout
    return out


@HEAVY
def test_the_pack_holds_polars_genenv_and_a_chat_tokenizer_under_the_limit(pack):
    manifest = json.loads((pack / "MANIFEST.json").read_text())
    version = importlib.metadata.version("polars")
    assert manifest["pins"] == [f"polars=={version}", f"polars-runtime-32=={version}"]
    names = sorted(manifest["files"])
    assert [n.split("-")[0] for n in names] == ["genenv_cli", "polars", "polars_runtime_32", "tokenizer.tar.gz"]
    for name, entry in manifest["files"].items():
        data = (pack / name).read_bytes()
        assert entry["bytes"] == len(data) and entry["sha256"] == hashlib.sha256(data).hexdigest()
    assert manifest["pack_bytes"] + manifest["working_tree_bytes"] <= manifest["limit_bytes"] == 64 * 2**20
    with tarfile.open(pack / "tokenizer.tar.gz") as tar:
        files = {Path(m.name).name: tar.extractfile(m).read() for m in tar.getmembers()}
    assert "tokenizer.json" in files
    assert json.loads(files["tokenizer_config.json"])["tokenizer_class"] == "PreTrainedTokenizerFast"


@HEAVY
def test_the_packed_genenv_installs_as_the_gpu_machine_installs_it(pack, tmp_path):
    site = tmp_path / "site"
    wheels = sorted(str(p) for p in pack.glob("*.whl"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                           "--no-cache-dir", "--upgrade", "--target", str(site), *wheels], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    code = ("import genenv_cli, genenv_cli.domains.arith as a, importlib.metadata as m; "
            "print(genenv_cli.__file__); print(len(a.ArithDomain().seeds('train'))); print(m.version('genenv-cli'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(site)), timeout=120)
    assert out.returncode == 0, out.stderr
    where, seeds, version = out.stdout.split()
    assert where.startswith(str(site)) and int(seeds) > 0 and version   # the package data travelled too


def test_the_default_plan_fits_one_call_of_6_minutes():
    """The check's own deadline: the default parts' caps and the reserve add up to at most the budget, and the budget
    with the install (about 15 s) and a margin for the machine's start of the command to at most 360 s; the most
    important parts come first."""
    from benchmarks.gpu.check import BUDGET_S, PLAN, default_parts, plan_seconds

    plan = plan_seconds()
    assert plan["total"] <= plan["budget"] == BUDGET_S and BUDGET_S + 30 <= 360
    assert default_parts()[:3] == ["models", "gpu_tests", "precision"]
    assert {"epoch", "rollout_speed", "updates", "mismatch"} <= set(default_parts())
    assert not PLAN["big"][2] and not PLAN["shard_agreement"][2]          # optional: a second call


def _dry_run(pack, tmp_path, parts: str | None) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-m", "benchmarks.gpu.check", "--dry-run", "--pack", str(pack),
                           "--out", str(tmp_path), "--budget-s", "2400", *(["--parts", parts] if parts else [])],
                          capture_output=True, text=True, cwd=ROOT, timeout=2500)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    record = json.loads((tmp_path / "gpu_check-cpu-dry-run.json").read_text())
    assert record["dry_run"] and record["device"] == "cpu" and record["pack"]["pins"]
    return record, done.stdout[done.stdout.index("GPU check on cpu"):]


@HEAVY
def test_a_dry_run_of_the_precision_part(pack, tmp_path):
    """The check's most telling new part, at toy sizes on CPU: both routes trained full weights in bf16 over float32
    master weights (on CPU accelerate trains the FSDP launch unsharded: the same dtypes as the one-GPU route), their
    per-step gradient norms agree, and FSDP2's accumulation over 4 micro-batches holds the unsharded gradients in
    float32 with genenv's policy (and matches the float64 sum of the micro-batches' gradients to float32 rounding),
    in bf16 with accelerate's (and misses it by bf16 rounding)."""
    record, table = _dry_run(pack, tmp_path, "precision")
    parts = record["parts"]
    assert parts["models"]["status"] == "ok" and parts["precision"]["status"] == "ok", parts["precision"]
    assert parts["precision"]["cap_s"] == 1200 and parts["precision"]["seconds"] <= 1200
    routes, reduce = parts["precision"]["routes"], parts["precision"]["reduce"]
    for route in ("one-gpu", "fsdp"):
        assert routes["precision"][route] == {"weights": "float32", "compute": "bfloat16", "grads": "float32",
                                              "reduce": None}
    assert len(routes["steps"]) >= 1
    for s in routes["steps"]:
        assert abs(s["grad_norm_one_gpu"] - s["grad_norm_fsdp"]) <= 1e-3 * s["grad_norm_one_gpu"]
    assert reduce["reduce_float32"]["accumulated_in"] == ["float32"]
    assert reduce["reduce_bfloat16"]["accumulated_in"] == ["bfloat16"]
    f32, bf16 = (reduce[k]["relative_error_vs_float64_sum"] for k in ("reduce_float32", "reduce_bfloat16"))
    assert f32 < 1e-5 < bf16
    assert "\nprecision " in table and "\nprecision accumulation " in table


@HEAVY
@pytest.mark.skipif(os.environ.get("GENENV_GPU_CHECK_DRY_RUN_ALL") != "1",
                    reason="every part at toy sizes: longer than the suite may take on 2 cores; GENENV_GPU_CHECK_DRY_RUN_ALL=1")
def test_a_dry_run_of_the_check_runs_every_part(pack, tmp_path):
    record, table = _dry_run(pack, tmp_path, None)
    parts = record["parts"]
    assert {k: v["status"] for k, v in parts.items()} == dict.fromkeys(
        ["models", "gpu_tests", "precision", "updates", "epoch", "rollout_speed", "mismatch"], "ok")
    assert parts["gpu_tests"].get("skipped", 0) >= 4                      # no CUDA here
    runs = parts["updates"]["runs"]
    assert set(runs) == {"update-agent LoRA", "update-env FSDP"}
    for r in runs.values():
        assert r["exit"] == 0 and r["predicted_gpu_gb"] > 0 and r["host_anon_peak_gb"] > 0 and r["prepare"]["prepared"]
        assert r["loss_inputs"]["route"] == "head" and r["loss_inputs"]["output_dtype"] == "float32"  # CPU: float32
        assert r["plan_gb"]["total"] == r["predicted_gpu_gb"]
    assert runs["update-env FSDP"]["method"] == "fsdp"
    assert set(parts["epoch"]["stages"]) == {"generate-tasks", "rollout", "score", "update-agent", "update-env"}
    assert parts["mismatch"]["samples"] > 0 and parts["mismatch"]["mean_abs_delta_logprob"] < 1e-3   # fp32 both
    assert parts["rollout_speed"]["tokens"]["genenv"] > 0
    for row in ("models", "update-agent LoRA", "update-env FSDP", "precision", "rollout_speed", "gpu_tests", "epoch",
                "mismatch"):
        assert f"\n{row} " in table
