"""Every random number generator a run uses, as checkpointable state (weights_only-safe:
tensors, ints, lists and strings only)."""

from __future__ import annotations

import random

import numpy as np
import torch


def capture_rng() -> dict:
    kind, keys, pos, has_gauss, cached_gauss = np.random.get_state()
    version, internal, gauss = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gauss": float(cached_gauss),
        },
        "python": {"version": version, "internal": list(internal), "gauss": gauss},
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np_state = state["numpy"]
    np.random.set_state(
        (
            np_state["kind"],
            np_state["keys"].numpy().astype(np.uint32),
            np_state["pos"],
            np_state["has_gauss"],
            np_state["cached_gauss"],
        )
    )
    py = state["python"]
    random.setstate((py["version"], tuple(py["internal"]), py["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
