"""What every streaming job shares, and nothing that belongs to one of them.

Owns: a dataset spec made executable as Spark columns and pure transforms (`dataset`), the
query around a job's `foreachBatch` (trigger, checkpoint guard, progress lines, the run's ledger
row, the one failed-query handler: `query`), known causes of a failure as one line (`failures`)
and SIGTERM handling (`interrupts`). Imports `jobs.checkpoints` and `jobs.spark`, nothing else
of `jobs`.
"""
