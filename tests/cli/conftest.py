"""Fixtures the end-to-end runs share."""

import pytest

from ..cli_helpers import write_ett_file


@pytest.fixture(scope="module")
def ett_file(tmp_path_factory):
    """A file in ETT's layout and length (cli_helpers.write_ett_file)."""
    return write_ett_file(
        tmp_path_factory.mktemp("ett") / "ett.csv")
