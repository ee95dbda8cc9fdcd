"""The checks before a checkpoint is published see every parameter under DeepSpeed ZeRO-3, where a parameter object
is an empty placeholder and this rank's values are its partition (`ds_tensor`): the NaN check reads the partition
(each rank its own, reduced over the ranks by `check_finite`), and the digest refuses a gathered state dict that
lacks a partitioned parameter instead of hashing the placeholder. DeepSpeed itself does not run on CPU processes
(accelerate enables it only off the CPU), so the partitioned parameters here are built by hand, as DeepSpeed lays
them out."""

import pytest
import torch

from genenv_cli.catalogue.settings import AgentUpdateConfig
from genenv_cli.core.errors import ConfigError
from genenv_cli.machinery.training.policy_loading import Policy
from genenv_cli.machinery.training.publishing import check_finite, parameter_digest


def _partitioned(values: torch.Tensor) -> torch.nn.Parameter:
    p = torch.nn.Parameter(torch.empty(0))     # ZeRO-3's placeholder between forwards
    p.ds_tensor = values                       # this rank's partition
    p.ds_id = 0
    return p


def _model(values: torch.Tensor) -> torch.nn.Module:
    m = torch.nn.Module()
    m.w = _partitioned(values)
    m.b = torch.nn.Parameter(torch.zeros(2))
    return m


def test_a_nan_in_a_zero3_partition_is_seen():
    ok = Policy(model=_model(torch.ones(3)), tokenizer=None, lora=False, base_name="t")
    check_finite(ok, [], role="agent", epoch=1, train=AgentUpdateConfig())
    bad = Policy(model=_model(torch.tensor([1.0, float("nan"), 0.0])), tokenizer=None, lora=False, base_name="t")
    with pytest.raises(ConfigError, match=r"trained weights hold NaN or infinity \(first: w\)"):
        check_finite(bad, [], role="agent", epoch=1, train=AgentUpdateConfig())


def test_the_digest_refuses_a_gathered_state_dict_without_a_partitioned_parameter():
    model = _model(torch.ones(3))
    with pytest.raises(RuntimeError, match="no value for the sharded parameter w"):
        parameter_digest(model, {"b": torch.zeros(2)})
    full = {"w": torch.ones(6), "b": torch.zeros(2)}
    assert parameter_digest(model, full) != parameter_digest(model, {**full, "w": torch.zeros(6)})
