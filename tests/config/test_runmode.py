"""seqforecast.train answers Hydra's run-mode query from the command line (config/runmode.py)
where that is Hydra's own answer: no package config sets hydra.mode, so it is None unless the
command sets it or brings other configs."""

import pytest
from hydra import initialize_config_dir
from hydra._internal.hydra import Hydra
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode
from omegaconf import OmegaConf

from seqforecast.config import CONFIG_DIR, register_schemas
from seqforecast.config.runmode import MODE_GROUPS, decided_by_flags, mode_by_flags

COMMANDS = [[], ["experiment=quick"], ["attention=diff", "block_size=16"],
            ["experiment=timexer", "dataset=etth1", "attention@variate_attention=flow"],
            ["hydra/launcher=stacked", "seed=0,1"]]


def test_only_the_mode_groups_set_hydra_mode_and_nothing_selects_them():
    files = sorted(CONFIG_DIR.rglob("*.yaml"))
    assert len(files) > 50
    setting = set()
    for path in files:
        config = OmegaConf.load(path)
        if OmegaConf.select(config, "hydra.mode") is not None:
            setting.add(path.relative_to(CONFIG_DIR).parts[0])
        # a defaults entry naming a mode group (other than train.yaml's `hparams_search: null`,
        # its slot on the command line) would set the mode without the command saying so
        for entry in config.get("defaults", []) if path.name != "train.yaml" else []:
            names = entry.keys() if isinstance(entry, dict) else [entry]
            assert not any(name.split()[-1].lstrip("/").startswith(MODE_GROUPS)
                           for name in map(str, names)), (path, entry)
    assert setting == set(MODE_GROUPS)


def test_hydra_answers_none_where_the_flags_decide_and_reads_a_mode_set():
    register_schemas()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        hydra: Hydra = GlobalHydra.instance().hydra
        for command in COMMANDS:
            assert decided_by_flags(command)
            assert hydra.get_mode("train", command) is None, command
            with mode_by_flags(command):
                assert hydra.get_mode("train", command) is None
        # a command that sets it is Hydra's to answer, and Hydra's answer is then the mode
        for command in (["experiment=quick", "hydra.mode=MULTIRUN"], ["hparams_search=optuna"]):
            assert not decided_by_flags(command)
            with mode_by_flags(command):
                assert hydra.get_mode("train", command) == RunMode.MULTIRUN
    assert Hydra.get_mode.__name__ == "get_mode"  # put back


@pytest.mark.parametrize("argv", [["--config-dir", "mine", "experiment=tiny"], ["-cd", "mine"],
                                  ["--config-name=other"], ["+hydra.searchpath=[file://x]"],
                                  ["++hydra.mode=RUN"], ["hparams_search=optuna"]])
def test_a_command_with_configs_of_its_own_is_left_to_hydra(argv):
    assert not decided_by_flags(argv)
