"""Checkpoints in the directory layouts training frameworks write, read from a listing alone.

Each layout says which entries of a directory are checkpoints, their step, and
when each became complete; an entry that is not complete yet (a save in
progress, an abandoned temporary directory) is `pending` and looked at again.
Nothing here opens a checkpoint's data: only names, sizes and modification
times, and the few small marker files a framework writes to say which
checkpoint is the latest (read bounded by the caller).

Sources of each layout (the frameworks' own code; tests/cases/checkpoints
names the same for each recorded listing):
- hf_trainer: `checkpoint-<global_step>/` holding `trainer_state.json` (transformers
  src/transformers/trainer.py `_save_checkpoint`, trainer_utils.PREFIX_CHECKPOINT_DIR = "checkpoint",
  trainer_callback.TrainerState.save_to_json, TRAINER_STATE_NAME = "trainer_state.json").
- lightning: `<name>.ckpt` whose name holds `step=<N>` (and `epoch=<E>`), and `last.ckpt`
  (Lightning-AI/pytorch-lightning src/lightning/pytorch/callbacks/model_checkpoint.py: default filename
  "{epoch}-{step}", CHECKPOINT_EQUALS_CHAR "=", CHECKPOINT_JOIN_CHAR "-", CHECKPOINT_NAME_LAST "last",
  FILE_EXTENSION ".ckpt"); NeMo 2 writes the same names as directories holding `weights/` and `context/`
  (NVIDIA/NeMo nemo/lightning/ckpt_utils.py WEIGHTS_PATH, CONTEXT_PATH; `-last` copies,
  nemo/lightning/pytorch/callbacks/model_checkpoint.py).
- megatron: `iter_<7-digit iteration>/` beside `latest_checkpointed_iteration.txt`, which names the
  latest complete iteration (NVIDIA/Megatron-LM megatron/training/checkpointing.py get_checkpoint_name,
  get_checkpoint_tracker_filename; the tracker is written after every rank saved).
- deepspeed: `global_step<N>/` (the default tag) beside `latest`, which names the latest complete tag
  (microsoft/DeepSpeed deepspeed/runtime/engine.py save_checkpoint: tag = f"global_step{...}", `latest`
  written after the save when save_latest).
- dcp: `step-<N>/` holding `.metadata`, which torch.distributed.checkpoint's FileSystemWriter writes
  last (as `.metadata.tmp`, then renamed) (pytorch/torchtitan torchtitan/components/checkpointer/dcp.py
  `_create_checkpoint_id` "step-{step}", `_find_load_step` requires `.metadata`; torch
  torch/distributed/checkpoint/filesystem.py `_metadata_fn`).
- orbax: `<step>/` or `<prefix>_<step>/`; a save in progress is `<name>.orbax-checkpoint-tmp*` and is
  renamed when complete; on object stores `commit_success.txt` marks it (google/orbax
  checkpoint/orbax/checkpoint/_src/path/atomicity_types.py TMP_DIR_SUFFIX, COMMIT_SUCCESS_FILE;
  _src/path/step.py step name formats); a step directory is known by `_CHECKPOINT_METADATA`,
  `commit_success.txt` or an item directory holding `_METADATA`. Flax's legacy `checkpoint_<step>` too.
- keras: the file names of a ModelCheckpoint `filepath` template such as "ckpt-{epoch:02d}.keras"
  (keras-team/keras keras/src/callbacks/model_checkpoint.py: filepath.format(epoch=epoch + 1, batch=...,
  **logs); `.keras`, `.h5` or `.weights.h5`): the templates are settings, the step the epoch (or batch).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import NamedTuple

LAYOUTS = ("hf_trainer", "lightning", "megatron", "deepspeed", "dcp", "orbax", "keras")

# Files of a checkpoint directory looked at for its completion time: a framework writes them flat or one
# level down (mp_rank_00/, pytorch_model_fsdp_0/, an Orbax item); deeper ones are not read.
CONTENT_DEPTH = 2


class Entry(NamedTuple):
    """One directory entry as lstat saw it (a symlink is neither a file nor a directory here). A tuple: a walk
    makes one per entry, and a frozen dataclass costs several times as much to make."""

    name: str
    is_dir: bool
    is_file: bool
    mtime: float  # a file's; NaN for anything else (only files are looked up: a directory's type is in its entry)
    size: int = 0


class Found(NamedTuple):
    """A checkpoint: its layout, step (None where the name does not give it), completion time and save time."""

    layout: str
    name: str  # the entry's name in its directory
    step: float | None
    time: float
    save_s: float | None


# Tuples a walk makes one of per entry or checkpoint (Entry, Found, Point) are made by tuple's own constructor:
# NamedTuple's generated __new__ is a Python call.
new_tuple = tuple.__new__


@dataclass
class Listing:
    """A directory's entries, and what the caller can read below it on demand."""

    entries: list[Entry]
    # The entries of a subdirectory (None when it cannot be listed).
    below: Callable[[str], list[Entry] | None]
    # The first bytes of a small file of this directory (None when it cannot be read).
    read_small: Callable[[str], str | None]


@dataclass
class Result:
    found: list[Found] = field(default_factory=list)
    # Entries that look like a checkpoint still being written: looked at again on the next pass.
    pending: list[str] = field(default_factory=list)
    # Entries that belong to a layout and need no further descent.
    claimed: set[str] = field(default_factory=set)


_HF = re.compile(r"^checkpoint-(\d+)$")
_LIGHTNING_STEP = re.compile(r"(?:^|[-_])step=(\d+)")
_LIGHTNING_LAST = re.compile(r"^(?:.*-)?last(?:-v\d+)?(?:\.ckpt)?$")
_MEGATRON = re.compile(r"^iter_(\d{7,})$")
_DEEPSPEED = re.compile(r"^global_step(\d+)$")
_DCP = re.compile(r"^step-(\d+)$")
_ORBAX = re.compile(r"^(?:[A-Za-z][\w.-]*_)?(\d+)$")
_ORBAX_TMP = ".orbax-checkpoint-tmp"
_ORBAX_MARKERS = ("_CHECKPOINT_METADATA", "commit_success.txt")
# A Lightning `last` save made this soon after a step-named one is a copy of it, not another save.
_SAME_SAVE_S = 5.0


def _times(listing: Listing, name: str, depth: int = 1) -> tuple[float, float] | None:
    """(first, last) modification time of the files in a checkpoint directory, CONTENT_DEPTH levels down."""
    entries = listing.below(name)
    if entries is None:
        return None
    # Kept as the walk goes, not gathered into a list for min() and max(): a first pass asks once per checkpoint,
    # and most checkpoint directories hold a few files.
    first = last = None
    for e in entries:
        if e.is_file:
            lo = hi = e.mtime
        elif e.is_dir and depth < CONTENT_DEPTH:
            inner = _times(listing, f"{name}/{e.name}", depth + 1)
            if inner is None:
                continue
            lo, hi = inner
        else:
            continue
        if first is None or lo < first:
            first = lo
        if last is None or hi > last:
            last = hi
    return None if first is None or last is None else (first, last)


# An entry's name, taken in C (map(_name, entries)): a layout asks once per checkpoint whether a file is there.
_name = attrgetter("name")


def _names(entries: Sequence[Entry]) -> dict[str, Entry]:
    return {e.name: e for e in entries}


def _tracked(listing: Listing, tracker: str) -> str | None:
    text = listing.read_small(tracker)
    return None if text is None else text.strip()


def _step_dirs(listing: Listing, result: Result, pattern: re.Pattern[str]) -> Iterator[tuple[Entry, int]]:
    """The directories named as the layout's steps (`pattern`'s group 1 is the step), each claimed by it, and
    their steps."""
    for e in listing.entries:
        m = pattern.match(e.name)
        if m and e.is_dir:
            result.claimed.add(e.name)
            yield e, int(m.group(1))


def hf_trainer(listing: Listing, result: Result) -> None:
    for e, step in _step_dirs(listing, result, _HF):
        inside = listing.below(e.name)
        if inside is None or "trainer_state.json" not in map(_name, inside):
            result.pending.append(e.name)
            continue
        times = _times(listing, e.name)
        if times is not None:
            result.found.append(new_tuple(Found, ("hf_trainer", e.name, float(step), times[1], times[1] - times[0])))


def lightning(listing: Listing, result: Result) -> None:
    named: list[Found] = []
    lasts: list[Entry] = []
    for e in listing.entries:
        is_ckpt_file = e.is_file and e.name.endswith(".ckpt")
        stem = e.name[: -len(".ckpt")] if is_ckpt_file else e.name
        step = _LIGHTNING_STEP.search(stem)
        last = _LIGHTNING_LAST.match(stem) is not None
        if not is_ckpt_file:
            # NeMo 2: the same names as directories holding weights/ and context/.
            if not (e.is_dir and (step or stem.endswith("-last"))):
                continue
            inside = listing.below(e.name)
            if inside is None or not {"weights", "context"} <= set(_names(inside)):
                continue
        result.claimed.add(e.name)
        if last:
            lasts.append(e)
            continue
        if step is None:
            continue
        if is_ckpt_file:
            named.append(Found("lightning", e.name, float(step.group(1)), e.mtime, None))
            continue
        times = _times(listing, e.name)
        if times is None:
            result.pending.append(e.name)
        else:
            named.append(Found("nemo", e.name, float(step.group(1)), times[1], times[1] - times[0]))
    for e in lasts:
        time = e.mtime
        if e.is_dir:
            times = _times(listing, e.name)
            if times is None:
                result.pending.append(e.name)
                continue
            time = times[1]
        # Lightning writes last.ckpt (NeMo its -last copy) right after the save it copies: one save, not two.
        same = [f for f in named if 0 <= time - f.time <= _SAME_SAVE_S]
        if same:
            twin = max(same, key=lambda f: f.time)
            began = twin.time - (twin.save_s or 0.0)
            named[named.index(twin)] = Found(twin.layout, twin.name, twin.step, time, time - began)
        else:
            named.append(Found("lightning" if e.is_file else "nemo", e.name, None, time, None))
    result.found.extend(named)


def megatron(listing: Listing, result: Result) -> None:
    tracker = _names(listing.entries).get("latest_checkpointed_iteration.txt")
    latest_text = _tracked(listing, tracker.name) if tracker is not None and tracker.is_file else None
    latest = int(latest_text) if latest_text is not None and latest_text.isdigit() else None
    _steps_up_to_marker(listing, result, "megatron", _MEGATRON, tracker, latest)


def deepspeed(listing: Listing, result: Result) -> None:
    marker = _names(listing.entries).get("latest")
    tag = _tracked(listing, "latest") if marker is not None and marker.is_file else None
    tag_match = _DEEPSPEED.match(tag or "")
    latest = int(tag_match.group(1)) if tag_match else None
    _steps_up_to_marker(listing, result, "deepspeed", _DEEPSPEED, marker, latest)


def _steps_up_to_marker(listing: Listing, result: Result, layout: str, pattern: re.Pattern[str],
                        marker: Entry | None, latest: int | None) -> None:
    """Step directories (`pattern`'s group 1 is the step) beside a marker file naming the latest complete step
    (`latest`, None when there is no readable marker). The marker moves only once a save is complete (Megatron's
    tracker after every rank saved, DeepSpeed's `latest` after the save), so a step past it is still being
    written, and the latest step became complete when the marker was written."""
    for e, step in _step_dirs(listing, result, pattern):
        if latest is None or step > latest:
            result.pending.append(e.name)
            continue
        times = _times(listing, e.name)
        if times is None:
            continue
        done = marker.mtime if step == latest and marker is not None else times[1]
        result.found.append(Found(layout, e.name, float(step), max(done, times[1]), times[1] - times[0]))


def dcp(listing: Listing, result: Result) -> None:
    for e, step in _step_dirs(listing, result, _DCP):
        inside = listing.below(e.name)
        metadata = _names(inside or []).get(".metadata")
        if metadata is None or not metadata.is_file:
            result.pending.append(e.name)
            continue
        times = _times(listing, e.name)
        first = times[0] if times else metadata.mtime
        result.found.append(Found("dcp", e.name, float(step), metadata.mtime, metadata.mtime - first))


def orbax(listing: Listing, result: Result) -> None:
    for e in listing.entries:
        if _ORBAX_TMP in e.name:
            # A save in progress (or abandoned): never a checkpoint, and nothing to descend into.
            result.claimed.add(e.name)
            continue
        m = _ORBAX.match(e.name)
        if not (m and e.is_dir):
            continue
        inside = listing.below(e.name)
        if inside is None:
            continue
        names = _names(inside)
        marked = any(k in names for k in _ORBAX_MARKERS) or any(
            item.is_dir and "_METADATA" in _names(listing.below(f"{e.name}/{item.name}") or [])
            for item in inside
        )
        if not marked:
            continue
        result.claimed.add(e.name)
        times = _times(listing, e.name)
        if times is None:
            continue
        commit = names.get("commit_success.txt")
        done = max(times[1], commit.mtime) if commit is not None and commit.is_file else times[1]
        result.found.append(Found("orbax", e.name, float(m.group(1)), done, done - times[0]))


def keras_matcher(templates: Sequence[str]) -> Callable[[Listing, Result], None]:
    """The keras layout for ModelCheckpoint filepath templates (their file name part)."""
    patterns = [_template_regex(t) for t in templates]

    def keras(listing: Listing, result: Result) -> None:
        for e in listing.entries:
            if not e.is_file:
                continue
            for pattern in patterns:
                m = pattern.match(e.name)
                if m is None:
                    continue
                result.claimed.add(e.name)
                step = m.groupdict().get("batch") or m.groupdict().get("epoch")
                result.found.append(Found("keras", e.name, float(step) if step else None, e.mtime, None))
                break

    return keras


_FIELD = re.compile(r"\{(\w+)(?::[^}]*)?\}")


def _template_regex(template: str) -> re.Pattern[str]:
    """"ckpt-{epoch:02d}-{val_loss:.2f}.keras" as a regex: epoch and batch captured, other fields any text."""
    name = template.rsplit("/", 1)[-1]
    out, at = [], 0
    seen: set[str] = set()
    for m in _FIELD.finditer(name):
        out.append(re.escape(name[at : m.start()]))
        field_name = m.group(1)
        if field_name in ("epoch", "batch") and field_name not in seen:
            out.append(f"(?P<{field_name}>\\d+)")
            seen.add(field_name)
        else:
            out.append(".+?")
        at = m.end()
    out.append(re.escape(name[at:]))
    return re.compile("^" + "".join(out) + "$")


_BUILT: dict[str, Callable[[Listing, Result], None]] = {
    "hf_trainer": hf_trainer,
    "lightning": lightning,
    "megatron": megatron,
    "deepspeed": deepspeed,
    "dcp": dcp,
    "orbax": orbax,
}


def detectors(layouts: Sequence[str], keras_templates: Sequence[str]) -> list[Callable[[Listing, Result], None]]:
    found = [_BUILT[name] for name in layouts if name in _BUILT]
    if "keras" in layouts and keras_templates:
        found.append(keras_matcher(keras_templates))
    return found


def detect(listing: Listing, found_by: Sequence[Callable[[Listing, Result], None]]) -> Result:
    """Every checkpoint of one directory, by every layout asked for."""
    result = Result()
    for detector in found_by:
        detector(listing, result)
    return result
