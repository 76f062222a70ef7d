"""A saved run's config, read back as the current version: .hydra/config.yaml through the
migrations (migrations.py), and the option each group was composed from (.hydra/hydra.yaml)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..training.checkpoint import RunError
from .migrations import former_name, migrate


def saved_config(run_dir: Path) -> DictConfig:
    """The composed config a run saved in .hydra/config.yaml (interpolations kept), migrated
    to the current version (config/migrations.py)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunError(f"run_dir={str(run_dir)!r}: no such directory")
    config_path = run_dir / ".hydra" / "config.yaml"
    if not config_path.is_file():
        raise RunError(f"{config_path}: missing; is {run_dir} a seqforecast run dir?")
    try:
        config = OmegaConf.load(config_path)
        OmegaConf.to_container(config, resolve=True)  # every interpolation resolves
    except OmegaConfBaseException as err:
        raise RunError(f"{config_path}: unreadable config: {str(err).splitlines()[0]}") from None
    return migrated(config)


def migrated(config: DictConfig) -> DictConfig:
    """A saved config (interpolations kept) as the current version."""
    return OmegaConf.create(migrate(OmegaConf.to_container(config, resolve=False)))


def run_choices(choices: Mapping) -> dict[str, str]:
    """Group -> option of the run's own groups, from Hydra's `runtime.choices` (Hydra's
    internal groups and the schema groups left out)."""
    return {g: str(o) for g, o in choices.items() if not g.startswith(("hydra", "schema"))}


def saved_choices(run_dir: Path) -> dict[str, str]:
    """Group -> option the run was composed from (from .hydra/hydra.yaml; empty if absent),
    each by its current name."""
    path = Path(run_dir) / ".hydra" / "hydra.yaml"
    if not path.is_file():
        return {}
    choices = run_choices(OmegaConf.load(path).hydra.runtime.choices)
    return {g: former_name(f"{g}.name", o) or o for g, o in choices.items()}


def saved_overrides(run_dir: Path) -> list[str] | None:
    """The command-line overrides the run was made with (its .hydra/overrides.yaml, which
    resuming leaves as it was), or None where the run dir has none."""
    path = Path(run_dir) / ".hydra" / "overrides.yaml"
    return [str(o) for o in OmegaConf.load(path)] if path.is_file() else None
