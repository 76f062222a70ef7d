"""Fixtures the end-to-end runs share."""

import pytest

from ..cli_helpers import load_script


@pytest.fixture(scope="module")
def ett_file(tmp_path_factory):
    """A file in ETT's layout and length (scripts/bench_longhorizon.py's smoke file)."""
    return load_script("bench_longhorizon.py").write_smoke_file(
        tmp_path_factory.mktemp("ett") / "ett.csv")
