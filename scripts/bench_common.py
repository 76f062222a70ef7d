"""What the benchmark scripts share: a case in a fresh worker process, rounds over the cases,
and the JSON report with the machine it ran on; and what the check_official_* scripts share:
one forward beside the authors' model in each mode."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


DTYPES = {"fp32": "float32", "bf16": "bfloat16"}  # --dtype -> torch's name for it


class Clock:
    """Times a call: on a GPU by CUDA events around it (the device's own time, synchronised
    after), elsewhere by the wall clock."""

    def __init__(self, device: str):
        import torch

        self.cuda = torch.device(device).type == "cuda"

    def time(self, fn: Callable[[], object]) -> float:
        """Seconds `fn()` took."""
        if not self.cuda:
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start
        import torch

        start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3


def matmul_gflops(n: int = 2048, repeats: int = 10, device: str = "cpu", dtype: str = "fp32",
                  pick: Callable[[list[float]], float] = statistics.median) -> float:
    """This machine's torch.mm rate on n x n matrices, GFLOP/s: `pick` (the median, or min
    for the best) of `repeats` timed products, on the threads torch has."""
    import torch

    a, b = (torch.randn(n, n, device=device, dtype=getattr(torch, DTYPES[dtype]))
            for _ in range(2))
    torch.mm(a, b)
    clock = Clock(device)
    return 2 * n**3 / pick([clock.time(lambda: torch.mm(a, b)) for _ in range(repeats)]) / 1e9


class PeakMemory:
    """The high-water mark of what is allocated after it is made, MiB above what was allocated
    then: torch's CUDA allocator's on a GPU; on the CPU the process's resident set (VmHWM,
    reset through /proc/self/clear_refs) above the resident set at that moment."""

    def __init__(self, device: str):
        import torch

        from seqforecast.training.memory import reset_high_water_mark, status_mib

        self.cuda = torch.device(device).type == "cuda"
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.base = torch.cuda.memory_allocated()
            return
        self.base = status_mib("VmRSS")
        if self.base is None or not reset_high_water_mark():
            raise RuntimeError("peak memory needs /proc/self/status and /proc/self/clear_refs")

    def mib(self) -> float:
        import torch

        from seqforecast.training.memory import status_mib

        if self.cuda:
            torch.cuda.synchronize()
            return (torch.cuda.max_memory_allocated() - self.base) / 2**20
        return status_mib("VmHWM") - self.base


def repo_env() -> dict[str, str]:
    """This environment with the repository first on PYTHONPATH, for child processes."""
    return dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def train_run(overrides: list[str], run_dir: Path) -> tuple[dict | None, str, float]:
    """`python -m seqforecast.train <overrides> skip_completed=true` into `run_dir`, from the
    repository: (its metrics.json, or None when it failed; the last line it printed; wall
    seconds). A benchmark run again finds the runs it completed (resumed ones too) and trains
    only the rest; those are marked `"reused": True`, their wall the run's own train_seconds.
    A dir holding a completed run made otherwise is refused (a failure), not trained over; one
    holding the same run killed (a session's end) continues from its last epoch."""
    cmd = [sys.executable, "-m", "seqforecast.train", *overrides, "skip_completed=true",
           f"hydra.run.dir={run_dir}"]
    metrics_file = Path(run_dir) / "metrics.json"
    before = metrics_file.stat().st_mtime_ns if metrics_file.is_file() else None
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=repo_env(), cwd=REPO)
    wall = time.perf_counter() - start
    last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["?"])[-1]
    if proc.returncode != 0:
        return None, last, wall
    metrics = json.loads(metrics_file.read_text())
    if metrics_file.stat().st_mtime_ns == before:  # skipped: completed before this call
        metrics["reused"] = True
        wall = float(metrics["run"]["train_seconds"])
    return metrics, last, wall


def rescore(run_dir: Path, method: str, reuse: bool) -> dict | None:
    """The run's kept model with its bands scored by `intervals=<method>` (`seqforecast.evaluate`,
    nothing retrained): its metrics.json, or None when evaluate failed. `reuse`: an earlier
    re-score's metrics where they are there."""
    path = Path(run_dir) / "evaluate" / f"best_{method}" / "metrics.json"
    if not (reuse and path.is_file()):
        proc = subprocess.run([sys.executable, "-m", "seqforecast.evaluate", f"run_dir={run_dir}",
                               f"intervals={method}"], capture_output=True, text=True,
                              env=repo_env(), cwd=REPO)
        if proc.returncode != 0:
            return None
    return json.loads(path.read_text())


def run_facts(metrics: dict, wall: float) -> dict:
    """What every benchmark keeps of a run: the epoch kept, epochs run, seconds, test windows."""
    return {
        "best_epoch": metrics["run"]["best_epoch"],
        "epochs_run": metrics["run"]["epochs_run"],
        "train_seconds": metrics["run"]["train_seconds"],
        "wall_seconds": round(wall, 1),
        "reused": metrics.get("reused", False),  # completed by an earlier call (train_run)
        "test_windows": metrics["splits"]["test"]["windows"],
    }


def run_worker(script: str, spec: dict, timeout: int, label: dict | None = None,
               in_process: bool = False) -> dict:
    """Run `script --worker <spec as JSON>` in a fresh Python process (so one case's
    allocations and caches cannot colour the next) and return the JSON result it prints last.
    A timeout or a failure becomes `{**label, "status": why}` (label defaults to the spec).
    `in_process`: the worker's main in this process instead (no timeout, no isolation: a
    script's `--in-process`, for its tests and tiny checks, where an interpreter's start and
    torch's import cost more than the case)."""
    label = spec if label is None else label
    if in_process:
        return _worker_here(script, spec, label)
    env = repo_env()
    try:
        proc = subprocess.run(
            [sys.executable, script, "--worker", json.dumps(spec)],
            capture_output=True, text=True, timeout=timeout, env=env,
        )
    except subprocess.TimeoutExpired:
        return {**label, "status": f"skipped: over {timeout}s"}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {**label, "status": f"failed: {last}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


_SCRIPTS: dict[str, object] = {}


def _worker_here(script: str, spec: dict, label: dict) -> dict:
    """run_worker(in_process=True): `script`'s main(["--worker", spec]) in this process, its
    last printed line read back as the result."""
    import contextlib
    import importlib.util
    import io

    if script not in _SCRIPTS:  # imported once as a module: its main, not its __main__ block
        found = importlib.util.spec_from_file_location(f"_worker_{Path(script).stem}", script)
        module = importlib.util.module_from_spec(found)
        sys.modules[found.name] = module  # where dataclasses look their module up
        found.loader.exec_module(module)
        _SCRIPTS[script] = module
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            _SCRIPTS[script].main(["--worker", json.dumps(spec)])
    except Exception as err:  # noqa: BLE001 (a case's failure is its row, as in a subprocess)
        return {**label, "status": f"failed: {type(err).__name__}: {err}"}
    return json.loads(out.getvalue().strip().splitlines()[-1])


def best_of_rounds(
    specs: list[dict], repeats: int, run: Callable[[dict], dict], show: Callable[[dict], None]
) -> list[dict]:
    """Run every spec `repeats` times, the order reversed every other round, and keep each
    spec's fastest successful result (most tokens/s): the one least disturbed by the rest of
    a shared machine. Every round's tokens/s is kept in `rounds_tokens_per_s`."""
    rounds: list[list[dict]] = [[] for _ in specs]
    for round_ in range(repeats):
        order = range(len(specs)) if round_ % 2 == 0 else reversed(range(len(specs)))
        for i in order:
            result = run(specs[i])
            rounds[i].append(result)
            show(result)
    kept = []
    for results in rounds:
        ok = [r for r in results if r["status"] == "ok"]
        best = max(ok, key=lambda r: r["tokens_per_s"]) if ok else results[0]
        best["rounds_tokens_per_s"] = [r["tokens_per_s"] for r in ok]
        kept.append(best)
    return kept


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux), else what platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def stamp(script: str, argv: list[str] | None) -> dict:
    """The command and machine a report records: the machine's CPU and the instruction set
    torch uses on it, since the same session's machine is not always the same CPU (an AVX2
    one runs bf16 products many times slower than fp32)."""
    import torch

    return dict(
        command=" ".join(["python", f"scripts/{Path(script).name}", *(argv or sys.argv[1:])]),
        machine=dict(
            platform=platform.platform(), cpus=os.cpu_count(), python=sys.version.split()[0],
            cpu=cpu_model(), torch=torch.__version__,
            torch_cpu_capability=torch.backends.cpu.get_cpu_capability(),
        ),
    )


def write_report(out: Path, script: str, argv: list[str] | None, **fields) -> None:
    """Write the report to `out` with the command and machine it came from (`stamp`)."""
    save_report(out, {**stamp(script, argv), **fields})


def save_report(out: Path, report: dict) -> None:
    """Write a report built whole (its `stamp` in it) to `out`."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out}", file=sys.stderr)


# ---------------------------------------------------------------- one report per table
# A table's runs may come from several commands, machines and days (a seed a session, the
# official code's run, a rerun): each script merges them into the table's one report (its
# `--merge`, and its `--out` where that report exists already), and these keep, in the merged
# report, where each measurement came from and every measurement that the table does not show.


def source(path: str | Path | None, report: dict) -> dict:
    """What a merged report keeps (`merged_from`) of a report it merged: its file (None: the
    command's own runs, merged into its --out), command and machine, and what that one had
    merged in turn."""
    found = {"file": None if path is None else str(path), "command": report.get("command"),
             "machine": report.get("machine")}
    if report.get("merged_from"):
        found["merged_from"] = report["merged_from"]
    return found


def measured_in(report: dict) -> dict | None:
    """The command and machine that measured a report's runs, for a report that measured them
    itself (not a merge, whose own command is the merge's): merging sets it on each of its
    measurements as `report`, which stays with the measurement through later merges."""
    if report.get("merged_from") or "command" not in report:
        return None
    return {"command": report["command"], "machine": report.get("machine")}


def keep_latest(kept: dict, key, found: dict, repeats: list, same: Callable[[dict, dict], bool],
                tag: dict | None = None, case: dict | None = None) -> None:
    """Put `found`, a measurement of case `key`, in `kept` (the table's, one per case). Where
    the case is there already: a measurement equal to it (`same`: the same run met again in
    another report) only lends it the `report` it may lack; a different one (a rerun, a later
    session's measurement) takes its place and the earlier one goes to `repeats` (with `case`,
    the fields that name the case where the measurement lacks them), so that nothing measured
    is lost. `tag`: the report's `measured_in`, set on `found` where it has none."""
    if tag and "report" not in found:
        found = {**found, "report": tag}
    before = kept.get(key)
    if before is not None and same(before, found):
        if "report" not in before and "report" in found:
            kept[key] = {**before, "report": found["report"]}
        return
    def of_case(r: dict) -> bool:
        return all(r.get(k) == v for k, v in (case or {}).items())

    if before is not None and not any(same(before, r) and of_case(r) for r in repeats):
        repeats.append({**(case or {}), **before})
    # a measurement back in the table (met again in a later report) is no repeat
    repeats[:] = [r for r in repeats if not (same(r, found) and of_case(r))]
    kept.pop(key, None)  # the latest last, where order matters
    kept[key] = found


def add_entry(out: Path, script: str, argv: list[str] | None, name: str, **fields) -> dict:
    """Add one measurement (`name`, the command and machine it came from, `fields`) to `out`,
    the report of a script whose every run measures one case of its table (a config's step
    profile, a sweep stacked and one after another): `{"entries": [...]}`, in the order they
    were measured, none replaced. Returns the entry."""
    entry = {"name": name, **stamp(script, argv), **fields}
    report = merge_entries([out]) if out.is_file() else {"entries": []}
    report["entries"].append(entry)
    save_report(out, report)
    return entry


def merge_entries(paths: list[Path], prefix: str = "") -> dict:
    """Reports of entries (add_entry's), or of one measurement each as write_report wrote them
    (an entry, named by its file's stem less `prefix`), as one report of entries, each entry
    once."""
    entries: list[dict] = []
    for path in paths:
        report = json.loads(Path(path).read_text())
        found = report["entries"] if "entries" in report else [
            {"name": Path(path).stem.removeprefix(prefix), **report}]
        entries += [e for e in found if e not in entries]
    return {"entries": entries}


def same_fields(*names: str) -> Callable[[dict, dict], bool]:
    """`same` for keep_latest: two measurements are one where these fields are equal (what a
    run measured, not where or when it was read: `reused`, `wall_seconds` and paths left out)."""
    return lambda a, b: all(a.get(n) == b.get(n) for n in names)


def timed_official(module: str, experiment: str, run_file: str, resumable: bool = False) -> str:
    """Python source that runs an official repository's `run_file` (with the command line it is
    given) inside that repository, as its authors run it, timing its experiment class's
    `train` (the whole call) and `vali` (summed) methods, and printing them last as JSON:
    {"train_call_seconds", "vali_seconds"}. One torch thread. numpy 2 removed np.Inf, which the
    published EarlyStopping reads; nothing else is changed, but with OFFICIAL_SEED set in the
    environment the seed the code fixes is that one (random, numpy and torch alike).

    `resumable` (the Time-Series-Library's train loop: EarlyStopping and adjust_learning_rate
    once an epoch, no scheduler): with OFFICIAL_RESUME_STATE naming a file, the state at the end
    of each epoch goes there (weights, optimizer, every RNG, early stopping, the validation and
    test losses, the best checkpoint, the seconds so far), and a run started again with that
    file replays the epochs it holds without computing them (no batches, their losses
    recorded, nothing printed), puts that state back after the last of them and goes on: the
    same numbers as an unstopped run (an NP run is ~3 hours; a session may end first). The file
    goes once train returns."""
    return f"""
import json, os, random, runpy, sys, time
import numpy as np
import torch
np.Inf = np.inf
torch.set_num_threads(1)
if os.environ.get("OFFICIAL_SEED"):
    for module, name in ((random, "seed"), (np.random, "seed"), (torch, "manual_seed")):
        setattr(module, name, lambda _, fix=getattr(module, name):
                fix(int(os.environ["OFFICIAL_SEED"])))
sys.path.insert(0, ".")
import {module} as exp
timed = {{"vali_seconds": 0.0}}
train, vali = exp.{experiment}.train, exp.{experiment}.vali
def timed_train(self, setting):
    start = time.perf_counter()
    out = train(self, setting)
    timed["train_call_seconds"] = time.perf_counter() - start + timed.get("train_before", 0.0)
    return out
def timed_vali(self, *args):
    start = time.perf_counter()
    out = vali(self, *args)
    timed["vali_seconds"] += time.perf_counter() - start
    return out
exp.{experiment}.train, exp.{experiment}.vali = timed_train, timed_vali
{_RESUMABLE.format(experiment=experiment) if resumable else ""}
sys.argv = ["{run_file}", *sys.argv[1:]]
runpy.run_path("{run_file}", run_name="__main__")
timed.pop("train_before", None)
print(json.dumps(timed))
"""


# The epoch-level resume of timed_official(resumable=True): patches on the experiment module's
# own names (EarlyStopping, adjust_learning_rate, print) and the class's (_get_data, vali,
# train); the repository's files are not touched.
_RESUMABLE = """
import builtins, warnings
STATE = os.environ.get("OFFICIAL_RESUME_STATE")
replay = {{"left": 0, "history": [], "queue": []}}
def quiet_print(*args, **kwargs):  # the replayed epochs print nothing
    if not replay["left"]:
        builtins.print(*args, **kwargs)
exp.print = sys.modules[exp.EarlyStopping.__module__].print = quiet_print
# a replayed epoch's empty loss list, averaged
warnings.filterwarnings("ignore", "Mean of empty slice")
warnings.filterwarnings("ignore", "invalid value encountered in scalar divide")
stopper_class, adjust = exp.EarlyStopping, exp.adjust_learning_rate
class ResumableStopping(stopper_class):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        replay["stopper"] = self
    def __call__(self, val_loss, model, path):
        replay["checkpoint"] = os.path.join(path, "checkpoint.pth")
        if not replay["left"]:  # replayed: the saved state is put back after the last one
            super().__call__(val_loss, model, path)
exp.EarlyStopping = ResumableStopping
STOPPER = ("counter", "best_score", "early_stop", "val_loss_min")
class Replayed:  # the training loader, empty in a replayed epoch
    def __init__(self, loader):
        self.loader = loader
    def __len__(self):
        return len(self.loader)
    def __iter__(self):
        return iter(()) if replay["left"] else iter(self.loader)
get_data = exp.{experiment}._get_data
def replayed_get_data(self, flag):
    data, loader = get_data(self, flag)
    return (data, Replayed(loader)) if flag == "train" else (data, loader)
exp.{experiment}._get_data = replayed_get_data
def replayed_vali(self, *args):
    if replay["left"]:
        return replay["queue"].pop(0)
    out = timed_vali(self, *args)
    replay["history"].append(out)
    return out
exp.{experiment}.vali = replayed_vali
def resumable_train(self, setting):
    replay["exp"], replay["start"] = self, time.perf_counter()
    if STATE and os.path.isfile(STATE):
        state = torch.load(STATE, weights_only=False)
        replay.update(left=state["epoch"], saved=state, history=list(state["history"]),
                      queue=list(state["history"]))
        timed.update(vali_seconds=state["vali_seconds"], train_before=state["train_seconds"])
        print(f"[resumed after epoch {{state['epoch']}} from {{STATE}}: those epochs replayed]")
    out = timed_train(self, setting)
    if STATE and os.path.isfile(STATE):
        os.remove(STATE)
    return out
exp.{experiment}.train = resumable_train
def resumable_adjust(optimizer, epoch, args):  # the end of each epoch that goes on
    adjust(optimizer, epoch, args)
    model, stopper = replay["exp"].model, replay["stopper"]
    if replay["left"]:
        replay["left"] -= 1
        if replay["left"]:
            return
        saved = replay["saved"]  # the last replayed epoch: the state it ended with
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        for key in STOPPER:
            setattr(stopper, key, saved["stopper"][key])
        with open(replay["checkpoint"], "wb") as f:
            f.write(saved["best"])
        torch.set_rng_state(saved["torch_rng"])
        np.random.set_state(saved["numpy_rng"])
        random.setstate(saved["python_rng"])
        return
    if not STATE:
        return
    with open(replay["checkpoint"], "rb") as f:
        best = f.read()
    state = {{"epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "stopper": {{key: getattr(stopper, key) for key in STOPPER}}, "best": best,
             "history": replay["history"], "vali_seconds": timed["vali_seconds"],
             "train_seconds": timed.get("train_before", 0.0)
             + time.perf_counter() - replay["start"],
             "torch_rng": torch.get_rng_state(), "numpy_rng": np.random.get_state(),
             "python_rng": random.getstate()}}
    torch.save(state, STATE + ".tmp")
    os.replace(STATE + ".tmp", STATE)  # a stop while saving keeps the previous epoch's
exp.adjust_learning_rate = resumable_adjust
"""


def official_gaps(official, ours, theirs_forward, mine_forward, dropout: float) -> list[str]:
    """One line per mode: max |official - seqforecast| / max |official| of the two models'
    forecasts (`theirs_forward(official)`, `mine_forward(ours)`), in eval mode, and in train
    mode too where dropout is 0 (train mode then differs only where a layer does)."""
    import torch

    lines = []
    for mode in ("eval", "train") if dropout == 0 else ("eval",):
        official.train(mode == "train")
        ours.train(mode == "train")
        with torch.no_grad():
            theirs, mine = theirs_forward(official), mine_forward(ours)
        lines.append(f"  {mode} mode: max |official - seqforecast| / max |official| = "
                     f"{((theirs - mine).abs().max() / theirs.abs().max()).item():.1e}")
    return lines
