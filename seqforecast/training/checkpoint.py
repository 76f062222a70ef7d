"""Checkpoints: written atomically, read with `weights_only=True`, refused with one clear line."""

from __future__ import annotations

from pathlib import Path

import torch

from .files import atomic_write

FORMAT = "seqforecast-checkpoint-2"
# Each former format, and what reading it as the next one takes (applied in order, once, when a
# checkpoint is loaded). 1 -> 2: the kernel set a run used was not recorded (None: unknown).
UPGRADES = {"seqforecast-checkpoint-1": ("seqforecast-checkpoint-2", {"kernels": None})}


class RunError(RuntimeError):
    """A run dir that cannot be loaded; str(err) is the one line to show."""


class CheckpointError(RuntimeError):
    """str(err) names the file and what is wrong with it."""


def save_checkpoint(path: Path, state: dict) -> None:
    """Atomic: a crash mid-write leaves the previous checkpoint intact."""
    atomic_write(path, lambda f: torch.save({"format": FORMAT, **state}, f))


def error_line(err: Exception) -> str:
    """An exception's first line (its type where it says nothing): the reason in one line."""
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def load_checkpoint(path: Path, map_location="cpu") -> dict:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # any unreadable file: truncated, foreign, or unsafe to unpickle
        raise CheckpointError(
            f"{path}: not a readable seqforecast checkpoint (truncated, or not a torch file "
            f"that loads with weights_only=True): {error_line(err)}"
        ) from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: not a seqforecast checkpoint (format != {FORMAT})")
    while state.get("format") in UPGRADES:
        newer, added = UPGRADES[state["format"]]
        state = {**added, **state, "format": newer}
    if state.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not a seqforecast checkpoint (format != {FORMAT})")
    return state
