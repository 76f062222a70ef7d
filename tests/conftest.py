import pytest
import torch

# The files that train the most, longest first: `make test` runs files in parallel workers
# (pytest-xdist, --dist loadfile, one file per worker at a time, in collection order), so
# starting these first keeps a long file from starting last and running alone at the end.
LONGEST_FIRST = (
    "test_robustness.py",
    "test_csv_cli.py",
    "test_scale_out.py",
    "test_regression.py",
    "test_cli.py",
    "test_compare.py",
    "test_realdata.py",
    "test_tensorboard_and_evaluate.py",
)


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
