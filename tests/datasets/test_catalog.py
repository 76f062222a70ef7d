"""The catalog (configs/dataset/): every entry composes into a run's config with the published
borders, is listed by seqforecast-data with its state, and the real files verify where
../shared/data has them; a name that does not exist, a file not downloaded or not the entry's
are one line and exit 2."""

from pathlib import Path

import pytest

from seqforecast.config import compose_config, validate_config
from seqforecast.datasets import entries

from ..cli_helpers import REPO, run_cli

SHARED = REPO.parent / "shared" / "data"
ETT_MONTH = {"etth1": 24 * 30, "etth2": 24 * 30, "ettm1": 96 * 30, "ettm2": 96 * 30}


@pytest.mark.parametrize("name", sorted(entries()))
def test_an_entry_trains_on_its_file_with_the_published_borders(name):
    cfg = compose_config([f"dataset={name}"])
    validate_config(cfg)
    dataset, data = cfg.dataset, cfg.data
    assert data.name == "csv" and data.targets == "all" and data.time_column == "date"
    assert Path(data.path) == Path(cfg.data_dir) / dataset.file
    borders = [int(data.val_start), int(data.test_start), int(data.test_end)]
    if name in ETT_MONTH:  # 12/4/4 months of 30 days
        assert borders == [12 * ETT_MONTH[name], 16 * ETT_MONTH[name], 20 * ETT_MONTH[name]]
    else:  # TSLib's Dataset_Custom: int(0.7 n) train, int(0.2 n) test, the rest validation
        n = dataset.rows
        assert borders == [int(0.7 * n), n - int(0.2 * n), n]


def _data(*args):
    return run_cli(list(args), REPO, module="seqforecast.datasets", check=False)


@pytest.mark.skipif(not SHARED.is_dir(), reason="no ../shared/data beside this checkout")
def test_the_shared_files_verify_against_their_entries():
    listed = _data("list", f"data_dir={SHARED}")
    assert listed.returncode == 0, listed.stderr
    present = [name for name, e in entries().items() if (SHARED / e.file).is_file()]
    assert len(present) >= len(list(SHARED.glob("*.csv")))  # EPF/<market>.csv too
    for name in present:
        row = next(line for line in listed.stdout.splitlines() if line.startswith(name + " "))
        assert row.endswith("verified (SHA-256)"), row
    verified = _data("verify", *present, f"data_dir={SHARED}")
    assert verified.returncode == 0 and verified.stdout.count("verified (SHA-256)") == len(present)
    every = _data("verify", f"data_dir={SHARED}")  # no names: every dataset file there
    assert every.returncode == 0
    assert sorted(every.stdout.splitlines()) == sorted(verified.stdout.splitlines())


def test_bad_names_and_missing_or_wrong_files_are_one_line_and_exit_2(tmp_path):
    for args, message in [
        (["download", "etth9"], "dataset 'etth9' does not exist: choose one of be, de, "
                                "electricity, "),
        (["verify", "ettm1", f"data_dir={tmp_path}"], "dataset ettm1 is not downloaded: no "),
        (["fetch"], "give a command (list, download, verify)"),
        (["verify", f"data_dir={tmp_path}"], f"no dataset file in {tmp_path}"),
    ]:
        done = _data(*args)
        assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
        assert message in done.stderr
    (tmp_path / "ETTm1.csv").write_text("date,a,b\n2016-07-01 00:00:00,1,2\n")
    done = _data("verify", "ettm1", f"data_dir={tmp_path}")
    assert done.returncode == 2 and "is not dataset ettm1's" in done.stderr


def test_a_run_on_a_dataset_not_there_or_not_its_file_says_so(tmp_path):
    train = ["dataset=ettm1", f"data_dir={tmp_path}"]
    missing = run_cli(train, tmp_path, check=False)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    assert "dataset ettm1 is not downloaded" in missing.stderr
    assert "`seqforecast-data download ettm1`" in missing.stderr
    (tmp_path / "ETTm1.csv").write_text("date,a,b\n2016-07-01 00:00:00,1,2\n")
    other = run_cli(train, tmp_path, check=False)
    assert other.returncode == 2 and other.stderr.count("\n") == 1
    assert "its columns (date, a, b: 2 besides the first) are not dataset ettm1's" in other.stderr
    manual = run_cli(["dataset=weather", f"data_dir={tmp_path}"], tmp_path, check=False)
    assert manual.returncode == 2 and entries()["weather"].source in manual.stderr
