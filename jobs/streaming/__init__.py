"""What every streaming job shares, and nothing that belongs to one of them.

Owns: a dataset spec made executable as Spark columns and pure transforms (`dataset`), a spec
resolved by Spark's analyzer without reading data (`resolve`), Spark SQL text built from Python
values (`sql`), the query around a job's `foreachBatch` (trigger, checkpoint guard, progress
lines, the run's ledger row, the one failed-query handler: `query`) and known causes of a failure
as one line (`failures`). Signals (SIGTERM, a served command's interrupts) are `core.interrupts`.
Imports `jobs.checkpoints` and `jobs.spark`, nothing else of `jobs`.
"""
