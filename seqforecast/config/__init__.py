"""The training config: every option's schema (schema.py), the rules between options
(rules.py), checking (check.py), saved runs' migrations (migrations.py) and reading
(saved.py), composing from Python (compose.py) and where runs go (rundir.py)."""

from ..options import ConfigError
from .check import validate_config
from .compose import CONFIG_DIR, compose_config
from .migrations import migrate
from .saved import saved_config
from .schema import CONFIG_VERSION, TrainConfig, register_schemas

__all__ = [
    "CONFIG_DIR",
    "CONFIG_VERSION",
    "ConfigError",
    "TrainConfig",
    "compose_config",
    "migrate",
    "register_schemas",
    "saved_config",
    "validate_config",
]
