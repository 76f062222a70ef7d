"""The default training run alone and beside a busy process, for each thread setting.

    python scripts/bench_threads.py                 # the README table (epochs=4, 2 rounds)

Each case is `python -m seqforecast.train epochs=4 trainer.num_threads=<setting>` (the
default run otherwise), timed wall-clock from start to exit, in two scenarios: alone, and
beside one busy single-threaded process (a Python loop, started before the run and stopped
after it). Settings: `0` (torch's default, one spinning thread per core: what runs used
before `auto`), `auto` (the default now) and `1`. The cases alternate, their order reversed
every other round, and each keeps its fastest round. Results print as a table and go to
--out as JSON, with the thread count each `auto` run logged.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_common import REPO, repo_env, write_report

BUSY = "while True: pass"


def run_once(setting: str, epochs: int, busy: bool) -> dict:
    hog = subprocess.Popen([sys.executable, "-c", BUSY]) if busy else None
    try:
        if hog:
            time.sleep(1.0)  # the busy process is running before the run starts
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            proc = subprocess.run(
                [sys.executable, "-m", "seqforecast.train", f"epochs={epochs}",
                 f"trainer.num_threads={setting}", f"hydra.run.dir={tmp}/run"],
                capture_output=True, text=True, env=repo_env(), cwd=REPO,
            )
            wall = time.perf_counter() - started
            log = (Path(tmp) / "run" / "train.log").read_text() if proc.returncode == 0 else ""
    finally:
        if hog:
            hog.kill()
            hog.wait()
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"setting": setting, "busy": busy, "status": f"failed: {last}"}
    chosen = re.search(r"torch threads: (\d+) \((.*)\)", log)
    return {
        "setting": setting,
        "busy": busy,
        "status": "ok",
        "wall_s": wall,
        "threads": int(chosen.group(1)) if chosen else None,
        "why": chosen.group(2) if chosen else None,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--settings", nargs="+", default=["0", "auto", "1"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "threads.json")
    args = parser.parse_args(argv)

    cases = [(s, busy) for busy in (False, True) for s in args.settings]
    rounds: dict[tuple, list[dict]] = {case: [] for case in cases}
    for r in range(args.rounds):
        for setting, busy in cases if r % 2 == 0 else list(reversed(cases)):
            result = run_once(setting, args.epochs, busy)
            rounds[(setting, busy)].append(result)
            shown = f"{result['wall_s']:.1f} s" if result["status"] == "ok" else result["status"]
            where = "beside a busy process" if busy else "alone"
            print(f"num_threads={setting:<5} {where:<22} {shown}", file=sys.stderr, flush=True)

    kept = {}
    for case, results in rounds.items():
        ok = [r for r in results if r["status"] == "ok"]
        kept[case] = min(ok, key=lambda r: r["wall_s"]) if ok else results[0]
        kept[case]["rounds_s"] = [r["wall_s"] for r in ok]

    quiet_default = kept.get(("0", False), {}).get("wall_s")
    print(f"\nthe default run, epochs={args.epochs}, wall seconds (fastest of {args.rounds})\n")
    print("| trainer.num_threads | threads used | alone | beside a busy process | busy / alone |")
    print("|---|---|---|---|---|")
    for setting in args.settings:
        alone, busy = kept[(setting, False)], kept[(setting, True)]
        if alone["status"] != "ok" or busy["status"] != "ok":
            print(f"| {setting} | {alone['status']} | | | |")
            continue
        threads = f"{alone['threads']} / {busy['threads']}"
        print(f"| {setting} | {threads} | {alone['wall_s']:.1f} s | {busy['wall_s']:.1f} s | "
              f"{busy['wall_s'] / alone['wall_s']:.2f}x |")
    targets = []
    auto_alone, auto_busy = kept.get(("auto", False)), kept.get(("auto", True))
    if auto_alone and auto_busy and auto_alone["status"] == auto_busy["status"] == "ok":
        ratio = auto_busy["wall_s"] / auto_alone["wall_s"]
        targets.append({"target": "auto beside a busy process <= 1.6x its quiet time",
                        "value": ratio, "met": ratio <= 1.6})
        if quiet_default:
            slower = auto_alone["wall_s"] / quiet_default
            targets.append({"target": "auto alone <= 1.1x torch's default alone",
                            "value": slower, "met": slower <= 1.1})
    print()
    for t in targets:
        print(f"- {t['target']}: {t['value']:.2f} ({'met' if t['met'] else 'MISSED'})")
    write_report(args.out, __file__, argv, epochs=args.epochs,
                 results=[dict(r) for r in kept.values()], targets=targets)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
