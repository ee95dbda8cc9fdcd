"""genenv's CLI inside `accelerate launch` on CPU processes, with FSDP made real.

accelerate applies FSDP only to GPU-like process groups: CPU processes (gloo) become MULTI_CPU, which trains plain
data-parallel however the launch's config file asks for FSDP. Started as this script instead of `-m genenv_cli`, the
process makes accelerate keep its FSDP plugin there, so `Accelerator.prepare` takes the route it takes on GPUs
(FSDP2's `fully_shard` over a gloo mesh, the optimizer's parameters swapped for the shards, rank 0's weights
broadcast with cpu_ram_efficient_loading, the full state dict gathered for the checkpoint). The mixed-precision policy
is applied as accelerate's GPU branch applies it: with the run's mixed precision (Trainer's `bf16=True` under
`run.dtype = "bfloat16"`) the plugin gets accelerate's own policy for it (`set_mixed_precision`), which genenv then
replaces with its own (training/precision.py), as on a GPU. Without the launch's FSDP choice (ACCELERATE_USE_FSDP)
nothing is changed: DDP launches run as they do anywhere.
"""

import os


def _keep_fsdp_on_cpu() -> None:
    from accelerate.state import AcceleratorState, PartialState
    from accelerate.utils import DistributedType

    init = AcceleratorState.__init__

    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        plugin = kwargs.get("fsdp_plugin")
        if plugin is not None and self.distributed_type == DistributedType.MULTI_CPU:
            self.distributed_type = DistributedType.FSDP
            if self._mixed_precision != "no":   # the GPU branch's line (accelerate/state.py)
                plugin.set_mixed_precision(self._mixed_precision)
            self.fsdp_plugin = plugin
            PartialState._shared_state["distributed_type"] = DistributedType.FSDP  # read again by later states

    AcceleratorState.__init__ = patched


if __name__ == "__main__":
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        _keep_fsdp_on_cpu()
    from genenv_cli.cli import main

    main()
