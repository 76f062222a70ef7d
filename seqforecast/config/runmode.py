"""Hydra's run mode without a composition for it.

Before each command Hydra composes the whole config once only to read `hydra.mode`
(`Hydra.get_mode`), then composes it again for the run: about 0.45 s a command here, a third of
a small run's time in process. Of the package's configs only the options of MODE_GROUPS set
`hydra.mode` (hparams_search=optuna: a study, --multirun or not), and nothing else selects
them, so where the command line neither selects one, nor sets the mode, nor brings configs of
its own (a config dir, path or name, a search path), Hydra's answer is None and the --multirun
flag decides. `mode_by_flags` gives that answer without composing; every other command is left
to Hydra's own query. (tests/config/test_runmode.py holds both: which configs set it, and that
Hydra answers None.)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

from hydra._internal.hydra import Hydra

MODE_GROUPS = ("hparams_search",)  # the config groups whose options set hydra.mode
# arguments after which the package's configs alone no longer say what hydra.mode is
OTHER_CONFIGS = ("--config-dir", "-cd", "--config-path", "-cp", "--config-name", "-cn",
                 "hydra.searchpath", "hydra.mode", *MODE_GROUPS)


def decided_by_flags(argv: Sequence[str]) -> bool:
    """Whether a command's hydra.mode is unset (None) whatever its config composes to."""
    return not any(arg.lstrip("+~").startswith(OTHER_CONFIGS) for arg in argv)


@contextlib.contextmanager
def mode_by_flags(argv: Sequence[str]) -> Iterator[None]:
    """Within: Hydra's mode query answers None without composing, for a command (`argv`,
    the arguments after the program) that `decided_by_flags`."""
    if not decided_by_flags(argv):
        yield
        return
    original = Hydra.get_mode
    Hydra.get_mode = lambda self, config_name, overrides: None
    try:
        yield
    finally:
        Hydra.get_mode = original
