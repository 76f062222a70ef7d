"""A study's grid: which models, which cells of each, which values of one swept option, which
seeds; read from a YAML file (this folder's `<name>.yaml`, or a path of one's own).

    title: ...
    sweep: {group: attention}        # the option swept; its first value is the reference
    seeds: [0, 1, 2]
    lookback:                        # optional: the searched-lookback track
      fixed: 96                      # every cell's in_len (the fixed track)
      search: [96, 192, 336, 512]    # the candidates, the same for every value (arm)
      cells: [etth1-96, ettm1-336]   # the cells that search it (omitted: every cell)
    references:                      # optional: rows scored beside the study's, trained by
      linear: true                   # none of its jobs (references.py)
    models:
      <model>:
        overrides: [experiment=patchtst, ...]   # every job of the model
        values: [vanilla, probsparse, ...]      # the swept option's values in this model,
                                                # or named sets of overrides, each a value:
                                                # {preset: [], alone: [model.linear_path=none]}
        axis: time                              # what the swept position's tokens are: time
                                                # (steps, patches) or variates (channels)
        published: patchtst                     # optional: each cell gets the published
                                                # settings of its dataset= and out_len=
        cells:
          <cell>: [dataset=etth1, out_len=96]   # one multirun each: values x seeds
        datasets: [etth1, etth2]                # and/or: a cell <dataset>-<horizon> each,
        horizons: [96, 192, 336, 720]           # horizons a list, or `published`: each
                                                # dataset's published horizons

A job is (model, cell, value, seed); its run dir is <study dir>/<model>/<cell>/<value>-seed<seed>,
so the same grid run again finds the jobs it already finished (skip_completed=true). A cell that
searches the lookback has a cell `<cell>-L<n>` for each other candidate n (in_len=n); its fixed
lookback's runs are the cell's own. The report picks, per value, cell and seed, the candidate
with the lowest validation MSE (studies/report.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from ..options import ConfigError
from ..published import horizons as published_horizons
from ..published import published_overrides
from .references import References

STUDIES = Path(__file__).resolve().parent


class StudyError(ConfigError):
    """A study file or a study argument that cannot be used; str() is the one line."""


AXES = ("time", "variates")  # what the tokens at the swept position are


@dataclass(frozen=True)
class Cell:
    model: str
    name: str
    overrides: tuple[str, ...]  # the model's, the published settings, then the cell's
    searches: str | None = None  # a lookback candidate's: the cell whose lookback it searches
    lookback: int | None = None  # its in_len where the study sets the lookback

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
    axes: dict[str, str] | None = None  # model -> the axis its swept position attends along
    references: References | None = None  # the rows scored beside the study's (references.py)
    # model -> value -> its overrides, for a model whose values are named sets of overrides
    # rather than options of the swept group (which then only names the column)
    value_sets: dict[str, dict[str, tuple[str, ...]]] | None = None

    def axis(self, model: str) -> str:
        return (self.axes or {}).get(model, "time")

    def fixed_cells(self) -> list[Cell]:
        """The cells of the fixed track (not lookback candidates)."""
        return [c for c in self.cells if c.searches is None]

    def candidates(self, cell: Cell) -> list[Cell]:
        """`cell` and the cells that search its lookback, in lookback order (just `cell`
        where it searches none)."""
        found = [cell, *(c for c in self.cells
                         if c.searches == cell.name and c.model == cell.model)]
        return sorted(found, key=lambda c: c.lookback or 0)

    def reference(self, model: str) -> str:
        return self.values[model][0]

    def value_overrides(self, model: str, value: str) -> list[str]:
        """What a job of `value` adds to its cell's overrides: `<group>=<value>`, or the value's
        own overrides where the model's values are named sets of them."""
        sets = (self.value_sets or {}).get(model)
        return list(sets[value]) if sets is not None else [f"{self.group}={value}"]

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
        def named(c: Cell) -> bool:  # a lookback candidate goes with the cell it searches
            return not cells or bool({c.name, c.label, c.searches,
                                      f"{c.model}/{c.searches}"} & set(cells))

        return [c for c in self.cells if (not models or c.model in models) and named(c)]


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
        lookback = raw.get("lookback")
        cells = tuple(
            cell
            for model, spec in models.items()
            for name, extra in _cells(model, spec).items()
            for cell in _lookback_cells(model, name, (
                *spec["overrides"], *_published(spec.get("published"), name, extra), *extra),
                lookback)
        )
        axes = {model: spec.get("axis", "time") for model, spec in models.items()}
        for model, axis in axes.items():
            if axis not in AXES:
                raise ConfigError(f"models.{model}.axis={axis!r} is not allowed: choose one of "
                                  f"{', '.join(AXES)}")
        study = Study(
            name=path.stem,
            title=raw.get("title", path.stem),
            group=raw["sweep"]["group"],
            seeds=tuple(int(s) for s in raw["seeds"]),
            values={model: tuple(spec["values"]) for model, spec in models.items()},
            value_sets=_value_sets(models),
            cells=cells,
            axes=axes,
            references=References.parse(raw.get("references"), list(models)),
        )
    except ConfigError as err:
        raise StudyError(f"{path}: {err}") from None
    except (OmegaConfBaseException, KeyError, TypeError, ValueError, AttributeError) as err:
        raise StudyError(f"{path}: not a study file ({type(err).__name__}: {err}); see "
                         f"{STUDIES / 'attention.yaml'}") from None
    searched = (lookback or {}).get("cells") or []
    names = {c.name for c in cells} | {c.label for c in cells}
    unknown = [c for c in searched if c not in names]
    if unknown:
        raise StudyError(f"{path}: lookback.cells names {', '.join(unknown)}, which no model "
                         f"has: choose from {', '.join(c.label for c in study.fixed_cells())}")
    if not study.cells or not all(study.values.values()) or not study.seeds:
        raise StudyError(f"{path}: a study needs models with cells and values, and seeds")
    return study


def _value_sets(models: dict) -> dict[str, dict[str, tuple[str, ...]]]:
    """The models whose values are named sets of overrides ({name: [overrides]})."""
    found = {}
    for model, spec in models.items():
        if isinstance(spec["values"], dict):
            for name, overrides in spec["values"].items():
                if not (isinstance(overrides, list) and all(isinstance(o, str) and "=" in o
                                                            for o in overrides)):
                    raise ConfigError(f"models.{model}.values.{name}={overrides!r} is not "
                                      f"allowed: a list of key=value overrides (or [])")
            found[model] = {name: tuple(o) for name, o in spec["values"].items()}
    return found


def _cells(model: str, spec: dict) -> dict[str, list[str]]:
    """A model's cells: those it names, then <dataset>-<horizon> for its datasets x horizons
    (`horizons: published`: each dataset's published horizons)."""
    cells = {name: list(extra) for name, extra in (spec.get("cells") or {}).items()}
    datasets, horizons = spec.get("datasets") or [], spec.get("horizons")
    if bool(datasets) != (horizons is not None):
        raise ConfigError(f"models.{model}: give datasets and horizons together")
    for dataset in datasets:
        if horizons == "published":
            if not spec.get("published"):
                raise ConfigError(f"models.{model}.horizons=published needs published: <model>")
            steps = published_horizons(spec["published"], dataset)
            if not steps:
                raise ConfigError(f"models.{model}: the published {spec['published']} has no "
                                  f"horizons for dataset={dataset}")
        elif isinstance(horizons, list) and horizons and all(
                type(h) is int and h > 0 for h in horizons):
            steps = horizons
        else:
            raise ConfigError(f"models.{model}.horizons={horizons!r} is not allowed: a list of "
                              f"steps, e.g. [96, 192, 336, 720], or published")
        for step in steps:
            cells.setdefault(f"{dataset}-{step}", [f"dataset={dataset}", f"out_len={step}"])
    return cells


def _lookback_cells(model: str, name: str, overrides: tuple[str, ...],
                    lookback: dict | None) -> list[Cell]:
    """The cell, at the study's fixed lookback where it sets one, and a cell for each other
    candidate where it searches this cell's lookback."""
    if not lookback:
        return [Cell(model, name, overrides)]
    fixed, search = lookback.get("fixed"), list(lookback.get("search") or [])
    for key, given in (("fixed", [fixed]), ("search", search)):
        if not given or not all(type(n) is int and n > 0 for n in given):
            raise ConfigError(f"lookback.{key}={lookback.get(key)!r} is not allowed: "
                              f"{'steps' if key == 'fixed' else 'a list of steps'} > 0, e.g. "
                              f"{'96' if key == 'fixed' else '[96, 192, 336, 512]'}")
    if fixed not in search:
        raise ConfigError(f"lookback.search={search} must hold lookback.fixed={fixed}: the "
                          f"fixed track's runs are one of the search's candidates")
    cell = Cell(model, name, (*overrides, f"in_len={fixed}"), lookback=fixed)
    searched = lookback.get("cells")
    if searched is not None and name not in searched and f"{model}/{name}" not in searched:
        return [cell]
    return [cell, *(Cell(model, f"{name}-L{n}", (*overrides, f"in_len={n}"), searches=name,
                         lookback=n) for n in search if n != fixed)]


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
