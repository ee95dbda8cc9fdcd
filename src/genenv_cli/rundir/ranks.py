"""Rank 0's word to the other processes of a launch, before any process group exists.

Under a distributed launch only rank 0 takes the epoch's lock and recovers a killed writer's half-done commit; what
it then finds (the stage is done, it must run, or it cannot) is the launch's decision. A rank deciding on its own
could read the run directory halfway through that recovery and disagree: one rank would wait in the training's
first collective for a rank that had already returned, until the process group's timeout. So rank 0 publishes its
decision and every other rank waits for it.

The channel is the launcher's own key-value store: torchrun (and `accelerate launch`, which starts torchrun) hosts
it at MASTER_ADDR:MASTER_PORT for the whole launch and says so in TORCHELASTIC_USE_AGENT_STORE; the process group
connects to the same store later. A launcher without it (none of the shipped ones) leaves each rank to decide alone.
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
