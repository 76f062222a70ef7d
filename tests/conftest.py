import os

import pytest
import torch

# Without a GPU, Triton's interpreter runs its kernels on CPU tensors: how the suite proves the
# GPU kernels (seqforecast/attention/band_triton.py) equal to the explicit path. It is read when
# a kernel is defined, so before seqforecast is imported.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The files that train the most, longest first: `make test` runs files in parallel workers
# (pytest-xdist, --dist loadfile, one file per worker at a time, in collection order, which
# pytest_configure below keeps), so starting these first keeps a long file from starting last
# and running alone at the end.
# (tests/test_suite_order.py holds every name to a file that exists.)
LONGEST_FIRST = (  # by the files' summed times in one run (2026-12-07, AMD EPYC AVX2, two
    # workers: 127 s the first, 12 s the last; test_compile.py 150 s with an empty kernel cache)
    "test_train_default_matches_docs.py",
    "test_compile.py",
    "test_train_scale_out.py",
    "test_benchmarks.py",
    "test_study.py",
    "test_docs.py",
    "test_wheel_install.py",
    "test_band.py",
    "test_train_resume_and_failures.py",
    "test_forecaster.py",
    "test_validate.py",
    "test_python_page.py",
    "test_flops.py",
    "test_train_stacked.py",
    "test_train_realdata.py",
    "test_model.py",
    "test_train_csv.py",
    "test_official_driver.py",
    "test_patches.py",
    "test_train_longhorizon.py",
    "test_encoder.py",
    "test_timexer.py",
)


def pytest_configure(config):
    # pytest-xdist reorders files by their number of tests before handing them out
    # (--loadscope-reorder, its default), which puts a long file of one test last (the default
    # run: 93 s); off, the order above is the order they start in.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable for the rest


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from the same torch RNG state, so failures reproduce."""
    torch.manual_seed(0)


@pytest.fixture
def cwd(tmp_path):
    """An empty working directory for a CLI run (its outputs/ land there, not in the repo)."""
    path = tmp_path / "cwd"
    path.mkdir()
    return path
