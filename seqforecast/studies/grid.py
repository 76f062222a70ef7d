"""A study's grid: which models, which cells of each, which values of one swept option, which
seeds; read from a YAML file (this folder's `<name>.yaml`, or a path of one's own).

    title: ...
    sweep: {group: attention}        # the option swept; its first value is the reference
    seeds: [0, 1, 2]
    models:
      <model>:
        overrides: [experiment=patchtst, ...]   # every job of the model
        values: [vanilla, probsparse, ...]      # the swept option's values in this model
        published: patchtst                     # optional: each cell gets the published
                                                # settings of its dataset= and out_len=
        cells:
          <cell>: [dataset=etth1, out_len=96]   # one multirun each: values x seeds

A job is (model, cell, value, seed); its run dir is <study dir>/<model>/<cell>/<value>-seed<seed>,
so the same grid run again finds the jobs it already finished (skip_completed=true).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..options import ConfigError
from ..published import published_overrides

STUDIES = Path(__file__).resolve().parent


class StudyError(ConfigError):
    """A study file or a study argument that cannot be used; str() is the one line."""


@dataclass(frozen=True)
class Cell:
    model: str
    name: str
    overrides: tuple[str, ...]  # the model's, the published settings, then the cell's

    @property
    def label(self) -> str:
        return f"{self.model}/{self.name}"


@dataclass(frozen=True)
class Study:
    name: str
    title: str
    group: str  # the swept config group, e.g. attention
    seeds: tuple[int, ...]
    values: dict[str, tuple[str, ...]]  # model -> the swept values, the reference first
    cells: tuple[Cell, ...]

    def reference(self, model: str) -> str:
        return self.values[model][0]

    def select(self, models: list[str] | None, cells: list[str] | None) -> list[Cell]:
        """The cells of the named models and cells (`etth1-96` or `patchtst/etth1-96`)."""
        known_models = list(self.values)
        for model in models or []:
            if model not in known_models:
                raise StudyError(f"models={model!r} is not in study {self.name!r}: choose from "
                                 f"{', '.join(known_models)}")
        names = {c.name for c in self.cells} | {c.label for c in self.cells}
        for cell in cells or []:
            if cell not in names:
                raise StudyError(f"cells={cell!r} is not in study {self.name!r}: choose from "
                                 f"{', '.join(c.label for c in self.cells)}")
        return [c for c in self.cells
                if (not models or c.model in models)
                and (not cells or c.name in cells or c.label in cells)]


def study_path(name: str) -> Path:
    path = Path(name)
    if path.suffix in (".yaml", ".yml"):
        if not path.is_file():
            raise StudyError(f"{name}: no such study file")
        return path
    path = STUDIES / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in STUDIES.glob("*.yaml"))
        raise StudyError(f"study {name!r} is not known: choose from {', '.join(known)}, "
                         f"or give a .yaml file of your own")
    return path


def load_study(name: str) -> Study:
    path = study_path(name)
    try:
        raw = OmegaConf.to_container(OmegaConf.load(path))
        models = raw["models"]
        cells = tuple(
            Cell(model, cell, (*spec["overrides"],
                               *_published(spec.get("published"), cell, extra), *extra))
            for model, spec in models.items()
            for cell, extra in spec["cells"].items()
        )
        study = Study(
            name=path.stem,
            title=raw.get("title", path.stem),
            group=raw["sweep"]["group"],
            seeds=tuple(int(s) for s in raw["seeds"]),
            values={model: tuple(spec["values"]) for model, spec in models.items()},
            cells=cells,
        )
    except ConfigError as err:
        raise StudyError(f"{path}: {err}") from None
    except (OmegaConfBaseException, KeyError, TypeError, ValueError, AttributeError) as err:
        raise StudyError(f"{path}: not a study file ({type(err).__name__}: {err}); see "
                         f"{STUDIES / 'attention.yaml'}") from None
    if not study.cells or not all(study.values.values()) or not study.seeds:
        raise StudyError(f"{path}: a study needs models with cells and values, and seeds")
    return study


def _published(model: str | None, cell: str, overrides: list[str]) -> list[str]:
    """The published settings of `model` for the cell's dataset= and out_len= (none without
    `published:`); they come before the cell's own overrides, which may change them."""
    if model is None:
        return []
    given = dict(o.partition("=")[::2] for o in overrides)
    if "dataset" not in given or "out_len" not in given:
        raise ConfigError(f"cell {cell!r} needs dataset= and out_len= for the published "
                          f"{model}'s settings")
    return published_overrides(model, given["dataset"], int(given["out_len"]))
