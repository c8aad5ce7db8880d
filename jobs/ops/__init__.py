"""Operator commands over a dataset's tables and checkpoints.

Owns: `runoff check` (a dry run of the specs: `check`), `runoff run` (bronze >> silver >>
validate in one session: `pipeline`), `runoff validate` (`validate`), `runoff status`
(`status`), `runoff quarantine` (`quarantine`), `runoff reset` (`reset`), `runoff rebuild`
(`rebuild`) and `runoff maintain` (`maintain`). Imports the jobs (`bronze`, `silver`,
`backfill`) and what they import.
"""
