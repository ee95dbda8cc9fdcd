"""Reading the history W&B writes to an offline run's `run-<id>.wandb` file, for the tracker tests.

wandb 0.31 writes these files from its Go core and ships no Python reader for them, so the format is read here: a
7-byte file header (`:W&B`, magic 0xBEE1, version), then 32 KiB blocks of records, each a 7-byte header (crc32,
length, type: full, first, middle or last piece) and its bytes, a block's tail under 7 bytes left as padding; a
whole record is a `wandb_internal_pb2.Record`, whose `history` items are the logged values as JSON.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

BLOCK = 32768
HEADER = struct.Struct("<IHB")
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def records(path: Path) -> list[Any]:
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    ident, magic, _ = struct.unpack("<4sHB", data[:7])
    assert ident == b":W&B" and magic == 0xBEE1, f"{path}: not a W&B run file"
    out, pos, piece = [], 7, b""
    while pos + HEADER.size <= len(data):
        left = BLOCK - pos % BLOCK
        if left < HEADER.size:  # a block's tail too short for a header: padding
            pos += left
            continue
        _, length, kind = HEADER.unpack_from(data, pos)
        if kind == 0 and length == 0:  # zeros to the block's end
            pos += left
            continue
        piece += data[pos + HEADER.size:pos + HEADER.size + length]
        pos += HEADER.size + length
        if kind in (FULL, LAST):
            record = pb.Record()
            record.ParseFromString(piece)
            out.append(record)
            piece = b""
    return out


def history(folder: Path) -> list[dict[str, Any]]:
    """Every logged row of every offline run under `folder` (W&B's `dir`), each as {key: value}."""
    rows = []
    for path in sorted(folder.glob("wandb/offline-run-*/run-*.wandb")):
        for r in records(path):
            if r.WhichOneof("record_type") == "history":
                rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                             for item in r.history.item})
    return rows
