"""The last SQL check of each spec, kept in the home for what cannot start Spark (Airflow's DAG
processor).

A spec's format is checked wherever it is read (`core.specs`); its SQL only by Spark's analyzer:
by `runoff check` and by every Spark command before it reads data (`jobs.streaming.resolve`).
Each records its finding here, `<home>/run/checks/<dataset>.json`: the SHA-256 of the spec file
it checked and the problem lines (none when the SQL resolves). `failed_checks` returns the
problems of the specs whose file is still the one checked; an edited file has no finding until
it is checked again. dags/runoff_spec_errors.py shows them as an import error, so a spec whose
SQL failed once is visible in Airflow's UI, not only in the log of the task it failed. Nothing is
written into a home that does not exist (`runoff check` never creates one).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from core.specs import DatasetSpec

CHECKS_DIR = Path("run") / "checks"


def digest(spec: DatasetSpec) -> str | None:
    """The SHA-256 of the spec's file as it is now; None when it cannot be read."""
    try:
        return hashlib.sha256(Path(spec.file).read_bytes()).hexdigest()
    except OSError:
        return None


def record_check(home: Path, spec: DatasetSpec, problems: Sequence[str]) -> None:
    """Keep the finding of a SQL check of `spec` (replacing the previous one)."""
    sha = digest(spec)
    if sha is None or not home.is_dir():
        return
    folder = home / CHECKS_DIR
    finding = {
        "dataset": spec.name,
        "file": str(spec.file),
        "sha256": sha,
        "checked_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "problems": list(problems),
    }
    # A finding that cannot be kept (a read-only home) costs Airflow's view, not the command.
    with contextlib.suppress(OSError):
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=folder, suffix=".tmp", delete=False) as out:
            json.dump(finding, out)
        os.replace(out.name, folder / f"{spec.name}.json")


def failed_checks(home: Path, specs: Iterable[DatasetSpec]) -> dict[str, list[str]]:
    """Per dataset whose last SQL check found problems in the file as it is now: the problem
    lines."""
    found: dict[str, list[str]] = {}
    for spec in specs:
        try:
            finding = json.loads((home / CHECKS_DIR / f"{spec.name}.json").read_text())
        except (OSError, ValueError):
            continue
        if finding.get("problems") and finding.get("sha256") == digest(spec):
            found[spec.name] = [str(line) for line in finding["problems"]]
    return found
