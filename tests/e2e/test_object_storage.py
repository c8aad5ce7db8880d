"""The pipeline with its data on object storage: `RUNOFF_DATA=s3a://...` against moto's S3 server.

An S3-compatible server on loopback (tests/s3_server.py) holds the landing files, the Delta
tables, the checkpoints and the quality results; the home keeps only the ledger, the Great
Expectations project and the report. The `runoff` CLI runs as it would for a user, with the
standard AWS environment variables and nothing else. Two deliveries: files written locally (the
independent computation's copy) and uploaded, then a file written by `runoff generate` into the
bucket itself. After each `runoff run`, bronze, quarantine and silver equal tests/expected.py
over the delivered files exactly (every line once), read through delta-rs with the same
credentials; a backfill of the day, reading landing and archive in the bucket, changes nothing;
`runoff status --json` and `runoff report` read the same tables; the secret key appears in no
output and no file of the home.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable
from upath import UPath

from core.config import RunoffConfig
from delta_tables.arrow import read_arrow
from jobs.checkpoints.landing_changes import check_landing, current_state, record_states
from jobs.samples import generate
from tests import expected
from tests.conftest import REPO_ROOT
from tests.readme import fresh_shell, readme_blocks
from tests.s3_server import S3_CLIENT_VARIABLES, S3Server, s3_server
from tests.spark.jobs.bronze.test_job import canonical
from tests.tables import assert_silver_matches_expected

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DATASET = "events"


def runoff(env: dict[str, str], *argv: str) -> str:
    """Run the CLI; its output (which must hold no secret) or a failure with it."""
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"runoff {' '.join(argv)} exited {done.returncode}:\n{output}"
    return output


def sync_landing(landing: str, local: Path) -> None:
    """Copy every object below the landing URI into `local` (same relative paths)."""
    root = UPath(landing)
    for obj in root.rglob("*"):
        if obj.is_file():
            target = local / obj.relative_to(root).as_posix()
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(obj.read_bytes())


def relative(uri: str, landing: str) -> str:
    assert uri.startswith(f"{landing}/"), uri
    return uri[len(landing) + 1 :]


def assert_exact(config: RunoffConfig, landing: str, local: Path) -> None:
    """Bronze, quarantine and silver hold the delivered files' lines exactly once."""
    files = expected.read_landing(DATASET, local)
    bronze = read_arrow(str(config.bronze_path(DATASET))).to_pylist()
    quarantine = read_arrow(str(config.quarantine_path(DATASET))).to_pylist()
    name = {f.path: str(f.path.relative_to(local)) for f in files}
    assert Counter(relative(r["_source_file"], landing) for r in bronze) == Counter(
        {name[f.path]: f.valid for f in files if f.valid}
    )
    got = [{**r, "_source_file": relative(r["_source_file"], landing)} for r in bronze]
    want = [{**r, "_source_file": name[f.path]} for f in files for r in f.records]
    assert canonical(got) == canonical(want)
    assert sorted(
        (relative(r["_source_file"], landing), r["_line_number"], r["_raw"]) for r in quarantine
    ) == sorted(
        (name[path], number, raw.decode("utf-8", "replace"))
        for path, number, raw, _ in expected.malformed_lines(files)
    )
    assert_silver_matches_expected(config, DATASET, landing=local)


@contextmanager
def command_lines(every: float = 0.05) -> Iterator[list[str]]:
    """Every distinct command line of the machine's processes, sampled while the block runs
    (what `ps -eo args` shows any local user)."""
    seen: set[str] = set()
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            for entry in Path("/proc").iterdir():
                # (a process may end meanwhile)
                with contextlib.suppress(OSError, UnicodeDecodeError):
                    if entry.name.isdigit():
                        line = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
                        seen.add(line.decode())
            stop.wait(every)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    found: list[str] = []
    try:
        yield found
    finally:
        stop.set()
        sampler.join()
        found.extend(sorted(seen))


def test_the_pipeline_on_s3_is_exact_and_keeps_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with s3_server(tmp_path / "s3.log") as s3, command_lines() as seen:
        _pipeline_on(s3, tmp_path, monkeypatch)
    # The drivers' JVMs were sampled, and no process showed a credential on its command line.
    assert any("org.apache.spark.deploy.SparkSubmit" in line for line in seen)
    credentials = [s3.env["AWS_SECRET_ACCESS_KEY"], s3.env["AWS_ACCESS_KEY_ID"]]
    assert [line for line in seen if any(c in line for c in credentials)] == []


def _pipeline_on(s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in s3.env.items():
        monkeypatch.setenv(key, value)  # delta-rs and s3fs in this process: the same credentials
    data, home, local = s3.uri("pipeline"), tmp_path / "home", tmp_path / "delivered"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("RUNOFF_")},
        **s3.env,
        "RUNOFF_HOME": str(home),
        "RUNOFF_DATA": data,
        "RUNOFF_SPARK_MASTER": "local[2]",
    }
    config = RunoffConfig.from_sources(env=env)
    landing = f"{data}/landing/{DATASET}"
    assert str(config.landing_dir(DATASET)) == landing

    # Delivery 1: written locally, uploaded as a producer would.
    generate(DATASET, local, files=2, rows_per_file=150, seed=7, malformed_rate=0.05)
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        (UPath(landing) / path.relative_to(local).as_posix()).write_bytes(path.read_bytes())
    outputs = [runoff(env, "run", DATASET)]
    assert_exact(config, landing, local)
    first_delivery = sorted(p.name for p in local.rglob("*.json"))
    assert len(first_delivery) == 2

    # Delivery 2, the next hours: `runoff generate` writes into the bucket itself.
    later = ("--start", "2024-01-01T03:00:00+00:00", "--seed", "8")
    outputs.append(runoff(env, "generate", DATASET, "--files", "1", *later))
    sync_landing(landing, local)
    assert len(expected.landing_files(local)) == 3
    outputs.append(runoff(env, "run", DATASET))
    assert_exact(config, landing, local)

    # A backfill of the day reads landing and archive on the store, and changes nothing.
    versions = {t: DeltaTable(str(config.bronze_path(DATASET))).version() for t in ("bronze",)}
    outputs.append(runoff(env, "backfill", DATASET, "--start", "2024-01-01", "--end", "2024-01-02"))
    assert_exact(config, landing, local)
    assert {t: DeltaTable(str(config.bronze_path(DATASET))).version() for t in versions} == versions

    # status and report read the same tables through delta-rs.
    status = json.loads(runoff(env, "status", DATASET, "--json"))
    outputs.append(json.dumps(status))
    assert status["data"] == data
    # The second run's batch archived the first run's files (cleanSource=archive), in the bucket.
    assert (status["landing"]["files"], status["landing"]["pending"]) == (1, 0)
    archived = [p for p in UPath(f"{data}/archive/bronze").rglob("*.json") if p.is_file()]
    assert sorted(p.name for p in archived) == first_delivery
    rows = {t["table"]: t["rows"] for t in status["tables"]}
    assert rows["bronze_events"] == len(read_arrow(str(config.bronze_path(DATASET))))
    assert rows["quarantine_events"] == len(read_arrow(str(config.quarantine_path(DATASET))))
    outputs.append(runoff(env, "report", DATASET))
    report = home / "reports" / f"{DATASET}.html"
    assert "bronze_events" in report.read_text()

    # The quality results are on the store too; the home holds no data.
    results = read_arrow(str(config.quality_results_path)).to_pylist()
    assert {r["table"] for r in results} >= {"bronze_events", "events_action_hourly"}
    assert not [
        p for p in ("landing", "archive", "checkpoints", "delta/bronze") if (home / p).exists()
    ]
    assert not (home / "quality" / "results").exists()

    secret = s3.env["AWS_SECRET_ACCESS_KEY"]
    assert not [o for o in outputs if secret in o]
    leaked = [p for p in home.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaked == []


def test_an_unknown_scheme_is_refused_in_one_line(tmp_path: Path) -> None:
    env: dict[str, Any] = {**os.environ, "RUNOFF_HOME": str(tmp_path), "RUNOFF_DATA": "gs://b/x"}
    done = subprocess.run(
        [sys.executable, "-m", "jobs.cli", "status", DATASET],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "runoff: error: RUNOFF_DATA='gs://b/x': use a local folder or s3a://<bucket>/<prefix> "
        "(other URI schemes are not supported)"
    ]


def test_compose_passes_the_variables_this_test_gives_runoff() -> None:
    """docker/compose.yaml's runoff services get RUNOFF_DATA and the AWS variables from the
    environment or docker/.env (no value in the file: nothing secret, passed through when set)."""
    import yaml

    from tests.conftest import REPO_ROOT

    compose = yaml.safe_load((REPO_ROOT / "docker" / "compose.yaml").read_text())
    variables = {"RUNOFF_DATA", *S3_CLIENT_VARIABLES}
    for name in ("airflow-scheduler", "spark-worker", "runoff"):
        environment = compose["services"][name]["environment"]
        assert {v: environment.get(v, "missing") for v in variables} == dict.fromkeys(variables), (
            name
        )


def test_an_archived_object_is_compared_by_its_content_not_its_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Spark's move to the archive is a copy on S3: a new LastModified, the same ETag (the MD5 of
    the content). The landing changes check compares size and ETag: the move is no change, a
    rewrite of the same size is."""
    with s3_server(tmp_path / "s3.log") as s3:
        for key, value in s3.env.items():
            monkeypatch.setenv(key, value)
        env = {**s3.env, "RUNOFF_HOME": str(tmp_path / "home"), "RUNOFF_DATA": s3.uri("moved")}
        config = RunoffConfig.from_sources(env=env)
        landed = config.landing_dir(DATASET) / "date=2024-01-02" / "a.json"
        landed.write_text('{"action": "Open"}\n')
        # The file source log's entry, as a bronze batch leaves it.
        modified = landed.fs.info(landed.path)["LastModified"]
        entry = {"path": str(landed), "timestamp": int(modified.timestamp() * 1000), "batchId": 0}
        checkpoint = config.checkpoint_dir("bronze", DATASET)
        (checkpoint / "sources" / "0" / "0").write_text("v1\n" + json.dumps(entry))
        first = check_landing(config, DATASET, runs=[])
        assert first.changed == []
        state = first.new_states[str(landed)]
        assert state.etag == hashlib.md5(b'{"action": "Open"}\n').hexdigest()
        record_states(checkpoint, first.new_states)

        time.sleep(1.1)  # LastModified counts seconds: the copy's is later
        archived = config.archived(str(landed))
        landed.fs.copy(landed.path, archived.path)  # what S3A's rename does
        landed.fs.rm(landed.path)
        moved = current_state(archived)
        assert moved is not None and moved[0].mtime_ms > state.mtime_ms
        assert check_landing(config, DATASET, runs=[]).changed == []

        archived.write_text('{"action": "Shut"}\n')  # the same size, other content
        (changed,) = check_landing(config, DATASET, runs=[]).changed
        assert (changed.path, changed.archived, changed.recorded) == (str(landed), True, state)
        assert changed.now.etag == hashlib.md5(b'{"action": "Shut"}\n').hexdigest()


def test_the_readme_block_typed_into_a_fresh_shell_runs_on_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README's object-storage block, typed into a fresh shell (tests/readme.py) after the
    walkthrough's `export PATH`, in an empty folder: only its placeholders change (the
    credentials `...`, and the endpoint's port, to this test's server's; the bucket is
    `my-lake` as written). Every line of the two generated files is then in bronze or
    quarantine, as tests/expected.py reads the files (landing or archive), and status lists both
    tables."""
    (block,) = [b for b in readme_blocks() if "export RUNOFF_DATA=s3a://" in b.text]
    with s3_server(tmp_path / "s3.log", bucket="my-lake") as s3:
        port = s3.endpoint.rsplit(":", 1)[1]
        key, secret = s3.env["AWS_ACCESS_KEY_ID"], s3.env["AWS_SECRET_ACCESS_KEY"]
        script = block.text.replace(
            "AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=...",
            f"AWS_ACCESS_KEY_ID={key} AWS_SECRET_ACCESS_KEY={secret}",
        ).replace("http://127.0.0.1:9000", f"http://127.0.0.1:{port}")
        assert script.count(key) == 1 and script.count(port) == 1, script
        (work := tmp_path / "work").mkdir()
        (user := tmp_path / "user").mkdir()
        printed = fresh_shell(
            f'export PATH={REPO_ROOT}/.venv/bin:$PATH\n{script}echo "@@ exit $?"',
            home=user,
            cwd=work,
            timeout=600,
        )
        assert printed.rstrip().endswith("@@ exit 0"), printed[-5000:]
        assert secret not in printed

        for name, value in s3.env.items():
            monkeypatch.setenv(name, value)
        data = "s3a://my-lake/runoff"
        config = RunoffConfig.from_sources(home=work / ".runoff", env={"RUNOFF_DATA": data})
        delivered = tmp_path / "delivered"
        for where in (f"landing/{DATASET}", "archive"):  # ingested files move to the archive
            if UPath(f"{data}/{where}").exists():
                sync_landing(f"{data}/{where}", delivered / where)
        files = [expected.read_file(DATASET, p) for p in expected.landing_files(delivered)]
        assert len(files) == 2
        valid, malformed, _blank = expected.counts(files)
        assert valid > 0
        assert len(read_arrow(str(config.bronze_path(DATASET)))) == valid
        assert len(read_arrow(str(config.quarantine_path(DATASET)))) == malformed
        assert "bronze_events" in printed and "quarantine_events" in printed, printed
