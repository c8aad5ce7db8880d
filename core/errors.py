"""Errors a user can act on: the CLI prints their message as one line and exits non-zero."""

from __future__ import annotations


class RunoffError(Exception):
    """An error with a message meant for the user (no traceback unless --verbose)."""

    exit_code = 1


class ConfigError(RunoffError):
    """Bad configuration: the message names the key and the value at fault."""

    exit_code = 2


class LockHeldError(RunoffError):
    """Another live run holds the checkpoint lock."""

    exit_code = 3
