"""The run directory: where every file lives, reading what the run records, fingerprints, the per-epoch lock,
atomic replacement, and the schema of every data file.

Layout (docs/pools.md describes every file and column):

    RUN/genenv.toml
    RUN/epochs/0003/{tasks.jsonl, tasks.rejects.jsonl, rollouts.parquet, scores.parquet, task_stats.parquet,
                     agent/, env/, agent_update.parquet, env_update.parquet, metrics.json, manifests/<stage>.json}
    RUN/pools/agent_train/epoch=0003.parquet   RUN/pools/env_sft/epoch=0003.parquet
    RUN/evals/<bench>/<model-tag>.json         RUN/logs/<stage>.log
    RUN/report/report.html                     RUN/static/[<domain>/]tasks.jsonl

This package owns these files: no other module builds a path into a run or opens one
(tests/house/test_run_files.py); they ask `RunDir` for the path, or for the content. One module per job:

- `layout`: `RunDir` (the paths, from `schemas.SCHEMAS` for the data files; `evals`, `report`, `static` named
  there only), the reader of manifests, evaluation results, metrics.json and shards; finding and opening a run;
- `schemas`: the schema of every file of a run and metrics.json's keys (docs/pools.md is generated from it);
- `datafiles`: validated reading and writing of the data files (JSON lines and Parquet);
- `records`: the small JSON files (a lock's holder, a manifest), leniently or strictly;
- `evalfiles`: how evaluation results are named, and reading one back checked;
- `fingerprints`: a file's or folder's fingerprint and whether it is unchanged;
- `atomic`: atomic writes, the commit swap and recovery of interrupted commits;
- `lock`: the epoch lock, which takes an epoch's folder and knows nothing of the layout.

The names below are the run directory's API; `from genenv_cli.rundir import RunDir` is the usual entry.
"""

from genenv_cli.rundir.atomic import (
    clean_stale_tmp,
    commit,
    dead_leftovers,
    fsync_folder,
    json_bytes,
    leftover_finals,
    manifest_digest,
    old_name,
    recover_commit,
    recover_interrupted,
    recover_replaced,
    replace_into_place,
    swap_in,
    tmp_name,
    write_bytes_atomic,
    write_json_atomic,
    write_new,
    write_text_atomic,
    writer_id,
)
from genenv_cli.rundir.checkpoint_records import PRUNED, read_pruned
from genenv_cli.rundir.fingerprints import fingerprint, sha256_file, unchanged
from genenv_cli.rundir.layout import (
    EPOCH_MAX,
    EVALS,
    POOLS,
    REPORT,
    SHARD_MAX,
    STATIC,
    TRACKERS,
    RunDir,
    find_run,
    log_name,
    open_run,
    shard_of,
    shard_stage,
    shard_tag,
    writable,
)
from genenv_cli.rundir.lock import EpochLock, lock_held
from genenv_cli.rundir.records import read_json, read_record

__all__ = [
    "EPOCH_MAX", "EVALS", "POOLS", "PRUNED", "REPORT", "SHARD_MAX", "STATIC", "TRACKERS", "EpochLock", "RunDir",
    "clean_stale_tmp", "commit", "dead_leftovers", "find_run", "fingerprint", "fsync_folder", "json_bytes",
    "leftover_finals", "lock_held", "log_name", "manifest_digest", "old_name", "open_run", "read_json", "read_pruned", "read_record", "recover_commit",
    "recover_interrupted", "recover_replaced", "replace_into_place", "sha256_file", "shard_of", "shard_stage", "shard_tag", "swap_in",
    "tmp_name", "unchanged", "writable", "write_bytes_atomic", "write_json_atomic", "write_new", "write_text_atomic",
    "writer_id",
]
