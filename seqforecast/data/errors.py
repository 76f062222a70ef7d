"""The error every data reader raises for a file that cannot be used."""


class DataError(ValueError):
    """A data file that cannot be used; str(err) is the one line to show."""
