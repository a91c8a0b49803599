"""The error every operator tool raises for an expected failure: printed as one line, exit status 1."""
from __future__ import annotations


class CliError(Exception):
    """An error to print as one line (no traceback) before exiting with status 1."""
