import tomllib

import pytest

from genenv_cli.catalogue.config import Config, config_from_dict, load_config, parse_override, render_config
from genenv_cli.core.errors import ConfigError


def test_rendered_config_lists_every_key_and_round_trips(tmp_path):
    text = render_config(Config())
    data = tomllib.loads(text)
    cfg = config_from_dict(data, "x")
    assert cfg == Config()
    for section, values in Config().to_dict().items():
        assert set(data[section]) == set(values)
    assert "# Target success rate" in text          # help is written beside the key
    assert "One of: genenv, frozen, static, seeds." in text


def test_unknown_key_names_it_and_suggests():
    with pytest.raises(ConfigError, match=r"unknown key `rollout.group_sise`.*Did you mean `group_size`"):
        config_from_dict({"rollout": {"group_sise": 4}}, "genenv.toml")


def test_bad_choice_lists_allowed_values():
    with pytest.raises(ConfigError, match=r"`env.mode` = 'random' is not allowed; choose one of 'genenv', 'frozen'"):
        config_from_dict({"env": {"mode": "random"}}, "genenv.toml")


@pytest.mark.parametrize("section,key,value,match", [
    ("rollout", "group_size", 0, "below its minimum 1"),
    ("rollout", "group_size", "8", "must be an integer"),
    ("curriculum", "alpha", 1.5, "above its maximum 1.0"),
    ("agent_update", "lora", "yes", "must be true or false"),
    ("agent_update", "lora_targets", "q_proj", "must be a list of strings"),
])
def test_type_and_range_errors(section, key, value, match):
    with pytest.raises(ConfigError, match=match):
        config_from_dict({section: {key: value}}, "genenv.toml")


def test_overrides_are_toml_values_else_strings(tmp_path):
    assert parse_override("rollout.group_size=4") == ("rollout", "group_size", 4)
    assert parse_override("agent_update.lora=false") == ("agent_update", "lora", False)
    assert parse_override("agent.model=Qwen/Qwen2.5-0.5B-Instruct") == ("agent", "model", "Qwen/Qwen2.5-0.5B-Instruct")
    assert parse_override('agent_update.lora_targets=["q_proj"]')[2] == ["q_proj"]
    path = tmp_path / "genenv.toml"
    path.write_text(render_config(Config()))
    cfg = load_config(path, ["rollout.group_size=4", "curriculum.alpha=0.3"])
    assert cfg.rollout.group_size == 4 and cfg.curriculum.alpha == 0.3
    with pytest.raises(ConfigError, match="expected SECTION.KEY=VALUE"):
        parse_override("group_size=4")


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(ConfigError, match="genenv init"):
        load_config(tmp_path / "genenv.toml")
    (tmp_path / "genenv.toml").write_text("[run\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(tmp_path / "genenv.toml")


def test_a_late_key_at_its_default_leaves_the_digest_of_older_runs_unchanged():
    """A setting added after runs existed (`late=True`) must not make their finished stages stale: while it holds its
    default the section's digest is what it was before the key existed; a changed value still counts."""
    import dataclasses
    import hashlib
    import json

    from genenv_cli.catalogue.config import SECTIONS, config_from_dict

    cfg = config_from_dict({}, "test")
    late = [(s, f) for s, cls in SECTIONS.items() for f in dataclasses.fields(cls) if f.metadata.get("late")]
    assert {("agent_update", "is_cap"), ("env_update", "algo"), ("curriculum", "invalid_reward")} <= \
        {(s, f.name) for s, f in late}
    for section, fld in late:
        before = {k: v for k, v in cfg.section(section).items() if (section, k) not in {(s, f.name) for s, f in late}}
        blob = json.dumps({section: before}, sort_keys=True).encode()
        assert cfg.digest([section]) == hashlib.sha256(blob).hexdigest()[:16]
        default = fld.default_factory() if fld.default is dataclasses.MISSING else fld.default
        if "choices" in fld.metadata:
            other = next(c for c in fld.metadata["choices"] if c != default)
        elif isinstance(default, list):  # run.eval_benches: another list of known names
            other = [*default, "bamboogle"]
        else:
            other = default * 2 or 0.5
        changed = config_from_dict({section: {fld.name: other}}, "test")
        assert changed.digest([section]) != cfg.digest([section])
