"""One training run, start to end: data, model, training, evaluation, files in the run dir.

Run dir contents: checkpoints/best.pt and last.pt, metrics.json, and Hydra's own
.hydra/ (composed config, overrides) and train.log.
"""

from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from ..data import synthetic_data
from ..model import build_model
from .loop import train_model
from .report import evaluate, format_table, ratios, write_metrics
from .runtime import configure_threads, resolve_device, seed_everything

log = logging.getLogger(__name__)


def run_training(cfg: DictConfig, run_dir: Path) -> float:
    """Train, evaluate on the test curve and validation set, write metrics.json.
    Returns the best validation MSE (what a sweeper minimises)."""
    run_dir = Path(run_dir)
    plain = OmegaConf.to_container(cfg, resolve=True)
    trainer_cfg = plain["trainer"]
    configure_threads(trainer_cfg["num_threads"])
    device = resolve_device(trainer_cfg["device"])
    seed_everything(cfg.seed)

    data = synthetic_data(plain["data"], cfg.seed, device)
    model = build_model(plain, n_features=data.n_features).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    log.info(
        "model: %s attention, %s positions, %s FFN, %d parameters, on %s",
        plain["attention"]["name"], plain["pos_encoding"]["name"],
        plain["ffn"]["activation"] + (" gated" if plain["ffn"]["gated"] else ""),
        n_params, device,
    )  # fmt: skip

    result = train_model(
        model,
        data,
        trainer_cfg,
        run_dir / "checkpoints",
        seed=cfg.seed,
        config_yaml=OmegaConf.to_yaml(cfg, resolve=True),
    )
    results = evaluate(model, data, trainer_cfg["eval_batch_size"])
    run_info = {
        "best_epoch": result.best_epoch,
        "epochs_run": result.epochs_run,
        "stopped_early": result.stopped_early,
        "train_seconds": round(result.seconds, 3),
        "parameters": n_params,
        "device": str(device),
    }
    write_metrics(run_dir / "metrics.json", results, run_info)

    log.info("results (best epoch %d of %d):\n%s", result.best_epoch, result.epochs_run,
             format_table(results))  # fmt: skip
    beaten = [name for name, r in ratios(results)["test"].items() if r < 1]
    log.info("test curve: model MSE below %d of %d baselines (%s)", len(beaten),
             len(ratios(results)["test"]), ", ".join(beaten) or "none")  # fmt: skip
    log.info("run dir: %s", run_dir)
    return result.best_val_mse
