"""The official iTransformer beside experiment=itransformer: the same weights, the windows of
each side's own loader, the forecasts compared (docs/itransformer.md#official-weights).

    python scripts/check_official_itransformer.py iTransformer --data-dir ../shared/data

DIR is a checkout of the authors' repository (thuml/iTransformer; its code is imported from
there, never copied here), and this Python needs what that code imports (pandas, scikit-learn).
For each setting (ETTh1 and Weather at their published horizon-96 sizes): the official `Model`
with random weights, its `state_dict()` loaded with `load_official_itransformer`; the official
test loader's first and last 64 windows (`timeenc=1`, `freq=h`) beside the same windows of
seqforecast's own loader; the forecasts in eval mode (dropout 0.1 and 0) and in train mode with
dropout 0. Prints the largest input difference and max |official - seqforecast| / max |official|.
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
from seqforecast.data import build_data  # noqa: E402
from seqforecast.published import load_official_itransformer  # noqa: E402

# dataset -> (official loader class, d_model, d_ff, e_layers, channels) at horizon 96
SETTINGS = {"etth1": ("Dataset_ETT_hour", 256, 256, 2, 7),
            "weather": ("Dataset_Custom", 512, 512, 3, 21)}


def check(code: Path, data_dir: str, name: str, dropout: float) -> list[str]:
    from data_provider import data_loader  # the official code's, from DIR
    from model.iTransformer import Model

    loader, d_model, d_ff, layers, channels = SETTINGS[name]
    torch.manual_seed(2023)
    official = Model(types.SimpleNamespace(
        seq_len=96, pred_len=96, output_attention=False, use_norm=True, d_model=d_model,
        embed="timeF", freq="h", dropout=dropout, class_strategy="projection", factor=1,
        n_heads=8, d_ff=d_ff, activation="gelu", e_layers=layers)).float()
    cfg = OmegaConf.to_container(compose_config([
        "experiment=itransformer", f"dataset={name}", f"data_dir={data_dir}",
        f"d_model={d_model}", f"ffn.d_ff={d_ff}", f"model.encoder_layers={layers}",
        f"model.dropout={dropout}"]), resolve=True)
    ours = load_official_itransformer(official.state_dict(), cfg, channels)
    dataset = getattr(data_loader, loader)(
        root_path=data_dir, data_path=Path(cfg["data"]["path"]).name, flag="test",
        size=[96, 48, 96], features="M", target="OT", timeenc=1, freq="h")
    data = build_data(cfg["data"], 0, torch.device("cpu"))
    index = list(range(64)) + list(range(len(dataset) - 64, len(dataset)))
    x, y, marks = (torch.tensor(np.stack([dataset[i][k] for i in index])).float()
                   for k in (0, 1, 2))
    src, target = data.test.src[index], data.test.target[index]
    lines = [f"{name}, dropout {dropout}: test windows official {len(dataset)}, seqforecast "
             f"{len(data.test)}; max |input difference| {(src[..., :channels] - x).abs().max():.1e}"
             f", calendar {(src[..., channels:] - marks).abs().max():.1e}, targets "
             f"{(target - y[:, -96:]).abs().max():.1e}"]
    return lines + official_gaps(official, ours, lambda m: m(x, marks, None, None),
                                 lambda m: m(torch.cat([x, marks], -1)), dropout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("code", type=Path, help="a checkout of thuml/iTransformer")
    parser.add_argument("--data-dir", default="data", help="where ETTh1.csv and weather.csv are")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.code.resolve()))
    for name in SETTINGS:
        for dropout in (0.1, 0.0):
            print("\n".join(check(args.code, str(Path(args.data_dir).resolve()), name, dropout)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
