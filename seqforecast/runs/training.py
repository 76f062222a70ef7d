"""One training run, start to end: data, model, training, evaluation, files in the run dir.

Run dir contents: checkpoints/best.pt and last.pt, metrics.json, the TensorBoard event file,
figures/<point>/ (attention.npz, one PNG per attention layer, forecast.png), and Hydra's own
.hydra/ (composed config, overrides) and train.log.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from .. import native
from ..config.rundir import LAST_CHECKPOINT
from ..config.saved import migrated
from ..data import DataError, ForecastData, build_data
from ..datasets import require as require_dataset
from ..model import build_model
from ..options import ConfigError
from ..probabilistic.bands import write_bands
from ..published import OfficialWeightsError, describe, load_official_weights, official_for
from ..training.baselines import FIT_WINDOWS
from ..training.checkpoint import RunError, error_line
from ..training.distributed import SINGLE, Distributed, parameter_digest, wrap
from ..training.evaluation import Evaluator, ratios
from ..training.loop import TrainResult, train_model
from ..training.memory import PeakMemory
from ..training.monitor import Monitor, RunMonitor, flatten
from ..training.report import (
    describe_split,
    format_intervals,
    format_table,
    intervals_heading,
    write_metrics,
    write_per_series,
)
from ..training.runtime import (
    compile_model,
    configure_threads,
    float32_products,
    keep_freed_memory,
    resolve_device,
    seed_everything,
    slow_bf16,
)

log = logging.getLogger(__name__)


def current_config(config_yaml: str) -> str:
    """A checkpoint's config YAML as the current version (config/migrations.py)."""
    return OmegaConf.to_yaml(migrated(OmegaConf.create(config_yaml)), resolve=True)


def load_official_checkpoint(model, path: str) -> None:
    """model.official_weights: an official checkpoint.pth (PatchTST's, or iTransformer's for
    variate tokens) into `model`, or one line saying why not (RunError)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # missing, truncated, or not a weights-only torch file
        reason = error_line(err)
        raise RunError(f"model.official_weights={path}: cannot be read: {reason}") from None
    if isinstance(state, dict) and "model" in state and "format" in state:
        raise RunError(f"model.official_weights={path} is a seqforecast checkpoint: "
                       f"resume it (resume=<run dir>) or evaluate it instead")
    if not isinstance(state, dict):
        raise RunError(f"model.official_weights={path}: not a state dict")
    try:
        load_official_weights(model, state)
    except OfficialWeightsError as err:
        raise RunError(f"model.official_weights={path}: {err}") from None
    log.info("started from the official %s weights in %s", official_for(model).title, path)


def describe_model(model, data: ForecastData, plain: Mapping) -> dict:
    """What a run trains, as its first lines and metrics.json say it: the family, each attention
    stack's backend and kernel per layer, the columns forecast and the covariates read, and the
    published setting it took (or why none)."""
    state = data.state or {}
    columns = list(state.get("columns") or [])
    targets = columns[: data.n_targets] or [f"{plain['data']['name']} series"]
    covariates = columns[data.n_targets:] + list(state.get("time_features") or [])
    known = list(state.get("futr") or [])  # read over the horizon too (data/covariates.py)
    static = list(state.get("static") or [])  # one value a series
    stacks = {stack: [f"{layer.options.name}/{layer.kernel.name}" for layer in layers]
              for stack, layers in model.attention_stacks().items()}
    return {"family": model.family, "attention": stacks, "targets": targets,
            "covariates": covariates, "known_ahead": known, "static": static,
            "published": describe(plain)}


def model_lines(described: Mapping, n_params: int, device, kernels: str) -> list[str]:
    """The run's first lines on its model (describe_model)."""
    stacks = "; ".join(f"{stack}: " + ", ".join(layers)
                       for stack, layers in described["attention"].items())
    lines = [f"model: model={described['family']}, {n_params} parameters, on {device}, "
             f"{kernels} kernels; attention (backend/kernel a layer) {stacks}",
             f"forecasts {', '.join(described['targets'])}; covariates: "
             f"{', '.join(described['covariates']) or 'none'}" + kinds(described)]
    if described["published"]:
        lines.insert(0, described["published"])
    return lines


def kinds(described: Mapping) -> str:
    """Which covariates are known ahead and which static, as the model line says it."""
    named = [f"{label}: {', '.join(described[key])}" for key, label in
             (("known_ahead", "known ahead"), ("static", "static")) if described.get(key)]
    return f" ({'; '.join(named)})" if named else ""


@dataclass
class PreparedRun:
    """A run set up to train: its data, model, evaluator and monitor (`prepare_run`), what
    `finish_run` scores and writes once training has returned."""

    cfg: DictConfig
    plain: dict
    run_dir: Path
    device: torch.device
    data: ForecastData
    model: torch.nn.Module
    kernels: str
    evaluator: Evaluator
    monitor: Monitor
    config_yaml: str
    n_params: int
    memory: PeakMemory
    choices: Mapping[str, str] | None
    resume: dict | None
    ctx: Distributed


def run_training(
    cfg: DictConfig,
    run_dir: Path,
    choices: Mapping[str, str] | None = None,
    resume: dict | None = None,
    ctx: Distributed = SINGLE,
    progress: bool = True,
) -> float:
    """Train, evaluate on the held-out test set (and the test curve, and the validation set as
    what it is: the selection set), write metrics.json and the TensorBoard events. `choices`
    (group -> option) join the hparams; `resume` is the run's loaded last.pt to continue
    from; under torchrun `ctx` is this rank (only rank 0 writes).
    Returns the best validation MSE (what a sweeper minimises)."""
    run = prepare_run(cfg, run_dir, choices, resume, ctx)
    try:  # the writer is closed (and its events readable) even when the run fails
        result = train_model(
            wrap(run.model, ctx, run.device),
            run.data,
            run.plain["trainer"],
            run.run_dir / "checkpoints",
            seed=cfg.seed,
            config_yaml=run.config_yaml,
            monitor=run.monitor,
            resume=resume,
            ctx=ctx,
            progress=progress,
            data_state=run.data.state,
            evaluator=run.evaluator,
            kernels=run.kernels,
        )
        digests = ctx.gather(parameter_digest(run.model))  # collective: every rank
        if not ctx.is_main:
            return result.best_val_mse
        finish_run(run, result, {"world_size": ctx.world_size,
                                 "ranks_hold_identical_weights": len(set(digests)) == 1})
    finally:
        run.monitor.close()
    return result.best_val_mse


def prepare_run(
    cfg: DictConfig,
    run_dir: Path,
    choices: Mapping[str, str] | None = None,
    resume: dict | None = None,
    ctx: Distributed = SINGLE,
    kernels: str | None = None,
) -> PreparedRun:
    """Everything before the first step: the device, the data and the model (each from the
    run's seed), the evaluator, the monitor (its start written unless resuming). `kernels`
    forces a kernel set (a stacked run's: torch) instead of trainer.kernels'."""
    run_dir = Path(run_dir)
    plain = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    trainer_cfg = plain["trainer"]
    if ctx.enabled and trainer_cfg["strategy"] != "ddp":
        raise ConfigError(
            f"trainer.strategy={trainer_cfg['strategy']!r} under torchrun with "
            f"{ctx.world_size} processes: set trainer.strategy=ddp"
        )
    device = resolve_device(trainer_cfg["device"])
    for done in (keep_freed_memory(device),
                 float32_products(device, trainer_cfg["matmul_precision"])):
        if done:
            log.info(done)
    slow = slow_bf16(device, trainer_cfg["precision"])
    if slow:
        log.warning(slow)
    memory = PeakMemory(device)  # from here: data, model, training and evaluation
    memory.start()
    if device.type == "cuda" and ctx.enabled:
        device = torch.device("cuda", ctx.local_rank)
        torch.cuda.set_device(device)
    seed_everything(cfg.seed)  # the same data and initial weights on every rank

    # A resumed CSV run scores the rows it was trained on, or stops if the file changed.
    saved = None if resume is None else resume.get("data_state")
    require_dataset(plain)  # dataset=<name>: its file there, with its entry's columns
    data = build_data(plain["data"], cfg.seed, device, saved=saved)
    if kernels is None:
        kernels = native.resolve(trainer_cfg["kernels"], device, trainer_cfg["precision"])
    trained_with = None if resume is None else resume["kernels"]  # None: not recorded
    if trained_with not in (None, kernels):
        log.warning("resuming a run trained with the %s kernels on the %s ones "
                    "(trainer.kernels=%s here): it continues, but not bit for bit as it would "
                    "have run", trained_with, kernels, trainer_cfg["kernels"])
    model = build_model(plain, data.n_features, data.n_targets, kernels, device.type).to(device)
    problem = model.output.cannot_describe(data)  # a count distribution on real values, ...
    if problem:
        raise DataError(problem)
    n_params = sum(p.numel() for p in model.parameters())
    configure_threads(trainer_cfg["num_threads"], n_params)
    for line in model_lines(describe_model(model, data, plain), n_params, device, kernels):
        log.info(line)
    official = plain["model"].get("official_weights")  # a family that publishes weights
    if official and resume is None:
        load_official_checkpoint(model, official)
    if plain["model"]["linear_init"] == "least_squares" and resume is None:
        # Training starts from NLinear's fit on the training windows (no other split read).
        fit = data.train.sample(FIT_WINDOWS)
        model.fit_linear_path(fit.src, fit.target)
    seed_everything(cfg.seed + ctx.rank)  # each rank its own stream (dropout)
    if trainer_cfg["compile"]:
        compile_model(model, trainer_cfg["compile_mode"])
    evaluator = Evaluator.for_run(data, plain)
    for note in data.notes:
        log.info(note)
    for split, info in data.info.items():
        log.info("%s split: %s", split, describe_split(info))
    config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
    if resume is not None and current_config(resume["config"]) != config_yaml:
        raise RunError(
            f"{run_dir / LAST_CHECKPOINT} was written by another config than "
            f"{run_dir / '.hydra' / 'config.yaml'}; it cannot be resumed"
        )
    if not ctx.is_main:  # only rank 0 writes events, figures, checkpoints and metrics
        monitor = Monitor()
    else:
        monitor = RunMonitor(
            run_dir,
            evaluator,
            attention_every=plain["log"]["attention_every"],
            purge_step=None if resume is None else resume["step"] + 1,
            test_every=plain["log"]["test_every"],
            figures=plain["log"]["figures"],
        )
    if resume is None:
        try:
            monitor.on_start(model, config_yaml)
        except BaseException:
            monitor.close()  # its events stay readable
            raise
    return PreparedRun(cfg, plain, run_dir, device, data, model, kernels, evaluator, monitor,
                       config_yaml, n_params, memory, choices, resume, ctx)


def finish_run(run: PreparedRun, result: TrainResult, placement: dict) -> None:
    """After training (the model holds its kept weights): score every split, write
    metrics.json (with `placement`: how the run was laid out), the bands and per-series
    errors, the monitor's end; log the tables."""
    model, data, evaluator, plain = run.model, run.data, run.evaluator, run.plain
    run_dir = run.run_dir
    results = evaluator.evaluate(model, plain["intervals"])
    run_info = {
        "best_epoch": result.best_epoch,
        "epochs_run": result.epochs_run,
        "stopped_early": result.stopped_early,
        "train_seconds": round(result.seconds, 3),
        "parameters": run.n_params,
        "device": str(run.device),
        "kernels": run.kernels,
        "model": describe_model(model, data, plain),
        **placement,
        **run.memory.report(),
    }
    write_metrics(run_dir / "metrics.json", results, run_info, data.info)
    if "model" in evaluator.calibration:  # the kept model's bands, for predict
        write_bands(run_dir, evaluator.calibration["model"], plain["intervals"]["levels"],
                    radius=evaluator.adaptive_radius,
                    adapted_windows=len(data.eval_splits()["test"]))
    if data.series_ids:
        write_per_series(run_dir / "per_series.csv", evaluator.per_series(), data.series_ids)
    run.monitor.on_end(model, result.steps, results, {**flatten(plain), **(run.choices or {})})

    log.info("results (best epoch %d of %d), in the data's units:\n%s", result.best_epoch,
             result.epochs_run, format_table(results, data.info))
    table = format_intervals(results)
    if table:
        log.info("%s, in the data's units:\n%s", intervals_heading(plain["intervals"]), table)
    test_ratios = ratios(results)["test"]
    beaten = [name for name, r in test_ratios.items() if r < 1]
    log.info("held-out test set: model MSE below %d of %d baselines (%s)", len(beaten),
             len(test_ratios), ", ".join(beaten) or "none")
    log.info("run dir: %s", run_dir)
