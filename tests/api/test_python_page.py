"""docs/python.md runs as written: its python blocks, in order, in one namespace, in a scratch
folder, and what they leave (the run dirs, the figure) is there."""

import re

import pytest

from ..cli_helpers import REPO, fits_in_process

pytest.importorskip("pandas")  # the dev extra installs it (the frames extra for users)
pytestmark = pytest.mark.slow  # trains: make test-fast skips it

PAGE = REPO / "docs" / "python.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_every_block_of_the_python_page_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the CLI block's child process
    code = blocks()
    assert len(code) == 6
    namespace: dict = {}
    with fits_in_process():  # the Forecaster's fits; the CLI block starts its own process
        for i, block in enumerate(code):
            exec(compile(block, f"{PAGE.name} block {i + 1}", "exec"), namespace)
    for run in ("runs/stores", "runs/stores-cv", "runs/cli"):
        assert (tmp_path / run / "metrics.json").is_file(), run
    assert (tmp_path / "north.png").stat().st_size > 0
