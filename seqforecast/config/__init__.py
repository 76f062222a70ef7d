"""Config schemas (types, for Hydra) and semantic validation (values)."""

from .compose import CONFIG_DIR, compose_config
from .schema import TrainConfig, register_schemas
from .validate import ConfigError, validate_config

__all__ = [
    "CONFIG_DIR",
    "ConfigError",
    "TrainConfig",
    "compose_config",
    "register_schemas",
    "validate_config",
]
