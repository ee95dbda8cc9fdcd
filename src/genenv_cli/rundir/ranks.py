"""Rank 0's word to the other processes of a launch, before any process group exists.

Under a distributed launch only rank 0 takes the epoch's lock and recovers a killed writer's half-done commit; what
it then finds (the stage is done, it must run, or it cannot) is the launch's decision. A rank deciding on its own
could read the run directory halfway through that recovery and disagree: one rank would wait in the training's
first collective for a rank that had already returned, until the process group's timeout. So rank 0 publishes its
decision and every other rank waits for it.

The channel is the launcher's own key-value store: torchrun (and `accelerate launch`, which starts torchrun) hosts
it at MASTER_ADDR:MASTER_PORT for the whole launch and says so in TORCHELASTIC_USE_AGENT_STORE; the process group
connects to the same store later. Without it (TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, or a launcher that hosts
none) there is no channel before the process group, and no rank may decide alone: the stage is refused on every
rank alike, from the environment they share, before any of them looks at the run directory (`require_launch_store`).
"""

from __future__ import annotations

import json
import os
from typing import Any

_ASKED = {"n": 0}  # decisions taken by this process so far: the same sequence on every rank of the launch


def launch_store(timeout: float) -> Any | None:
    """A client of the launcher's store, or None when the launcher hosts none."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() != "true":
        return None
    from datetime import timedelta

    from torch.distributed import PrefixStore, TCPStore

    store = TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                     timeout=timedelta(seconds=timeout))
    return PrefixStore(f"genenv/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)


def require_launch_store(timeout: float, stage: str, epoch: int) -> Any | None:
    """The launcher's store for a launch of several processes (None for one process); a ConfigError, the same on
    every rank, when a launch of several has none."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if world <= 1:
        return None
    store = launch_store(timeout)
    if store is None:
        from genenv_cli.core.errors import ConfigError

        raise ConfigError(
            f"`{stage} --epoch {epoch}` was launched as {world} processes without the launcher's key-value store "
            f"(TORCHELASTIC_USE_AGENT_STORE is not \"True\": TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 is set, or the "
            f"launcher hosts no store). Rank 0 decides for the launch whether the stage is done, must run or cannot "
            f"(after recovering a killed writer's half-done commit) and passes that decision through the store; "
            f"without it each rank would decide alone and could disagree. Launch with `accelerate launch` or "
            f"`torchrun`, and leave TORCH_DISABLE_SHARE_RDZV_TCP_STORE unset.")
    return store


def rank0_decides(rank: int, what: str, decision: dict[str, Any] | None, *, store: Any,
                  timeout: float) -> dict[str, Any]:
    """Rank 0 passes its `decision` (a JSON object) and gets it back; every other rank passes None and gets rank 0's,
    waiting up to `timeout` seconds. `what` names the decision (the stage and epoch) in the key."""
    key = f"{what}/{_ASKED['n']}"
    _ASKED["n"] += 1
    if rank == 0:
        store.set(key, json.dumps(decision))
        return decision or {}
    from datetime import timedelta

    store.set_timeout(timedelta(seconds=timeout))
    return json.loads(store.get(key))
