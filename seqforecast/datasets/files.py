"""A dataset file checked against its entry: its header (the time column, then as many
channels as the entry says), its data rows, and its SHA-256 where the entry records one."""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path

from ..config.schema import DatasetConfig
from .catalog import DatasetError

TIME_COLUMN = "date"  # every benchmark file's first column


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_header(entry: DatasetConfig, path: Path) -> None:
    """The file's columns are the entry's: `date`, then `channels` columns (DatasetError)."""
    with path.open(newline="", errors="replace") as f:
        header = next(csv.reader(f), [])
    channels = len(header) - 1
    if not header or header[0].strip() != TIME_COLUMN or channels != entry.channels:
        shown = ", ".join(h.strip() for h in header[:4]) + (", ..." if len(header) > 4 else "")
        raise DatasetError(
            f"{path}: its columns ({shown}: {max(channels, 0)} besides the first) are not "
            f"dataset {entry.name}'s ({TIME_COLUMN}, then {entry.channels} channels)"
        )


def count_rows(path: Path) -> int:
    """Data rows: the lines after the header (a last line without its newline counted)."""
    newlines, last = 0, b"\n"
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            newlines += block.count(b"\n")
            last = block[-1:]
    return max(newlines + (last != b"\n") - 1, 0)


def verify(entry: DatasetConfig, path: Path) -> str:
    """What `path` holds, in words, if it is the entry's file; DatasetError (one line) if it is
    missing or is not."""
    if not path.is_file():
        raise DatasetError(f"dataset {entry.name} is not downloaded: no {path}")
    if entry.sha256 is not None:
        found = sha256(path)
        if found != entry.sha256:
            raise DatasetError(f"{path}: SHA-256 {found[:16]}... is not dataset {entry.name}'s "
                               f"({entry.sha256[:16]}...): a changed or damaged copy")
        return "verified (SHA-256)"
    check_header(entry, path)
    rows = count_rows(path)
    if rows != entry.rows:
        raise DatasetError(f"{path}: {rows} data rows, dataset {entry.name} has {entry.rows}")
    return "present (rows and columns match; no checksum recorded)"


def require(config: dict) -> None:
    """A run's dataset=<name> file (a resolved config): there, with the entry's columns; one
    line saying how to get it otherwise. A run whose data.path names another file is not
    checked: the entry describes its own file only."""
    node = config["dataset"]
    if node is None:
        return
    dataset = DatasetConfig(**node)
    path = Path(config["data"]["path"])
    if path != Path(config["data_dir"]) / dataset.file:
        return
    if not path.is_file():
        get = (f"get it with `seqforecast-data download {dataset.name}`" if dataset.url else
               f"get {dataset.file} from {dataset.source} (a download page)")
        raise DatasetError(
            f"dataset {dataset.name} is not downloaded: no {path}; {get}, or point data_dir= "
            f"(or SEQFORECAST_DATA) at the folder that holds it")
    check_header(dataset, path)
