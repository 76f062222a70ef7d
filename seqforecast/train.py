"""python -m seqforecast.train [group=option ...] [key=value ...]

Thin: Hydra composes the config, the config is checked, `run_training` does the rest.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from .config import ConfigError, register_schemas, validate_config
from .training.run import run_training

log = logging.getLogger("seqforecast.train")

register_schemas()


def fail(message: str, code: int = 2):
    """One line on stderr (and in the job log), a non-zero exit, no traceback."""
    log.error(message)
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


@hydra.main(version_base="1.3", config_path="../configs", config_name="train")
def main(cfg: DictConfig) -> float:
    try:
        validate_config(cfg)
        if cfg.attention.name != "diff" and cfg.block_size:
            log.warning("block_size=%s has no effect with attention=%s", cfg.block_size,
                        cfg.attention.name)  # fmt: skip
        runtime = HydraConfig.get().runtime
        choices = {
            group: str(option)
            for group, option in runtime.choices.items()
            if not group.startswith(("hydra", "schema"))
        }
        return run_training(cfg, Path(runtime.output_dir), choices)
    except ConfigError as err:  # a value only the run could check (e.g. an absent device)
        fail(str(err))


if __name__ == "__main__":
    main()
