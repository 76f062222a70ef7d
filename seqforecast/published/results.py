"""The published results a study shows beside its own rows: test MSE and MAE as the papers print
them, per table, cell (`<dataset>-<horizon>`) and forecaster. A study names a table
(`references: {published: <table>}`); a study model shows the published row of its own name
(a variant, e.g. `itransformer_bf16`, has none), the least-squares DLinear row shows
`dlinear`'s, and a row no study row stands beside is shown on its own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PublishedTable:
    source: str  # the paper and table, as the report cites it
    rows: dict[str, dict[str, tuple[float, float | None]]]  # cell -> forecaster -> (MSE, MAE)


def _at(horizon: int, by_dataset: dict) -> dict:
    return {f"{dataset}-{horizon}": rows for dataset, rows in by_dataset.items()}


TABLES = {
    # iTransformer (Liu et al. 2024, ICLR), Table 10, input 96: MSE and MAE as printed there.
    "itransformer_table10": PublishedTable(
        "Liu et al. 2024 (ICLR), iTransformer, Table 10 (input 96)",
        _at(96, {
            "etth1": {"itransformer": (0.386, 0.405), "patchtst": (0.414, 0.419),
                      "dlinear": (0.386, 0.400)},
            "etth2": {"itransformer": (0.297, 0.349), "patchtst": (0.302, 0.348),
                      "dlinear": (0.333, 0.387)},
            "ettm1": {"itransformer": (0.334, 0.368), "patchtst": (0.329, 0.367),
                      "dlinear": (0.345, 0.372)},
            "ettm2": {"itransformer": (0.180, 0.264), "patchtst": (0.175, 0.259),
                      "dlinear": (0.193, 0.292)},
            "weather": {"itransformer": (0.174, 0.214), "patchtst": (0.177, 0.218),
                        "dlinear": (0.196, 0.255)},
        })),
    # TimeXer (Wang et al. 2024, NeurIPS), Table 2: the EPF markets, input 168, horizon 24, MS.
    "timexer_epf": PublishedTable(
        "Wang et al. 2024 (NeurIPS), TimeXer, Table 2 (EPF: input 168, horizon 24, one target)",
        _at(24, {"np": {"timexer": (0.236, None)}, "pjm": {"timexer": (0.093, None)},
                 "be": {"timexer": (0.379, None)}, "fr": {"timexer": (0.385, None)},
                 "de": {"timexer": (0.440, None)}})),
    # PatchTST (Nie et al. 2023, ICLR), Table 3: PatchTST/64 (input 512), PatchTST/42 (input
    # 336) and DLinear (input 336, as Table 3 prints the DLinear paper's rows).
    "patchtst_table3": PublishedTable(
        "Nie et al. 2023 (ICLR), PatchTST, Table 3 (PatchTST/64: input 512; /42 and DLinear: "
        "336)",
        {**_at(96, {"etth1": {"PatchTST/64": (0.370, 0.400), "PatchTST/42": (0.375, 0.399),
                              "dlinear": (0.375, 0.399)},
                    "etth2": {"PatchTST/64": (0.274, 0.337), "PatchTST/42": (0.274, 0.336),
                              "dlinear": (0.289, 0.353)}}),
         **_at(192, {"etth1": {"PatchTST/64": (0.413, 0.429), "PatchTST/42": (0.414, 0.421),
                               "dlinear": (0.405, 0.416)},
                     "etth2": {"PatchTST/64": (0.341, 0.382), "PatchTST/42": (0.339, 0.379),
                               "dlinear": (0.383, 0.418)}}),
         **_at(336, {"etth1": {"PatchTST/64": (0.422, 0.440), "PatchTST/42": (0.431, 0.436),
                               "dlinear": (0.439, 0.443)},
                     "etth2": {"PatchTST/64": (0.329, 0.384), "PatchTST/42": (0.331, 0.380),
                               "dlinear": (0.448, 0.465)}}),
         **_at(720, {"etth1": {"PatchTST/64": (0.447, 0.468), "PatchTST/42": (0.449, 0.466),
                               "dlinear": (0.472, 0.490)},
                     "etth2": {"PatchTST/64": (0.379, 0.422), "PatchTST/42": (0.379, 0.422),
                               "dlinear": (0.605, 0.551)}})}),
}


def published_table(name: str) -> PublishedTable:
    if name not in TABLES:
        raise KeyError(f"no published table {name!r}: choose from {', '.join(TABLES)}")
    return TABLES[name]
