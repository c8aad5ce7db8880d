"""runoff's jobs: the PySpark pipeline (pure transforms + thin `run`) and the `runoff` commands.

Sub-packages by role, each importing only those below it in this list (tests/unit/test_layers.py):

- `cli/`: the command line, the warm driver (`runoff serve`) and its client, spark-submit's entry.
- `lineage`: OpenLineage events of the runs the ledger records (when OpenLineage is configured).
- `samples/`: sample landing data for the seed datasets, and `runoff demo`.
- `report/`: `runoff report`: read (delta-rs), chart (matplotlib), page (Jinja2).
- `ops/`: operator commands: check, run (bronze >> silver >> validate), validate, status, reset,
  maintain.
- `backfill/`: `runoff backfill`: the interval rules and the bounded batch re-run.
- `bronze/`, `silver`: the two streaming jobs (landing -> bronze + quarantine; bronze -> silver).
- `streaming/`: what every streaming job shares: a spec as Spark columns and transforms, the spec
  resolver, SQL text, the one query runner, failure explanations.
- `checkpoints/`: the one reader of Spark's checkpoint files, the checkpoint guard, landing changes.
- `spark`: the SparkSession builder, the Python entry point (`jobs.spark.get_spark`).

`datasets/` holds the seed datasets' YAML specs.
"""
