"""Load a finished (or stopped) run back: its saved config (config/saved.py), its data, a
checkpoint's weights."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from omegaconf import OmegaConf
from torch import nn

from .. import native
from ..config import saved_config, validate_config
from ..data import ForecastData, build_data
from ..datasets import require as require_dataset
from ..model import build_model
from ..probabilistic.bands import FILE, Bands, read_bands
from ..training.checkpoint import RunError, load_checkpoint
from ..training.runtime import resolve_device, seed_everything

CHECKPOINTS = ("best", "last")


@dataclass
class LoadedRun:
    run_dir: Path
    config: dict  # the composed config, resolved
    data: ForecastData | None
    model: nn.Module  # in eval mode, holding the checkpoint's weights
    checkpoint: dict
    checkpoint_name: str = "best"  # best | last

    @cached_property
    def bands(self) -> Bands | None:
        """The run's conformal bands (probabilistic/bands.py), read once, or None; a damaged
        bands.json is one line (RunError)."""
        try:
            return read_bands(self.run_dir)
        except (ValueError, KeyError, TypeError) as err:  # json's errors are ValueErrors
            raise RunError(f"{self.run_dir / FILE}: not readable ({err}); delete it to "
                           f"predict without bands, or retrain") from None


def load_run(
    run_dir: Path,
    checkpoint: str = "best",
    device: str | None = None,
    with_data: bool = True,
    allow_changed_data: bool = False,
) -> LoadedRun:
    """A run's config, data (unless `with_data=False`: predict brings its own) and model with
    the checkpoint's weights. A CSV run's data is rebuilt from the split rows and scaler saved
    in the checkpoint; if the file's rows changed since, that is refused unless
    `allow_changed_data` (see data.csv_data). One-line RunError/CheckpointError/ConfigError/
    DataError."""
    run_dir = Path(run_dir)
    if checkpoint not in CHECKPOINTS:
        raise RunError(f"checkpoint={checkpoint!r} is not allowed: choose one of best, last")
    config_path = run_dir / ".hydra" / "config.yaml"
    saved = saved_config(run_dir)
    validate_config(saved, trains=False)  # read to be scored, wherever it trained
    config = OmegaConf.to_container(saved, resolve=True, enum_to_str=True)

    ckpt_path = run_dir / "checkpoints" / f"{checkpoint}.pt"
    if not ckpt_path.is_file():
        raise RunError(f"{ckpt_path}: no {checkpoint} checkpoint in this run dir")
    state = load_checkpoint(ckpt_path)

    torch_device = resolve_device(device or config["trainer"]["device"])
    seed_everything(config["seed"])
    data = None
    if with_data:
        require_dataset(config)
        data = build_data(
            config["data"],
            config["seed"],
            torch_device,
            saved=state.get("data_state"),
            allow_changed=allow_changed_data,
        )
    data_state = state.get("data_state") or {}
    # the columns read, then the calendar features (data.time_features)
    n_features = len(data_state.get("columns", [None])) + len(data_state.get("time_features", []))
    n_targets = data_state.get("n_targets", 1)
    # The kernels the run asked for, on this device (a run evaluated where it trained scores
    # what it scored then).
    kernels = native.resolve(config["trainer"]["kernels"], torch_device)
    model = build_model(config, n_features, n_targets, kernels).to(torch_device)
    try:
        model.load_state_dict(state["model"])
    except (RuntimeError, KeyError) as err:
        first = str(err).strip().splitlines()
        detail = first[1].strip() if len(first) > 1 else first[0]
        raise RunError(f"{ckpt_path} does not match {config_path}: {detail}") from None
    return LoadedRun(run_dir, config, data, model.eval(), state, checkpoint)
