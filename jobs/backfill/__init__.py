"""`runoff backfill`: an idempotent re-run of the event times [start, end).

Owns: the interval and its rules (`interval`: parsing, predicates, which files and windows an
interval touches; pure) and the bounded batch job that replaces exactly that slice of bronze,
quarantine and silver (`job`). Imports `jobs.bronze`, `jobs.silver`, `jobs.streaming`,
`jobs.checkpoints`.
"""
