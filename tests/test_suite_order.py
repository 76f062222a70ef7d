"""The suite's own scheduling: the files conftest.py starts first (the longest) exist, and the
workers take files in that order, so the longest-first order does what it says."""

from pathlib import Path

from .conftest import LONGEST_FIRST

TESTS = Path(__file__).resolve().parent


def test_every_file_started_first_exists():
    files = {path.name for path in TESTS.rglob("test_*.py")}
    assert not [name for name in LONGEST_FIRST if name not in files]


def test_the_workers_take_the_files_in_that_order(pytestconfig):
    # pytest-xdist's default reorders them by their count of tests (conftest turns that off)
    assert getattr(pytestconfig.option, "loadscopereorder", False) is False
