"""The application `spark-submit` runs: `spark-submit jobs/cli/submit.py [--home H] <command> ...`.

Input: the `runoff` CLI arguments. Output: the command's exit code. `get_spark()` uses
`getOrCreate`, so the job picks up the session (master, conf) spark-submit prepared. Airflow's
`SparkSubmitOperator` runs every pipeline step through this file.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    # Python puts this file's directory (jobs/cli/) first on sys.path, where its modules would
    # shadow top-level ones of the same name: import from the repository root instead.
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != here]
    sys.path.insert(0, str(here.parents[1]))

    from jobs.cli.main import main

    sys.exit(main(sys.argv[1:]))
