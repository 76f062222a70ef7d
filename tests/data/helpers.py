"""What the data tests share."""

import math

from omegaconf import OmegaConf

from seqforecast.data.source_csv import CsvOptions


def csv_config(**values) -> dict:
    """data=csv's node as a run reads it: the schema's defaults, then `values`."""
    return OmegaConf.to_container(OmegaConf.structured(CsvOptions(**values)),
                                  enum_to_str=True)


def write_price_file(path, rows=200, gap_at=None):
    """An hourly price and a load (`time,price,load`): the price's mean fits 1e-15 apart alone
    and beside the load (numpy sums one column and two in another order). `gap_at`: that row's
    price empty."""
    lines = ["time,price,load"]
    for i in range(rows):
        price = "" if i == gap_at else round(math.sin(i * 0.3) * 10 + i * 0.01 + 30, 2)
        lines.append(f"2024-01-{1 + i // 24:02d} {i % 24:02d}:00,{price},"
                     f"{round(math.cos(i * 0.2) * 1000)}")
    path.write_text("\n".join(lines) + "\n")
    return path
