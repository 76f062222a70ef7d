"""seqforecast-data list | download NAME... | verify [NAME...]   [data_dir=<folder>]
(or python -m seqforecast.datasets ...)

The field's benchmark files by name (configs/dataset/): `list` shows each with its rows,
channels, licence and source, and whether it is in the data folder and verified; `download`
gets files from their published addresses (resumable; a copy is kept only if its SHA-256, or
where none is recorded its rows and columns, are the entry's), or says in one line where to get
one that needs a manual step; `verify` checks the files there. The data folder is data_dir=,
else the SEQFORECAST_DATA environment variable, else ./data: where `dataset=<name>` looks.
A name that does not exist, a failed or wrong download, a missing or damaged file: one line,
exit 2.
"""

from __future__ import annotations

import sys

from ..cli_args import UsageError, run_tool
from .catalog import DatasetError, data_dir, entries, entry
from .download import download
from .files import verify

USAGE = " ".join(line.strip() for line in __doc__.strip().splitlines()[:1])
COMMANDS = ("list", "download", "verify")


def parse(argv: list[str]) -> tuple[str, list[str], str | None]:
    """(command, names, data_dir)."""
    words, folder = [], None
    for arg in argv:
        key, sep, value = arg.partition("=")
        if sep and key == "data_dir":
            folder = value
        elif sep or arg.startswith("-"):
            raise UsageError(f"unexpected argument {arg!r}; usage: {USAGE}")
        else:
            words.append(arg)
    if not words or words[0] not in COMMANDS:
        raise UsageError(f"give a command ({', '.join(COMMANDS)}); usage: {USAGE}")
    command, names = words[0], words[1:]
    if command == "download" and not names:
        raise UsageError(f"download which? give dataset names ({', '.join(entries())})")
    if command == "list" and names:
        raise UsageError(f"list takes no names; usage: {USAGE}")
    for name in names:
        entry(name)  # a name that does not exist: one line, listing those that do
    return command, names, folder


def state(dataset, folder) -> str:
    """Whether the dataset's file is in `folder`, and verified, in words."""
    path = folder / dataset.file
    if not path.is_file():
        return "missing"
    try:
        return verify(dataset, path)
    except DatasetError as err:
        return f"DAMAGED: {err}"


def run(argv: list[str]) -> None:
    command, names, given = parse(argv)
    folder = data_dir(given)
    if command == "list":
        print(f"data folder: {folder}")
        print(f"{'name':<12} {'rows':>7} {'channels':>8}  {'interval':<8} status")
        for name, e in entries().items():
            print(f"{name:<12} {e.rows:>7} {e.channels:>8}  {e.interval:<8} {state(e, folder)}")
            how = "download" if e.url else "manual step"
            print(f"{'':<12} {e.file}; licence: {e.licence}; source ({how}): {e.source}")
        return
    if command == "verify" and not names:  # every dataset file in the folder
        names = [name for name, e in entries().items() if (folder / e.file).is_file()]
        if not names:
            raise DatasetError(f"no dataset file in {folder}: `seqforecast-data list` says "
                               f"where each comes from")
    failed = []
    for name in names:
        try:
            if command == "download":
                download(entry(name), folder, progress=sys.stderr.isatty())
            else:
                path = folder / entry(name).file
                print(f"{name}: {path}, {verify(entry(name), path)}")
        except DatasetError as err:
            if len(names) == 1:
                raise
            print(f"error: {err}", file=sys.stderr)
            failed.append(name)
    if failed:
        raise DatasetError(f"{len(failed)} of {len(names)} failed: {', '.join(failed)}")


def main(argv: list[str] | None = None) -> int:
    return run_tool(argv, __doc__, run)


if __name__ == "__main__":
    sys.exit(main())
