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

The commit (contract.execute) asks one object, `coordination(...)`: `Alone` for one process (it decides for itself
and tells nobody), `Coordinated` for a rank of a launch (rank 0 decides and tells, the others hear and follow).
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


def process_rank() -> int:
    """Rank under torchrun/accelerate (RANK), 0 when run alone. Only rank 0 locks and writes."""
    return int(os.environ.get("RANK", "0"))


class Alone:
    """One process: it decides for itself whether the stage is done, must run or cannot, and tells nobody."""

    def __init__(self, rank: int = 0) -> None:
        self.rank = rank
        self.told = False

    @property
    def is_main(self) -> bool:
        """Whether this process locks, recovers and writes (rank 0)."""
        return self.rank == 0

    def hear(self) -> dict[str, Any] | None:
        """Rank 0's decision, for a process that follows one; None: this process decides for itself."""
        return None

    def tell(self, action: str, message: str = "") -> None:
        """Rank 0's decision (`done`, `run` or `error`), once taken."""
        self.told = True


class Coordinated(Alone):
    """A rank of a launch of several processes: rank 0 tells its decision through the launcher's store (`what`
    names it: the stage and epoch), every other rank hears it and follows."""

    def __init__(self, rank: int, store: Any, what: str, timeout: float) -> None:
        super().__init__(rank)
        self.store, self.what, self.timeout = store, what, timeout

    def hear(self) -> dict[str, Any] | None:
        return rank0_decides(self.rank, self.what, None, store=self.store, timeout=self.timeout)

    def tell(self, action: str, message: str = "") -> None:
        self.told = True
        rank0_decides(0, self.what, {"action": action, "message": message}, store=self.store, timeout=self.timeout)


def coordination(timeout: float, stage: str, epoch: int) -> Alone:
    """How this process agrees with the others on a run of `stage` of `epoch`: `Coordinated` under a launch of
    several processes (refused without the launcher's store: `require_launch_store`), else `Alone`."""
    store = require_launch_store(timeout, stage, epoch)
    if store is None:
        return Alone(process_rank())
    return Coordinated(process_rank(), store, f"{stage}/{epoch}", timeout)
