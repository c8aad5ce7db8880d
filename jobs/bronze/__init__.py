"""Bronze: landing files -> the Delta bronze table and quarantine, exactly once.

Owns: parsing landing lines into bronze rows and quarantine rows, pure DataFrame -> DataFrame
functions that never touch paths (`parse`, shared with backfill), and the streaming job that
wires the landing folder through them into Delta (`job`: `run`, `cmd_bronze`). Imports
`jobs.streaming` and `jobs.checkpoints`.
"""
