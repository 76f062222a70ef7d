"""The field's benchmark files by name (`dataset=<name>`): the catalog (configs/dataset/, one
entry per file), checking a file against its entry, and getting it (`seqforecast-data`)."""

from .catalog import DatasetError, data_dir, entries, entry
from .files import check_header, require, verify

__all__ = ["DatasetError", "check_header", "data_dir", "entries", "entry", "require", "verify"]
