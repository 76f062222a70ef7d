"""`hydra/launcher=stacked`: a sweep's jobs that differ only in their seed train as one batched
model in this process (seqforecast/stacking); every other job runs as Hydra's basic launcher
runs it, one after another.

    python -m seqforecast.train --multirun hydra/launcher=stacked seed=0,1,2,3,4

Each member's run dir is set up as Hydra sets up a job's (.hydra/ with config, hydra and
overrides; train.log), the job callbacks (the sweep summary) fire for each, and each job's
return is its own: a failed member fails alone.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Sequence
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import (
    JobReturn,
    JobStatus,
    _save_config,
    configure_log,
    filter_overrides,
    run_job,
    setup_globals,
)
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

log = logging.getLogger(__name__)


class StackedLauncher(Launcher):
    def __init__(self, max_members: int = 16) -> None:
        super().__init__()
        if max_members < 1:
            raise ValueError(f"hydra.launcher.max_members={max_members}: at least 1")
        self.max_members = max_members
        self.config: DictConfig | None = None
        self.task_function: TaskFunction | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction,
              config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]],
               initial_job_idx: int) -> Sequence[JobReturn]:
        from seqforecast.stacking.jobs import group_key, stack_refusal

        setup_globals()
        assert self.config is not None and self.hydra_context is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        Path(str(self.config.hydra.sweep.dir)).mkdir(parents=True, exist_ok=True)
        jobs = []
        for i, overrides in enumerate(job_overrides):
            sweep_config = self.hydra_context.config_loader.load_sweep_config(
                self.config, list(overrides))
            with open_dict(sweep_config):
                sweep_config.hydra.job.id = sweep_config.hydra.job.num = initial_job_idx + i
            jobs.append((initial_job_idx + i, list(overrides), sweep_config))
        # Groups in the order of their first job; a job that cannot stack is its own group.
        groups: dict[object, list] = {}
        for job in jobs:
            task = _task_config(job[2])
            refusal = stack_refusal(task)
            key = (job[0],) if refusal else group_key(task)
            if refusal:
                log.info("job %d runs alone: %s", job[0], refusal)
            groups.setdefault(key, []).append(job)
        log.info("Launching %d jobs: %d stacked group(s) of up to %d", len(jobs),
                 len(groups), self.max_members)
        returns: dict[int, JobReturn] = {}
        for group in groups.values():
            for start in range(0, len(group), self.max_members):
                chunk = group[start:start + self.max_members]
                if len(chunk) == 1:
                    returns[chunk[0][0]] = self._basic(*chunk[0])
                else:
                    returns.update(self._stacked(chunk))
                configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        return [returns[idx] for idx, _, _ in jobs]

    def _basic(self, idx: int, overrides: list[str], sweep_config: DictConfig) -> JobReturn:
        log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
        return run_job(hydra_context=self.hydra_context, task_function=self.task_function,
                       config=sweep_config, job_dir_key="hydra.sweep.dir",
                       job_subdir_key="hydra.sweep.subdir")

    def _stacked(self, chunk: list) -> dict[int, JobReturn]:
        """A group's jobs set up as run_job sets each up, then trained as one stack."""
        from seqforecast.config.saved import run_choices
        from seqforecast.stacking.jobs import Job, run_group
        from seqforecast.train import JobFailed

        callbacks = self.hydra_context.callbacks
        members, returns, configs = [], {}, {}
        for idx, overrides, config in chunk:
            log.info("\t#%d : %s (stacked)", idx, " ".join(filter_overrides(overrides)))
            HydraConfig.instance().set_config(config)
            output_dir = os.path.join(str(OmegaConf.select(config, "hydra.sweep.dir")),
                                      str(OmegaConf.select(config, "hydra.sweep.subdir")))
            with read_write(config.hydra.runtime), open_dict(config.hydra.runtime):
                config.hydra.runtime.output_dir = os.path.abspath(output_dir)
            HydraConfig.instance().set_config(config)
            task_cfg = _task_config(config)
            hydra_cfg = copy.deepcopy(HydraConfig.instance().cfg)
            Path(output_dir).mkdir(parents=True, exist_ok=True)
            if config.hydra.output_subdir is not None:
                saved = Path(config.hydra.runtime.output_dir) / str(config.hydra.output_subdir)
                _save_config(task_cfg, "config.yaml", saved)
                _save_config(hydra_cfg, "hydra.yaml", saved)
                _save_config(config.hydra.overrides.task, "overrides.yaml", saved)
            ret = JobReturn(cfg=task_cfg, hydra_cfg=hydra_cfg, working_dir=os.getcwd(),
                            overrides=OmegaConf.to_container(config.hydra.overrides.task))
            returns[idx], configs[idx] = ret, config
            callbacks.on_job_start(config=config, task_function=self.task_function)
            members.append(Job(task_cfg, Path(config.hydra.runtime.output_dir),
                               list(config.hydra.overrides.task),
                               run_choices(hydra_cfg.hydra.runtime.choices),
                               tag=f"job {idx} seed={task_cfg.seed}"))
        # the job log's console and file handlers, as the first job configures them; the
        # file handler is then replaced by one per member (seqforecast/stacking/logs.py)
        configure_log(chunk[0][2].hydra.job_logging, chunk[0][2].hydra.verbose)
        outcomes = run_group(members, progress=True)
        for (idx, _, config), outcome in zip(chunk, outcomes, strict=True):
            ret = returns[idx]
            if outcome.status == "completed":
                ret.status, ret.return_value = JobStatus.COMPLETED, outcome.value
            else:
                ret.status, ret.return_value = JobStatus.FAILED, JobFailed(outcome.reason)
            ret.task_name = config.hydra.job.name
            HydraConfig.instance().set_config(config)
            callbacks.on_job_end(config=config, job_return=ret)
        return returns


def _task_config(config: DictConfig) -> DictConfig:
    """A job's config without its hydra node (what the task function receives)."""
    task = copy.deepcopy(config)
    with read_write(task), open_dict(task):
        del task["hydra"]
    return task
