"""Finding run dirs, reading what each one reported, and grouping them by variant.

A run dir is a directory holding `.hydra/config.yaml`. Paths given may be run dirs, sweep
dirs or any folder above them (searched recursively), or glob patterns. A run counts when
its status.json says `completed` and its metrics.json has the split compared; the others are
listed with the reason, never averaged.

Runs are grouped by the config values that differ between them, except `seed` and values
that cannot change a result (logging, threads, evaluation batch size, device). A group is
named by the command-line overrides its runs share beyond those common to every run (e.g.
`attention=diff`), or, where those do not tell groups apart, by the differing values.
"""

from __future__ import annotations

import glob
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from ..config import saved_config
from ..options import ConfigError
from ..training.checkpoint import RunError
from ..training.status import read_status

RUN_MARKER = Path(".hydra") / "config.yaml"
# Config keys that never make two runs different variants.
IGNORED_KEYS = {"seed", "resume", "device", "trainer.device", "trainer.num_threads",
                "trainer.eval_batch_size"}
IGNORED_PREFIXES = ("log.", "intervals.")  # how a run is reported, not what it trains
ABSENT = "<absent>"


class CompareError(ConfigError):
    """Input compare cannot use; str(err) is the one line to show."""


@dataclass
class Run:
    path: Path
    seed: int | None
    config: dict[str, object]  # flattened: {"attention.name": "diff", ...}
    overrides: list[str]
    metrics: dict | None  # metrics.json, when the run counts
    problem: str | None = None  # why it does not count (failed, incomplete, ...)

    @property
    def ok(self) -> bool:
        return self.problem is None


@dataclass
class Group:
    label: str
    key: tuple
    runs: list[Run] = field(default_factory=list)


def find_run_dirs(paths: Sequence[str]) -> list[Path]:
    """Run dirs under the given paths (globs expanded), in order, each once."""
    found: list[Path] = []
    for pattern in paths:
        matches = sorted(glob.glob(pattern)) if glob.has_magic(pattern) else [pattern]
        if not matches or not all(Path(m).exists() for m in matches):
            raise CompareError(f"{pattern}: no such file or directory")
        for match in matches:
            path = Path(match)
            if (path / RUN_MARKER).is_file():
                found.append(path)
            else:
                found.extend(sorted((p.parents[1] for p in path.rglob(str(RUN_MARKER))),
                                    key=_natural))
    unique = list(dict.fromkeys(p.resolve() for p in found))
    if not unique:
        raise CompareError(
            f"no run dirs under {', '.join(paths)} (a run dir holds {RUN_MARKER}); give run or "
            f"sweep dirs, e.g. outputs/multirun/<date>/<time>"
        )
    return unique


def _natural(path: Path) -> list:
    """Sort key: job dirs 2_... before 10_..."""
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def flatten(config: Mapping, prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = tuple(value) if isinstance(value, list) else value
    return flat


NO_STATUS = "incomplete: no status.json (still running, or killed)"


def resumable(problem: str) -> bool:
    """Whether a run that did not complete (`load_run`'s `problem`, or the reason a report
    recorded from it) was stopped rather than failed: interrupted by a signal (its checkpoint
    saved), or killed (or still running) before it wrote a status. The same command goes on
    with it; a failed run (a bad config, a diverged loss) would fail again."""
    return problem == NO_STATUS or problem.startswith("interrupted:")


def load_run(path: Path, split: str) -> Run:
    try:
        config = flatten(OmegaConf.to_container(saved_config(path), resolve=True))
    except RunError as err:
        return Run(path, None, {}, [], None, problem=str(err))
    overrides_path = path / ".hydra" / "overrides.yaml"
    overrides = list(OmegaConf.load(overrides_path)) if overrides_path.is_file() else []
    run = Run(path, config.get("seed"), config, [str(o) for o in overrides], None)
    status = read_status(path)
    if status is None:
        run.problem = NO_STATUS
    elif status.get("status") != "completed":
        run.problem = f"{status.get('status')}: {status.get('reason') or 'no reason recorded'}"
    elif not (path / "metrics.json").is_file():
        run.problem = "incomplete: no metrics.json"
    else:
        metrics = json.loads((path / "metrics.json").read_text())
        if split not in metrics or split not in metrics.get("splits", {}):
            run.problem = (
                f"metrics.json has no {split!r} split (written by an older seqforecast, or a "
                f"dataset without it)"
            )
        else:
            run.metrics = metrics
    return run


def _ignored(key: str) -> bool:
    return key in IGNORED_KEYS or key.startswith(IGNORED_PREFIXES)


def override_key(override: str) -> str:
    """The config key an override sets (`+a.b=1`, `~a.b`, `a.b=1`: `a.b`)."""
    return override.lstrip("+~").partition("=")[0]


def check_comparable(runs: Sequence[Run], split: str) -> None:
    """All counted runs forecast the same dataset and horizon, scored on the same windows."""
    for key, what in (("data.name", "datasets"), ("data.out_len", "horizons")):
        values = _counts(run.config.get(key, ABSENT) for run in runs)
        if len(values) > 1:
            listed = ", ".join(f"{key}={v} ({n} runs)" for v, n in values.items())
            raise CompareError(f"mixed {what}: {listed}; compare runs of one {what[:-1]}")
    prints = _counts(window_prints([run.metrics["splits"][split] for run in runs]))
    if len(prints) > 1:
        differing = [k for k in _differing_keys(runs) if k.startswith("data.")]
        why = f" (they differ in {', '.join(differing)})" if differing else ""
        raise CompareError(
            f"the runs were scored on different {split} windows{why}; compare runs scored on "
            f"the same {split} set"
        )


def window_prints(splits: Sequence[Mapping]) -> list[str | None]:
    """Each run's fingerprint of one split (its entry in metrics.json's `splits`), in a form
    all of them share. Runs on a file record the hash of its cells (`fingerprint`) and, as
    `fingerprint_v1`, the hash of their scaled targets, the only one runs made before
    2026-12-05 record (as `fingerprint`): where such runs are among them, every run is
    compared by that one."""
    former = [info.get("fingerprint_v1") for info in splits]
    if all(f is None for f in former) or all(f is not None for f in former):
        return [info.get("fingerprint") for info in splits]
    return [f if f is not None else info.get("fingerprint")
            for f, info in zip(former, splits, strict=True)]


def _counts(values: Iterable) -> dict:
    counts: dict = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def _differing_keys(runs: Sequence[Run]) -> list[str]:
    keys = sorted({k for run in runs for k in run.config})
    return [
        k for k in keys
        if not _ignored(k) and len({repr(run.config.get(k, ABSENT)) for run in runs}) > 1
    ]


def group_runs(runs: Sequence[Run]) -> list[Group]:
    """Counted runs grouped by the config values that differ (seed excepted), in the order
    their first run appears."""
    differing = _differing_keys(runs)
    groups: dict[tuple, Group] = {}
    for run in runs:
        key = tuple(repr(run.config.get(k, ABSENT)) for k in differing)
        groups.setdefault(key, Group("", key)).runs.append(run)
    _label(list(groups.values()), differing, runs)
    return list(groups.values())


def _label(groups: list[Group], differing: list[str], runs: Sequence[Run]) -> None:
    """Name groups by their distinctive overrides, else by their differing config values."""
    common = set.intersection(*(set(r.overrides) for r in runs)) if runs else set()

    def by_overrides(group: Group) -> str | None:
        labels = {
            " ".join(o for o in r.overrides
                     if o not in common and not _ignored(override_key(o))
                     and not override_key(o).startswith("hydra"))
            for r in group.runs
        }
        return labels.pop() if len(labels) == 1 else None

    labels = [by_overrides(g) for g in groups]
    if None in labels or len(set(labels)) < len(labels):
        labels = [
            " ".join(f"{k}={v}" for k, v in zip(differing, g.key, strict=True)) for g in groups
        ]
    for group, label in zip(groups, labels, strict=True):
        group.label = label or "all runs"


def pick_reference(groups: Sequence[Group], wanted: str | None) -> Group:
    """The group named `wanted` (its label, or a unique group whose label contains it as a
    word); the first group when none is named."""
    if wanted is None:
        return groups[0]
    exact = [g for g in groups if g.label == wanted]
    if exact:
        return exact[0]
    partial = [g for g in groups if re.search(rf"(^|[\s=,]){re.escape(wanted)}($|[\s=,])",
                                              g.label)]
    if len(partial) == 1:
        return partial[0]
    labels = "; ".join(g.label for g in groups)
    how = "matches several groups" if partial else "matches no group"
    raise CompareError(f"reference={wanted!r} {how}; the groups are: {labels}")
