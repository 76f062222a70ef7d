"""Which runs were scored on the same windows: the fingerprints metrics.json records, read
alike for runs made before the file fingerprint (the former one only) and after (both)."""

from pathlib import Path

import pytest

from seqforecast.comparison.runs import CompareError, Run, check_comparable, window_prints


def _run(name: str, **split) -> Run:
    metrics = {"splits": {"test": {"windows": 60, **split}}}
    return Run(Path(name), 0, {"data.name": "csv", "data.out_len": 12}, [], metrics)


# A file's runs since 2026-12-05: the hash of its cells, and the former hash of its scaled
# targets, which a run beside exogenous columns puts elsewhere; a run from before: the former.
ALONE = {"fingerprint": "cells", "fingerprint_v1": "scaled-alone"}
BESIDE = {"fingerprint": "cells", "fingerprint_v1": "scaled-beside"}
BEFORE = {"fingerprint": "scaled-alone"}


def test_runs_that_record_the_file_fingerprint_compare_by_it():
    assert window_prints([ALONE, BESIDE]) == ["cells", "cells"]
    check_comparable([_run("a", **ALONE), _run("b", **BESIDE)], "test")
    with pytest.raises(CompareError, match="different test windows"):
        check_comparable([_run("a", **ALONE), _run("c", **{**BESIDE, "fingerprint": "other"})],
                         "test")


def test_runs_made_before_it_compare_by_the_former_one():
    assert window_prints([ALONE, BEFORE]) == ["scaled-alone", "scaled-alone"]
    check_comparable([_run("a", **ALONE), _run("old", **BEFORE)], "test")
    with pytest.raises(CompareError, match="different test windows"):  # as they were before
        check_comparable([_run("b", **BESIDE), _run("old", **BEFORE)], "test")
    synthetic = {"fingerprint": "targets"}  # one way only: the series are drawn
    assert window_prints([synthetic, synthetic]) == ["targets", "targets"]
