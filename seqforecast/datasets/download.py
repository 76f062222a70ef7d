"""Getting a dataset file from its published address: resumable, checked, atomic.

The bytes go to `<file>.part` beside the file; a stopped download resumes from there (an HTTP
Range request; a server that ignores it sends the whole file again). Only a complete download
whose SHA-256 is the entry's (or, where none is recorded, whose rows and columns are) is renamed
over the file, so a truncated or corrupt download never replaces a good file: it is refused in
one line (DatasetError) and the file already there is kept.
"""

from __future__ import annotations

import http.client
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tqdm import tqdm

from ..config.schema import DatasetConfig
from .catalog import DatasetError
from .files import verify

CHUNK = 1 << 16
TIMEOUT_S = 60


def download(entry: DatasetConfig, folder: Path, *, progress: bool = True,
             say: Callable[[str], None] = print) -> Path:
    """The entry's file in `folder`, downloaded unless a verified copy is there already."""
    target = folder / entry.file
    if entry.url is None:
        raise DatasetError(
            f"dataset {entry.name} has no direct download: get {entry.file} from "
            f"{entry.source} (a download page) into {folder}, then run "
            f"`seqforecast-data verify {entry.name}`")
    if target.is_file():
        try:
            say(f"{entry.name}: {target} is already there, {verify(entry, target)}")
            return target
        except DatasetError:
            pass  # a damaged copy: fetch a good one (it is replaced only by a verified one)
    target.parent.mkdir(parents=True, exist_ok=True)  # EPF/NP.csv: its folder too
    part = target.with_name(target.name + ".part")
    _fetch(entry.url, part, progress, entry.name)
    try:
        what = verify(entry, part)
    except DatasetError as err:
        part.unlink(missing_ok=True)  # complete but wrong: resuming it cannot mend it
        kept = f"; {target} is kept as it was" if target.is_file() else ""
        raise DatasetError(f"{entry.name}: the download from {entry.url} is not the dataset's "
                           f"file ({str(err).split(': ', 1)[-1]}){kept}") from None
    os.replace(part, target)
    say(f"{entry.name}: {target}, {what}")
    return target


def _fetch(url: str, part: Path, progress: bool, name: str) -> None:
    """Append the rest of `url`'s bytes to `part` (all of them if the server sends the whole
    file again); DatasetError if the server or the connection fails before the end."""
    have = part.stat().st_size if part.is_file() else 0
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT_S)
    except urllib.error.HTTPError as err:
        if err.code == 416 and have:  # the range starts at the end: nothing is missing
            return
        raise DatasetError(f"{name}: {url} answered HTTP {err.code} ({err.reason})") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise DatasetError(f"{name}: cannot reach {url} ({reason})") from None
    with response:
        resumed = response.status == 206
        if not resumed:
            have = 0  # the whole file again
        length = response.headers.get("Content-Length")
        total = have + int(length) if length is not None else None
        got = have
        with part.open("ab" if resumed else "wb") as f, tqdm(
                total=total, initial=have, unit="B", unit_scale=True, desc=name,
                disable=not progress, leave=False) as bar:
            try:
                for block in iter(lambda: response.read(CHUNK), b""):
                    f.write(block)
                    got += len(block)
                    bar.update(len(block))
            except (OSError, http.client.HTTPException) as err:  # the connection broke:
                # what arrived stays for a resume
                raise DatasetError(f"{name}: the download stopped after {got} bytes ({err}); "
                                   f"run the command again to resume") from None
    if total is not None and got < total:
        raise DatasetError(f"{name}: the download stopped after {got} of {total} bytes; run "
                           f"the command again to resume")
