"""Atomic writes and the commit of a stage's outputs: temporary and old names, replacing a file in one rename,
swapping several files in around a manifest's commit point, and recovering what a killed writer left half done
(docs/design.md, "Commit order")."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from genenv_cli.core import process_identity as writers
from genenv_cli.core.errors import GenenvError, InputError
from genenv_cli.core.safefiles import open_new, read_regular, remove_entry
from genenv_cli.rundir.fingerprints import unchanged


def writer_id() -> int:
    """The id in this process's temporary and old names. Under torchrun/accelerate the ranks share their
    launcher's pid, so they agree on the name (only rank 0 writes; some savers need every rank)."""
    return os.getppid() if int(os.environ.get("WORLD_SIZE", "1")) > 1 else os.getpid()


def tmp_name(final: Path, pid: int | None = None) -> Path:
    """A temporary name beside `final`, tagged with the writing process (`writer_id`)."""
    return final.with_name(f".{final.name}.tmp-{writer_id() if pid is None else pid}")


def old_name(final: Path, pid: int | None = None) -> Path:
    """Where a commit keeps the previous `final` until the new one is in place (`swap_in`)."""
    return final.with_name(f".{final.name}.old-{writer_id() if pid is None else pid}")


def replace_into_place(tmp: Path, final: Path) -> None:
    """Rename a finished file or directory over its final name (atomic for files); what is at `final` is
    replaced, never followed (a link there is replaced, its target untouched).

    A folder over an existing one is one commit where the file system can exchange two names atomically (Linux's
    renameat2 with RENAME_EXCHANGE: ext4, xfs, btrfs, tmpfs): `final` holds the old folder or the new one at every
    instant, and a kill after the exchange leaves the old one under the temporary name, for `clean_stale_tmp` or
    `recover_replaced`. Elsewhere it takes two renames (the old one aside to `.NAME.old-PID`, the new one in): a
    kill between them leaves no `NAME`, and `recover_interrupted` (run before a stage looks at its state) or
    `recover_replaced` puts the old one back, so the previous copy is never lost. The stages commit with `swap_in`,
    which does this for every output."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if tmp.is_dir():
        if os.path.lexists(final) and exchange(tmp, final):
            fsync_folder(final.parent)
            with contextlib.suppress(OSError):
                remove_entry(tmp)  # the old folder, now under the temporary name
            return
        old = old_name(final)
        if os.path.lexists(final):
            remove_entry(old)
            os.replace(final, old)
        os.replace(tmp, final)
        with contextlib.suppress(OSError):
            remove_entry(old)
    else:
        os.replace(tmp, final)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange(a: Path, b: Path) -> bool:
    """Swap the names `a` and `b` in one atomic step (renameat2 with RENAME_EXCHANGE); False, with nothing
    changed, where the system or the file system cannot (then the caller renames twice). ctypes, because Python's
    os module has no renameat2."""
    import ctypes
    import errno

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), str(b))


def recover_replaced(final: Path) -> list[str]:
    """Resolve what a killed `replace_into_place` of `final` left beside it, for writers that are gone: an old
    copy is put back when `final` is missing (a kill between the two renames), else deleted with the temporary
    copies (a kill while writing, or after an exchange). For a single output outside a run (an export's folder),
    where `clean_stale_tmp` of the whole parent folder would touch names that are not genenv's. Returns what it
    did, one line each."""
    done = []
    for pid in sorted(_leftover_ids(final)):
        if writers.alive(pid):
            continue
        old, tmp = old_name(final, pid), tmp_name(final, pid)
        if os.path.lexists(old):
            if os.path.lexists(final):
                remove_entry(old)
                done.append(f"removed {old.name}, the previous copy a killed writer left")
            else:
                os.replace(old, final)
                done.append(f"put back {final.name} from {old.name}, where a killed writer had left it")
        if os.path.lexists(tmp):
            remove_entry(tmp)
            done.append(f"removed {tmp.name}, a killed writer's unfinished or replaced copy")
    return done


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write under `tmp_name` (created afresh, never through a link; `clean_stale_tmp` recognises it if the
    writer is killed), then rename over `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_name(path)
    try:
        with open_new(tmp) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            remove_entry(tmp)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def json_bytes(obj: Any) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def write_json_atomic(path: Path, obj: Any) -> None:
    write_bytes_atomic(path, json_bytes(obj))


def write_new(path: Path, data: bytes) -> None:
    """Write a temporary file of a commit: created afresh (never through a link), flushed to disk."""
    with open_new(path) as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def commit(pairs: list[tuple[Path, Path]], manifest_path: Path, manifest: dict[str, Any]) -> None:
    """The one commit of the run directory, for an epoch stage (its manifest) and for an evaluation (its result,
    which is its samples' manifest). `pairs` are (temporary, final) names of the outputs, all written.
    `manifest` gains what recovery orders commits by (the digest of the manifest it `supersedes`, and its
    `writer`) and, when it is to be undone, which outputs it wrote (its `outputs`: {name: {"path": relative to
    the root recovery is given, "fingerprint"}}); it is written as the intent, then `swap_in` renames the outputs
    and, last, the manifest into place. A failure removes the intent (the outputs' temporaries are the
    caller's); a kill leaves it for `recover_commit`."""
    manifest["supersedes"] = manifest_digest(manifest_path)
    manifest["writer"] = writers.identity(writer_id())
    intent = tmp_name(manifest_path)
    try:
        write_new(intent, json_bytes(manifest))
        swap_in(pairs, intent, manifest_path)
    except BaseException:
        with contextlib.suppress(OSError):
            remove_entry(intent)
        raise


def leftover_finals(directory: Path) -> set[str]:
    """The names in `directory` that a writer's temporary or old copy (`.NAME.tmp-ID`, `.NAME.old-ID`) was left
    beside, whoever wrote it."""
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    return {m.group(1) for m in map(_LEFTOVER.match, names) if m}


def swap_in(pairs: list[tuple[Path, Path]], intent: Path, manifest: Path) -> None:
    """The commit of a stage (docs/design.md, "Commit order"). `pairs` are (temporary, final) names of its
    outputs and derived files, all written; `intent` is its new manifest under its temporary name, written and
    flushed. Each final is moved aside to `.NAME.old-ID` and its new version renamed in; then the manifest is
    renamed in (the commit point), then the old copies are deleted. A failure before the commit point puts
    every old copy back and removes what was renamed in, so the previous outputs and manifest stand; a kill
    there is resolved by `recover_commit` on the next run the same way, since `intent` still exists."""
    moved: list[tuple[Path, Path, Path | None]] = []
    try:
        for tmp, final in pairs:
            old = None
            if os.path.lexists(final):
                old = old_name(final)
                remove_entry(old)
                os.replace(final, old)
            moved.append((tmp, final, old))
            os.replace(tmp, final)
        os.replace(intent, manifest)  # the commit point
    except BaseException:
        for tmp, final, old in reversed(moved):
            if not os.path.lexists(tmp):  # its new version was renamed in
                remove_entry(final)
            if old is not None:
                os.replace(old, final)
        raise
    for folder in {manifest.parent, *(final.parent for _, final, _ in moved)}:
        fsync_folder(folder)  # the renames themselves reach the disk
    for _, _, old in moved:
        if old is not None:
            with contextlib.suppress(OSError):  # left for the next run's recovery
                remove_entry(old)


def fsync_folder(folder: Path) -> None:
    """Flush a folder's entries (renames, new names) to disk; best effort (some file systems refuse it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def manifest_digest(manifest: Path) -> str | None:
    """sha256 of the committed manifest's bytes (None when there is none): what an intent records it supersedes,
    so recovery can tell whether the manifest is still the one it was meant to replace."""
    try:
        return hashlib.sha256(read_regular(manifest, follow=False)).hexdigest()
    except FileNotFoundError:
        return None
    except (OSError, GenenvError):
        return "unreadable"


def recover_commit(finals: dict[str, Path], manifest: Path, root: Path) -> list[str]:
    """Resolve what a killed `swap_in` left for these outputs (`finals`: path relative to `root` -> path) and
    this manifest, for every writer id that is no longer alive (`writers.alive`, with the writer's identity
    when its intent recorded one):

    - its intent (`.STAGE.json.tmp-ID`) is still there and the committed manifest is still the one it
      `supersedes`: the commit point was not reached, so it is undone: each `.NAME.old-ID` goes back to NAME,
      and a NAME that has no old copy but is the new output the intent records (a stage's first run) is removed;
    - its intent is there but another commit came after it (the manifest is not the one it superseded): the
      intent is stale and discarded with its old copies, which are older than what is committed now. Recovery
      is ordered by commit: an intent never undoes a later commit;
    - no intent: the commit happened (or a writer of an older genenv was killed between the two renames of a
      folder): an old copy is deleted when NAME exists, put back when it does not.

    Then the writer's temporary files and intent are removed. Returns what it did, one line each."""
    done: list[str] = []
    ids: set[int] = set()
    for final in [*finals.values(), manifest]:
        ids.update(_leftover_ids(final))
    for pid in sorted(ids):
        intent = tmp_name(manifest, pid)
        record = _record(intent) if os.path.lexists(intent) else {}
        if writers.alive(pid, record.get("writer") if isinstance(record.get("writer"), dict) else None):
            continue
        if os.path.lexists(intent) and not _still_current(record, manifest):
            for final in finals.values():
                if os.path.lexists(old_name(final, pid)):
                    remove_entry(old_name(final, pid))
            done.append(f"discarded an unfinished commit of {manifest.stem} that a later commit superseded")
        elif os.path.lexists(intent):
            recorded = _outputs_of(record)
            committed = _outputs_of(_record(manifest)) if os.path.lexists(manifest) else {}
            for rel, final in finals.items():
                old = old_name(final, pid)
                if os.path.lexists(old):
                    remove_entry(final)
                    os.replace(old, final)
                    done.append(f"put back the previous {rel}")
                elif os.path.lexists(final) and not final.is_symlink() and rel in recorded \
                        and unchanged(final, recorded[rel]) \
                        and not (rel in committed and unchanged(final, committed[rel])):
                    remove_entry(final)  # new, with no previous copy, and no committed manifest vouches for it
                    done.append(f"removed {rel}, written by an unfinished run")
        else:
            for rel, final in finals.items():
                old = old_name(final, pid)
                if os.path.lexists(old):
                    if os.path.lexists(final):
                        remove_entry(old)
                    else:
                        os.replace(old, final)
                        done.append(f"put back the previous {rel}")
        for final in [*finals.values(), manifest]:
            remove_entry(tmp_name(final, pid))
    return done


def _still_current(intent: dict[str, Any], manifest: Path) -> bool:
    """Whether the committed manifest is still the one the intent was written to replace. An intent of an older
    genenv records nothing: then a committed manifest that finished after it is a later commit."""
    if "supersedes" in intent:
        return intent["supersedes"] == manifest_digest(manifest)
    committed = _record(manifest) if os.path.lexists(manifest) else {}
    theirs, ours = committed.get("finished"), intent.get("finished")
    return not (isinstance(theirs, str) and isinstance(ours, str) and theirs > ours)


def dead_leftovers(final: Path) -> list[Path]:
    """The temporary and old copies of `final` (`.NAME.tmp-ID`, `.NAME.old-ID`) whose writer is gone: for a file
    written whole by `write_bytes_atomic` (pruned.json), where an old copy is never the only one."""
    return [p for pid in sorted(_leftover_ids(final)) if not writers.alive(pid)
            for p in (tmp_name(final, pid), old_name(final, pid)) if os.path.lexists(p)]


def _leftover_ids(final: Path) -> set[int]:
    """Writer ids of `.NAME.tmp-ID` and `.NAME.old-ID` beside `final`."""
    prefix = f".{final.name}."
    found: set[int] = set()
    try:
        names = os.listdir(final.parent)
    except OSError:
        return found
    for name in names:
        if name.startswith(prefix):
            m = _LEFTOVER.match(name)
            if m and m.group(1) == final.name:
                found.add(int(m.group(3)))
    return found


def _record(path: Path) -> dict[str, Any]:
    """A manifest or an intent as a JSON object, never through a link; {} when it was cut short or is not one."""
    try:
        data = json.loads(read_regular(path, follow=False))
    except (OSError, ValueError, RecursionError, GenenvError):
        return {}
    return data if isinstance(data, dict) else {}


def _outputs_of(record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """{path: fingerprint} of the outputs a manifest (or an unfinished commit's intent) records."""
    try:
        return {rec["path"]: rec["fingerprint"] for rec in record["outputs"].values()
                if isinstance(rec, dict) and isinstance(rec.get("fingerprint"), dict)}
    except (KeyError, TypeError, AttributeError):
        return {}


# a writer's id is data found on disk: any run of digits is read, and one out of range is a dead writer
_LEFTOVER = re.compile(r"^\.(.+)\.(tmp|old)-(\d{1,30})$")


def recover_interrupted(directory: Path) -> list[Path]:
    """Put back `.NAME.old-PID` as NAME when NAME is missing and PID is gone: a writer was killed between the
    two renames of `replace_into_place`, and the old copy is the only one. Returns what was put back."""
    restored = []
    if not directory.is_dir():
        return restored
    for p in list(directory.iterdir()):
        m = _LEFTOVER.match(p.name)
        if m and m.group(2) == "old" and not writers.alive(int(m.group(3))):
            final = p.with_name(m.group(1))
            if not final.exists() and not final.is_symlink():
                try:
                    os.replace(p, final)
                except OSError as exc:  # read-only storage: say what to do rather than fail obscurely
                    raise InputError(f"{final} is missing and its previous copy is {p} (a writer was killed "
                                     f"between two renames), but it cannot be put back ({exc.strerror}). Rename it "
                                     f"back by hand, or rerun on writable storage.") from None
                restored.append(final)
    return restored


def clean_stale_tmp(directory: Path) -> None:
    """Remove leftovers of killed writers (`.NAME.tmp-PID`, `.NAME.old-PID`) whose process is gone; an old copy
    whose NAME is missing is put back instead (`recover_interrupted`), never deleted. For folders outside the
    stage contract (evaluations, the static task set); a stage's own leftovers are `recover_commit`'s."""
    if not directory.is_dir():
        return
    recover_interrupted(directory)
    for p in directory.iterdir():
        m = _LEFTOVER.match(p.name)
        if m and not writers.alive(int(m.group(3))):
            if m.group(2) == "old" and not p.with_name(m.group(1)).exists():
                continue  # the only copy (recover_interrupted could not rename it): keep it
            with contextlib.suppress(OSError):  # gone already, or read-only storage: harmless either way
                remove_entry(p)


