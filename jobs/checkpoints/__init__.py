"""Structured Streaming checkpoints: the one reader of Spark's files, the guard, landing changes.

Owns: reading a checkpoint's numbered logs (offsets, commits, the file source log, metadata:
`files`), runoff's own per-batch records and the checks of a checkpoint against its files and
tables (`guard`), and landing files changed after they were ingested (`landing_changes`).
Spark-free: small files only. Imports nothing else of `jobs`.
"""
