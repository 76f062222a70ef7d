"""The official TimeXer beside model=timexer: the same weights, the official test loader's
windows, the forecasts compared (docs/timexer.md#official-weights).

    python scripts/check_official_timexer.py TimeXer --data-dir ../shared/data

DIR is a checkout of the authors' repository (thuml/TimeXer; its code is imported from there,
never copied here), and this Python needs what that code imports (pandas, scikit-learn,
reformer_pytorch for its attention module's imports). For each setting (ETTh1 under features M
at its published horizon-96 sizes, and the NP market under features MS at input 168, horizon 24,
three layers): the official `Model` with random weights, its `state_dict()` loaded with
`load_official_timexer`; the official test loader's first and last 64 windows with their
calendar features (`timeenc=1`, `freq=h`), each side given the same window (the target moved
first for this project's MS convention), with and without the calendar tokens; the forecasts
in eval mode (dropout 0.1 and 0) and in train mode with dropout 0. Prints max |official -
seqforecast| / max |official| for each.
"""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_common import official_gaps  # noqa: E402

from seqforecast.config import compose_config  # noqa: E402
from seqforecast.published import load_official_timexer  # noqa: E402

# name -> (features, file, official loader class, in_len, out_len, patch_len, d_model, d_ff,
#          layers, series)
SETTINGS = {
    "etth1": ("M", "ETTh1.csv", "Dataset_ETT_hour", 96, 96, 16, 256, 2048, 1, 7),
    "np": ("MS", "EPF/NP.csv", "Dataset_Custom", 168, 24, 24, 512, 512, 3, 3),
}


def check(data_dir: Path, name: str, dropout: float, marks: bool) -> list[str]:
    from data_provider import data_loader  # the official code's, from DIR
    from models.TimeXer import Model

    features, file, loader, in_len, out_len, patch, d_model, d_ff, layers, series = \
        SETTINGS[name]
    torch.manual_seed(2021)
    official = Model(types.SimpleNamespace(
        task_name="long_term_forecast", features=features, seq_len=in_len, pred_len=out_len,
        use_norm=True, patch_len=patch, enc_in=series, d_model=d_model, embed="timeF",
        freq="h", dropout=dropout, factor=3, n_heads=8, d_ff=d_ff, activation="gelu",
        e_layers=layers)).float()
    targets = series if features == "M" else 1
    cfg = OmegaConf.to_container(compose_config([
        "experiment=timexer", "data.path=x.csv", f"in_len={in_len}", f"out_len={out_len}",
        f"d_model={d_model}", f"ffn.d_ff={d_ff}", f"model.encoder_layers={layers}",
        f"embedding.patch_len={patch}", f"embedding.stride={patch}",
        f"model.dropout={dropout}", f"data.time_features={str(marks).lower()}"]), resolve=True)
    ours = load_official_timexer(official.state_dict(), cfg, series, targets, 4 if marks else 0)
    path = data_dir / file
    dataset = getattr(data_loader, loader)(
        None, root_path=str(path.parent), data_path=path.name, flag="test",
        size=[in_len, 48, out_len], features=features, target="OT", timeenc=1, freq="h")
    index = list(range(64)) + list(range(len(dataset) - 64, len(dataset)))
    x, stamp = (torch.tensor(np.stack([dataset[i][k] for i in index])).float() for k in (0, 2))
    # this project's MS convention: the target first, then the exogenous series
    mine_x = x if features == "M" else x[..., [series - 1, *range(series - 1)]]
    mine_in = torch.cat([mine_x, stamp], -1) if marks else mine_x
    lines = [f"{name} ({features}), dropout {dropout}, calendar tokens {marks}: "
             f"{len(dataset)} test windows"]
    return lines + official_gaps(
        official, ours, lambda m: m(x, stamp if marks else None, None, None)[..., -targets:],
        lambda m: m(mine_in), dropout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("code", type=Path, help="a checkout of thuml/TimeXer")
    parser.add_argument("--data-dir", default="data",
                        help="where ETTh1.csv and EPF/NP.csv are")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.code.resolve()))
    for name in SETTINGS:
        for dropout in (0.1, 0.0):
            for marks in (True, False):
                print("\n".join(check(Path(args.data_dir).resolve(), name, dropout, marks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
