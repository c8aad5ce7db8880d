"""Sample-data generators and `runoff generate`, checked against tests/expected.py.

Every count is recomputed from the landing bytes by tests/expected.py (which shares no code with
the generators); no Spark. The generators (jobs/samples) write what the seed specs
(jobs/datasets/*.yaml) declare: tests/expected.py's restatement of the specs is checked here
where it needs no Spark (the record types in tests/spark/jobs/bronze/test_parse.py).
"""

from __future__ import annotations

import bisect
import io
import itertools
import json
import math
import statistics
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from core import console as console_module
from core.config import RunoffConfig
from core.errors import ConfigError, RunoffError
from core.specs import interval_seconds
from delta_tables.catalog import Catalog
from jobs.cli.main import main
from jobs.samples import GENERATORS, generate, generate_dataset, spec_for
from jobs.samples.activity import GT_LABELS, PHONES
from jobs.samples.generator import GeneratedFile, GeneratorSpec, PlannedFile, write_files
from jobs.samples.sensors import SIGNAL_RANGES
from tests import expected
from tests.seeds import SEED_NAMES, seed, seed_spec

JSON_DATASETS = ("events", "sensors", "activity")
ALL_DATASETS = (*JSON_DATASETS, "lines")
MAX_LATENESS = {
    "events": timedelta(minutes=30),
    "sensors": timedelta(minutes=4),
    "activity": timedelta(minutes=4),
}


def spec(dataset: str) -> GeneratorSpec:
    return spec_for(dataset)


def late_rate_for(dataset: str, rate: float) -> float:
    return 0.0 if dataset == "lines" else rate


def assert_closes_follow_opens(records: Sequence[dict[str, Any]]) -> None:
    """A pairing with every Close strictly after its Open exists iff, at every time t, the
    Closes at or before t are no more than the Opens strictly before t."""
    per_time: dict[datetime, Counter[str]] = defaultdict(Counter)
    for record in records:
        per_time[record["event_time"]][record["action"]] += 1
    opens_before = closes = 0
    for moment in sorted(per_time):
        closes += per_time[moment]["Close"]
        assert closes <= opens_before, f"more Closes than earlier Opens at {moment}"
        opens_before += per_time[moment]["Open"]
    # and so, hour by hour, the running count of Opens never falls behind the Closes
    hourly: dict[datetime, Counter[str]] = defaultdict(Counter)
    for moment, actions in per_time.items():
        hourly[moment.replace(minute=0, second=0, microsecond=0)].update(actions)
    running: Counter[str] = Counter()
    for hour in sorted(hourly):
        running.update(hourly[hour])
        assert running["Open"] >= running["Close"], hour


# -- the CLI default run: 100,000 events in 50 files -----------------------------------------
@pytest.fixture(scope="module")
def default_events(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, int, str, list[expected.LandingFile]]:
    """`runoff --home <tmp> generate events --seed 7`: landing dir, exit code, stdout, files."""
    home = tmp_path_factory.mktemp("default-events")
    out = io.StringIO()
    # `_file`, not the `file` property: reading `file` returns the stdout of this moment, and
    # restoring it would pin the console to a stream pytest closes later.
    before = console_module.console._file
    console_module.console._file = out
    try:
        code = main(["--home", str(home), "generate", "events", "--seed", "7"])
    finally:
        console_module.console._file = before
    landing = home / "landing" / "events"
    return landing, code, out.getvalue(), expected.read_landing("events", landing)


def test_cli_writes_100000_events_in_50_files(
    default_events: tuple[Path, int, str, list[expected.LandingFile]],
) -> None:
    landing, code, stdout, files = default_events

    assert code == 0
    assert stdout == (
        f"generated 50 events files: 100000 records, 0 malformed lines, 0 late records "
        f"in {landing}\n"
    )
    assert len(files) == 50
    assert [f.valid for f in files] == [2000] * 50
    assert expected.counts(files) == (100_000, 0, 0)
    assert {f.date for f in files} == {date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)}
    records = expected.valid_records(files)
    assert {r["action"] for r in records} == {"Open", "Close"}
    assert min(r["event_time"] for r in records) >= datetime(2024, 1, 1, tzinfo=UTC)
    assert max(r["event_time"] for r in records) < datetime(2024, 1, 3, 2, tzinfo=UTC)
    # time-ordered files, each within its own day: no record is late
    assert expected.late_counts(files) == [0] * 50
    assert all(r["event_date"] == f.date for f in files for r in f.records)


def test_default_events_closes_follow_opens(
    default_events: tuple[Path, int, str, list[expected.LandingFile]],
) -> None:
    records = expected.valid_records(default_events[3])
    assert_closes_follow_opens(records)
    counts = Counter(r["action"] for r in records)
    assert counts["Open"] > counts["Close"] > 0.9 * counts["Open"]


@pytest.mark.parametrize(
    ("files", "rows", "start", "late_rate"),
    [
        (6, 3, "2024-02-29T22:59:58Z", 0.0),  # tiny files: most Closes land in later files
        (8, 400, "2024-02-29T21:30:00Z", 0.15),  # across midnight, with late records
    ],
)
def test_closes_follow_opens_in_every_shape(
    tmp_path: Path, files: int, rows: int, start: str, late_rate: float
) -> None:
    spec("events").generate(
        tmp_path, files=files, rows_per_file=rows, start=start, seed=4, late_rate=late_rate
    )
    landing = expected.read_landing("events", tmp_path)
    assert expected.counts(landing) == (files * rows, 0, 0)
    assert_closes_follow_opens(expected.valid_records(landing))
    # in delivery order too: every Close can be paired with an Open that arrived before it
    # (greedy: a Close takes the newest unpaired Open older than itself, the one fewest later
    # Closes could use)
    unpaired: list[datetime] = []
    for record in (r for f in landing for r in f.records):
        if record["action"] == "Open":
            bisect.insort(unpaired, record["event_time"])
        else:
            at = bisect.bisect_left(unpaired, record["event_time"])
            assert at > 0, f"a Close at {record['event_time']} arrived before any Open of it"
            del unpaired[at - 1]


# -- determinism ---------------------------------------------------------------------------
@pytest.mark.parametrize("dataset", ALL_DATASETS)
def test_same_seed_same_bytes_other_seed_other_bytes(dataset: str) -> None:
    def files(seed: int) -> list[tuple[Path, bytes]]:
        planned = spec(dataset).plan(
            files=4,
            rows_per_file=150,
            seed=seed,
            malformed_rate=0.05,
            late_rate=late_rate_for(dataset, 0.05),
        )
        return [(p.relative_path, p.content) for p in planned]

    first, again, other = files(5), files(5), files(6)
    assert first == again
    assert all(a[1] != b[1] and a[0] != b[0] for a, b in zip(first, other, strict=True))


@pytest.mark.parametrize("dataset", ALL_DATASETS)
def test_malformed_and_late_lines_leave_the_records_unchanged(dataset: str) -> None:
    """Separate random streams: the valid records of a seed do not depend on the extras."""
    plain = spec(dataset).plan(files=3, rows_per_file=120, seed=9)
    spoiled = spec(dataset).plan(
        files=3,
        rows_per_file=120,
        seed=9,
        malformed_rate=0.1,
        late_rate=late_rate_for(dataset, 0.1),
    )

    def records(planned: list[PlannedFile]) -> list[bytes]:
        return sorted(
            line
            for p in planned
            for line in expected.split_lines(p.content)
            if expected.classify(dataset, line, day=p.date).kind == "valid"
        )

    assert records(plain) == records(spoiled)


def test_generate_writes_exactly_the_planned_files(tmp_path: Path) -> None:
    planned = spec("sensors").plan(files=3, rows_per_file=50, seed=1, malformed_rate=0.1)
    written = spec("sensors").generate(
        tmp_path, files=3, rows_per_file=50, seed=1, malformed_rate=0.1
    )

    assert [w.path for w in written] == [tmp_path / p.relative_path for p in planned]
    assert [w.path.read_bytes() for w in written] == [p.content for p in planned]
    assert expected.landing_files(tmp_path) == sorted(w.path for w in written)
    assert [(w.date, w.records, w.malformed, w.late, w.blank) for w in written] == [
        (p.date, p.records, p.malformed, p.late, p.blank) for p in planned
    ]


def test_every_entry_point_writes_the_same_files(tmp_path: Path, config: RunoffConfig) -> None:
    options: dict[str, Any] = {"files": 2, "rows_per_file": 40, "seed": 3}
    by_generator = GENERATORS["activity"].generate(landing_dir=tmp_path / "a", **options)
    by_name = generate("activity", tmp_path / "b", **options)
    by_config = generate_dataset(config, "activity", **options)

    def contents(written: list[GeneratedFile], root: Path) -> list[tuple[Path, bytes]]:
        return [(w.path.relative_to(root), w.path.read_bytes()) for w in written]

    reference = contents(by_generator, tmp_path / "a")
    assert len(reference) == 2
    assert contents(by_name, tmp_path / "b") == reference
    # into the spec's source.path, below the home
    landing = Catalog.load(config).landing_dir("activity")
    assert landing == config.home / "landing" / "activity"
    assert contents(by_config, landing) == reference


def test_dataset_defaults() -> None:
    assert (spec("events").default_files, spec("events").default_rows_per_file) == (50, 2000)
    for dataset in ("sensors", "activity", "lines"):
        assert (spec(dataset).default_files, spec(dataset).default_rows_per_file) == (20, 1000)
    for dataset in ALL_DATASETS:
        assert spec(dataset).default_start == datetime(2024, 1, 1, tzinfo=UTC)
        assert spec(dataset).dataset == dataset


# -- malformed lines -----------------------------------------------------------------------
@pytest.mark.parametrize("dataset", ALL_DATASETS)
def test_malformed_rate_gives_exactly_the_reported_bad_lines(tmp_path: Path, dataset: str) -> None:
    written = spec(dataset).generate(
        tmp_path, files=3, rows_per_file=101, seed=2, malformed_rate=0.033
    )
    landing = expected.read_landing(dataset, tmp_path)
    n_bad = round(0.033 * 303)  # 10

    assert sum(w.malformed for w in written) == n_bad
    assert expected.counts(landing) == (303, n_bad, math.ceil(n_bad / 20))
    assert [(f.valid, f.malformed, f.blank) for f in landing] == [
        (w.records, w.malformed, w.blank) for w in written
    ]
    reasons = Counter(reason.split(" for ")[0] for *_, reason in expected.malformed_lines(landing))
    if dataset == "lines":
        assert reasons == {"invalid UTF-8": n_bad}
    else:
        time_field = expected.EVENT_TIME_FIELD[dataset]
        assert set(reasons) == {"invalid UTF-8", "not JSON", "wrong type", f"missing {time_field}"}


def test_cli_malformed_rate_reports_the_exact_count(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--home", str(home), "generate", "sensors", "--files", "5", "--seed", "3"]
    code = main([*argv, "--malformed-rate", "0.01"])
    landing_dir = home / "landing" / "sensors"
    landing = expected.read_landing("sensors", landing_dir)

    assert code == 0
    assert capsys.readouterr().out == (
        f"generated 5 sensors files: 5000 records, 50 malformed lines, 0 late records "
        f"in {landing_dir}\n"
    )
    assert expected.counts(landing) == (5000, 50, 3)


def test_malformed_lines_are_never_line_breaks_or_carriage_returns() -> None:
    for dataset in ALL_DATASETS:
        for planned in spec(dataset).plan(files=2, rows_per_file=200, malformed_rate=0.5):
            assert b"\r" not in planned.content
            assert planned.content.endswith(b"\n")


# -- schemas -------------------------------------------------------------------------------
@pytest.mark.parametrize("dataset", ALL_DATASETS)
def test_expected_restates_the_seed_specs(dataset: str) -> None:
    """tests/expected.py restates what the specs declare (the record's types are compared on
    Spark's parse of the schema in tests/spark/jobs/bronze/test_parse.py)."""
    declared = seed_spec(dataset)
    assert declared.name == dataset
    assert declared.source_format == ("text" if dataset in expected.TEXT_DATASETS else "json")
    assert declared.source_path == f"landing/{dataset}"
    assert expected.REQUIRED[dataset] == declared.required
    assert expected.BRONZE_RENAMES.get(dataset, {}) == dict(declared.rename)
    assert declared.select == ()  # bronze keeps every record column (renamed)
    assert expected.SILVER_TABLES[dataset] == declared.silver_tables
    if dataset in expected.WATERMARK:
        watermark = expected.WATERMARK[dataset].total_seconds()
        assert interval_seconds(declared.watermark) == watermark
    if dataset in expected.JSON_DATASETS:
        # the schema's columns, in order (their types: test_bronze_transform.py)
        names = [column.split()[0] for column in declared.schema.split(",")]
        assert names == list(expected.FIELDS[dataset])
        assert expected.EVENT_TIME_FIELD[dataset] in declared.event_time
        assert expected.EVENT_TIME_FIELD[dataset] in declared.required


def test_lost_signal_alert_is_declared_with_the_expected_threshold() -> None:
    lost = seed_spec("sensors").silver_spec("sensors_lost_signal")
    assert lost.having == f"count < {expected.LOST_SIGNAL_THRESHOLD}"
    assert (lost.window, lost.keys, lost.output) == (
        "1 minute",
        ("deviceId", "deviceType"),
        "append",
    )


@pytest.mark.parametrize("dataset", JSON_DATASETS)
def test_valid_records_match_the_record_schema(tmp_path: Path, dataset: str) -> None:
    schema_types = expected.FIELDS[dataset]
    renames = dict(seed_spec(dataset).rename)
    bronze_names = [renames.get(n, n) for n in schema_types]

    spec(dataset).generate(tmp_path, files=2, rows_per_file=100, seed=8)
    json_types = {"long": int, "double": float, "string": str, "timestamp": str}
    for path in expected.landing_files(tmp_path):
        for line in expected.split_lines(path.read_bytes()):
            value = json.loads(line)
            assert list(value) == list(schema_types)  # every field, in schema order
            for name, kind in schema_types.items():
                assert type(value[name]) is json_types[kind], (name, value)
    landing = expected.read_landing(dataset, tmp_path)
    assert expected.counts(landing) == (200, 0, 0)
    for record in expected.valid_records(landing):
        assert list(record) == [
            *bronze_names,
            "event_time",
            "event_date",
            "_source_file",
            "_rescued_data",
        ]
        assert record["_rescued_data"] is None  # the generator writes only declared fields


def test_lines_are_text_records(tmp_path: Path) -> None:
    assert seed("lines").record_schema is None  # the line is the record
    assert seed_spec("lines").source_format == "text"
    written = spec("lines").generate(tmp_path / "l", files=2, rows_per_file=300, seed=8)
    assert {w.path.suffix for w in written} == {".txt"}
    assert {w.path.suffix for w in spec("events").generate(tmp_path / "e", files=1)} == {".json"}
    records = expected.valid_records(expected.read_landing("lines", tmp_path / "l"))
    text = "\n".join(r["line"] for r in records)
    assert len(records) == 600
    assert "'" in text and "," in text and "-" in text
    assert any(w.isupper() and len(w) > 2 for w in text.split())
    assert any(ord(c) > 127 for c in text)  # accented words
    counts = {row["word"]: row["count"] for row in expected.lines_word_counts(records)}
    assert counts["don't"] > 0 and counts["café"] > 0
    assert all(w == w.lower() and w for w in counts)


def test_sensors_look_like_a_fleet_of_devices(tmp_path: Path) -> None:
    spec("sensors").generate(tmp_path, files=10, seed=1)  # 10,000 signals, about 21 minutes
    records = expected.valid_records(expected.read_landing("sensors", tmp_path))
    devices = {(r["deviceId"], r["deviceType"]) for r in records}

    assert len(records) == 10_000
    assert len(devices) == 20
    assert {kind for _, kind in devices} == set(SIGNAL_RANGES)
    for record in records:
        low, high = SIGNAL_RANGES[record["deviceType"]]
        assert low <= record["signalStrength"] <= high
        assert record["event_time"].microsecond % 1000 == 0  # milliseconds
    gaps: dict[str, list[float]] = defaultdict(list)
    last: dict[str, datetime] = {}
    for record in sorted(records, key=lambda r: r["event_time"]):
        if record["deviceId"] in last:
            gap = record["event_time"] - last[record["deviceId"]]
            gaps[record["deviceId"]].append(gap.total_seconds())
        last[record["deviceId"]] = record["event_time"]
    assert all(2.0 <= statistics.median(g) <= 3.0 for g in gaps.values())
    lost = expected.closed_windows(
        expected.sensors_lost_signal(records),
        expected.max_event_time(records),
        expected.WATERMARK["sensors"],
    )
    assert len({row["deviceId"] for row in lost}) >= 3  # devices that went quiet
    assert all(1 <= row["count"] < expected.LOST_SIGNAL_THRESHOLD for row in lost)


def test_activity_readings_look_like_the_reference_data(tmp_path: Path) -> None:
    spec("activity").generate(tmp_path, files=5, rows_per_file=400, seed=1)
    records = expected.valid_records(expected.read_landing("activity", tmp_path))

    assert {r["User"] for r in records} <= set("abcdefghi")
    assert len({r["User"] for r in records}) >= 5
    assert {r["Device"] for r in records} <= set(PHONES)
    assert {r["gt"] for r in records} <= set(GT_LABELS)
    assert all(r["Model"] == r["Device"].rsplit("_", 1)[0] for r in records)
    for r in records:
        assert 0 < r["Arrival_Time"] * 1_000_000 - r["Creation_Time"] < 300_000_000  # ns
    last_index: dict[str, int] = {}
    for r in sorted(records, key=lambda r: r["Creation_Time"]):
        assert r["User_ID"] > last_index.get(r["Device"], 0)
        last_index[r["Device"]] = r["User_ID"]


# -- late records and days -------------------------------------------------------------------
@pytest.mark.parametrize("dataset", JSON_DATASETS)
def test_late_records_arrive_at_the_requested_rate(tmp_path: Path, dataset: str) -> None:
    written = spec(dataset).generate(
        tmp_path, files=5, rows_per_file=300, seed=6, late_rate=0.1, malformed_rate=0.02
    )
    landing = expected.read_landing(dataset, tmp_path)

    assert sum(w.late for w in written) == 150
    assert expected.late_counts(landing) == [w.late for w in written]
    assert expected.late_counts(landing)[0] == 0
    assert expected.counts(landing)[0] == 1500
    assert timedelta(0) < expected.max_lateness(landing) <= MAX_LATENESS[dataset]
    assert expected.max_lateness(landing) <= expected.WATERMARK[dataset] / 2


def test_late_rate_beyond_what_the_files_allow_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^late rate 0\.9 asks for 2700 late records but only \d+ records are close "
        r"enough to a later file on the same day: lower the late rate or add files$",
    ):
        spec("events").generate(tmp_path, files=3, rows_per_file=1000, late_rate=0.9)
    assert expected.landing_files(tmp_path) == []


def test_lines_have_no_late_records(tmp_path: Path) -> None:
    with pytest.raises(
        ConfigError,
        match=r"^dataset 'lines' has no event time in its records: late records do not apply "
        r"\(use a late rate of 0\)$",
    ):
        spec("lines").generate(tmp_path, late_rate=0.1)


@pytest.mark.parametrize("dataset", ALL_DATASETS)
def test_files_never_span_midnight(tmp_path: Path, dataset: str) -> None:
    rows = 200 if dataset == "events" else 300
    spec(dataset).generate(
        tmp_path,
        files=12,
        rows_per_file=rows,
        start="2024-06-30T23:56:30Z",
        seed=12,
        late_rate=late_rate_for(dataset, 0.1),
    )
    landing = expected.read_landing(dataset, tmp_path)

    assert len({f.date for f in landing}) >= 2
    assert all(r["event_date"] == f.date for f in landing for r in f.records)
    assert expected.counts(landing) == (12 * rows, 0, 0)


@pytest.mark.parametrize("dataset", ("sensors", "activity"))
def test_streams_stay_continuous_across_midnight(tmp_path: Path, dataset: str) -> None:
    spec(dataset).generate(
        tmp_path, files=5, rows_per_file=1000, start="2024-06-30T23:57:00Z", seed=3
    )
    times = sorted(
        r["event_time"] for r in expected.valid_records(expected.read_landing(dataset, tmp_path))
    )
    assert times[0].date() < times[-1].date()
    assert max(b - a for a, b in itertools.pairwise(times)) < timedelta(seconds=3)


# -- placement on disk -----------------------------------------------------------------------
def test_files_appear_atomically(tmp_path: Path) -> None:
    """A reader polling the landing folder never sees a partial file, nor a temp file."""
    planned = spec("events").plan(files=30, rows_per_file=500, seed=2)
    final = {tmp_path / p.relative_path: p.content for p in planned}
    seen: dict[Path, set[bytes]] = defaultdict(set)
    visible: list[int] = []
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            paths = expected.landing_files(tmp_path)
            visible.append(len(paths))
            for path in paths:
                seen[path].add(path.read_bytes())

    def slowly(files: Sequence[PlannedFile]) -> Iterator[PlannedFile]:
        for planned_file in files:
            time.sleep(0.002)  # leave the reader time to look between files
            yield planned_file

    reader = threading.Thread(target=poll)
    reader.start()
    try:
        write_files(tmp_path, slowly(planned))
    finally:
        done.set()
        reader.join()

    assert set(seen) <= set(final)
    assert all(contents == {final[path]} for path, contents in seen.items())
    assert any(0 < n < len(planned) for n in visible)  # it watched the folder fill up
    assert sorted(p.name for p in tmp_path.rglob(".*")) == []  # no temp file left
    assert expected.landing_files(tmp_path) == sorted(final)


def test_another_seed_or_start_never_overwrites_earlier_files(tmp_path: Path) -> None:
    first = spec("sensors").generate(tmp_path, files=3, rows_per_file=100, seed=1)
    before = {w.path: (w.path.read_bytes(), w.path.stat().st_mtime_ns) for w in first}
    second = spec("sensors").generate(tmp_path, files=3, rows_per_file=100, seed=2)
    third = spec("sensors").generate(
        tmp_path, files=3, rows_per_file=100, seed=1, start="2024-01-01T00:01:00Z"
    )
    again = spec("sensors").generate(tmp_path, files=3, rows_per_file=100, seed=1)

    paths = [w.path for w in (*first, *second, *third)]
    assert len(set(paths)) == 9
    assert expected.landing_files(tmp_path) == sorted(paths)
    # the same options name the same files with the same bytes: left untouched
    assert [w.path for w in again] == [w.path for w in first]
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in before} == before


def test_names_sort_in_delivery_order_and_mtimes_increase(tmp_path: Path) -> None:
    written = spec("activity").generate(
        tmp_path, files=8, rows_per_file=20, seed=4, start="2024-05-01T23:59:50Z"
    )
    paths = [w.path for w in written]
    assert sorted(paths) == paths
    assert all(w.path.parent.name == f"date={w.date.isoformat()}" for w in written)
    mtimes_ms = [p.stat().st_mtime_ns // 1_000_000 for p in paths]
    assert all(a < b for a, b in itertools.pairwise(mtimes_ms))
    name = paths[0].name
    assert {w.date for w in written} == {date(2024, 5, 1), date(2024, 5, 2)}
    assert name.startswith("part-20240501T23595") and "-00000-s4-" in name
    assert name.endswith(".json")


def test_unwritable_landing_dir_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "landing").write_text("not a folder")
    folder = tmp_path / "landing" / "events" / "date=2024-01-01"
    with pytest.raises(
        RunoffError, match=f"^cannot write landing file under {folder}: Not a directory$"
    ):
        spec("events").generate(tmp_path / "landing" / "events", files=1, rows_per_file=1)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"files": 0}, "files=0 must be a whole number of at least 1"),
        ({"rows_per_file": -1}, "rows_per_file=-1 must be a whole number of at least 1"),
        ({"malformed_rate": 1.5}, "malformed_rate=1.5 must be a number between 0 and 1"),
        ({"late_rate": -0.1}, r"late_rate=-0.1 must be a number between 0 and 1"),
        (
            {"start": "notadate"},
            r"start 'notadate' is not an ISO-8601 date or time \(e.g. 2024-01-01T00:00:00Z\)",
        ),
    ],
)
def test_bad_options_name_the_option(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{message}$"):
        spec("events").plan(**options)


def test_every_seed_dataset_has_a_generator() -> None:
    assert sorted(GENERATORS) == sorted(SEED_NAMES) == sorted(ALL_DATASETS)
    assert {name: g.dataset for name, g in GENERATORS.items()} == {n: n for n in SEED_NAMES}
    assert {g.record_format for g in GENERATORS.values()} == {"json", "text"}
    for name, generator in GENERATORS.items():
        assert spec_for(name) is generator
        assert generator.record_format == seed_spec(name).source_format


def test_a_dataset_without_a_generator_is_refused() -> None:
    with pytest.raises(
        ConfigError,
        match=r"^dataset 'mine' has no sample-data generator \(generators exist for: "
        r"activity, events, lines, sensors\)$",
    ):
        spec_for("mine")
    with pytest.raises(ConfigError, match=r"^dataset 'mine' has no sample-data generator"):
        generate("mine", Path("/nonexistent"))


@pytest.mark.parametrize("dataset", ALL_DATASETS)
def test_demo_sizes_are_a_plan_the_generator_can_make(dataset: str) -> None:
    """`runoff demo`'s sample of each dataset: exact counts, malformed and late lines."""
    demo = dict(spec(dataset).demo)
    assert set(demo) <= {"files", "rows_per_file", "malformed_rate", "late_rate"}
    assert demo["files"] >= 2 and demo["rows_per_file"] >= 1
    planned = spec(dataset).plan(seed=0, **demo)
    total = demo["files"] * demo["rows_per_file"]
    landing = [
        [expected.classify(dataset, line, day=p.date) for line in expected.split_lines(p.content)]
        for p in planned
    ]
    kinds = Counter(line.kind for lines in landing for line in lines)
    assert len(planned) == demo["files"]
    assert kinds["valid"] == total
    assert kinds["malformed"] == round(demo.get("malformed_rate", 0.0) * total) > 0
    assert sum(p.late for p in planned) == round(demo.get("late_rate", 0.0) * total)


# -- tests/expected.py itself, on lines written by hand --------------------------------------
@pytest.mark.parametrize(
    ("dataset", "raw", "kind", "reason"),
    [
        ("events", b'{"time":1704067200,"action":"Open"}', "valid", None),
        ("events", b'{"time":1704067200,"action":"Open","extra":[1]}', "valid", None),
        ("events", b"", "blank", None),
        ("events", b" \t ", "blank", None),
        ("events", b'{"time":1704067200,"action":"Op\xffen"}', "malformed", "invalid UTF-8"),
        ("events", b'{"time":1704067200,"act', "malformed", "not JSON"),
        ("events", b"[1, 2]", "malformed", "not a JSON object"),
        ("events", b'{"time":"abc","action":"Open"}', "malformed", "wrong type for time"),
        ("events", b'{"time":1.5,"action":"Open"}', "malformed", "wrong type for time"),
        ("events", b'{"time":true,"action":"Open"}', "malformed", "wrong type for time"),
        ("events", b'{"time":1704067200,"action":5}', "malformed", "wrong type for action"),
        ("events", b'{"action":"Open"}', "malformed", "missing time"),
        ("events", b'{"time":null,"action":"Open"}', "malformed", "missing time"),
        (
            "sensors",
            b'{"timestamp":"2024-01-01T00:00:02.317Z","deviceId":"d",'
            b'"deviceType":"smoke","signalStrength":-70}',
            "valid",
            None,
        ),
        (
            "sensors",
            b'{"timestamp":"yesterday","deviceId":"d","deviceType":"smoke","signalStrength":-70.5}',
            "malformed",
            "wrong type for timestamp",
        ),
        (
            "sensors",
            b'{"timestamp":1704067200,"deviceId":"d","deviceType":"smoke","signalStrength":-70.5}',
            "malformed",
            "wrong type for timestamp",
        ),
        (
            "sensors",
            b'{"timestamp":"2024-01-01T00:00:02.317Z","deviceId":"d",'
            b'"deviceType":"smoke","signalStrength":"strong"}',
            "malformed",
            "wrong type for signalStrength",
        ),
        (
            "activity",
            b'{"Creation_Time":1,"Device":"s3_1","User":"a","gt":"sit","x":1,"y":2,"z":3.5}',
            "valid",
            None,
        ),
        (
            "activity",
            b'{"Creation_Time":1,"Device":"s3_1","User":"a","gt":"sit","x":1,"y":2,'
            b'"z":3.5,"Index":"7"}',
            "malformed",
            "wrong type for Index",
        ),
        ("lines", b"It's a caf\xc3\xa9.", "valid", None),
        ("lines", b"It's a caf\xe9.", "malformed", "invalid UTF-8"),
        ("lines", b"  ", "blank", None),
    ],
)
def test_expected_classifies_lines(dataset: str, raw: bytes, kind: str, reason: str | None) -> None:
    line = expected.classify(dataset, raw, day=date(2024, 1, 1))
    assert (line.kind, line.reason) == (kind, reason)


def test_expected_records_carry_bronze_columns_and_event_time() -> None:
    activity = expected.classify(
        "activity",
        b'{"Arrival_Time":1704067200127,"Creation_Time":1704067200125387556,"Device":"s3_1",'
        b'"Index":7,"Model":"s3","User":"a","gt":"sit","x":1,"y":2.5,"z":-3.25}',
        path=Path("/l/date=2024-01-01/p.json"),
        day=date(2024, 1, 1),
    ).record
    assert activity == {
        "Arrival_Time": 1704067200127,
        "Creation_Time": 1704067200125387556,
        "Device": "s3_1",
        "User_ID": 7,
        "Model": "s3",
        "User": "a",
        "gt": "sit",
        "x": 1.0,
        "y": 2.5,
        "z": -3.25,
        "event_time": datetime(2024, 1, 1, 0, 0, 0, 125387, tzinfo=UTC),
        "event_date": date(2024, 1, 1),
        "_source_file": "/l/date=2024-01-01/p.json",
        "_rescued_data": None,
    }
    line = expected.classify("lines", b"Hello", day=date(2024, 3, 2)).record
    assert line is not None
    assert line["event_time"] == datetime(2024, 3, 2, tzinfo=UTC)
    assert "_rescued_data" not in line  # text datasets rescue nothing


def test_expected_rescues_the_undeclared_fields_as_text() -> None:
    event = expected.classify(
        "events",
        b'{"z":1.5,"time":1704067200,"note":"x","action":"Open","nested":{"a":[1,"b"]},'
        b'"flag":false,"gone":null}',
    ).record
    assert event is not None
    assert (event["time"], event["action"]) == (1704067200, "Open")
    # the record's order; strings as they are, other values as compact JSON
    assert event["_rescued_data"] == (
        '{"z":"1.5","note":"x","nested":"{\\"a\\":[1,\\"b\\"]}","flag":"false","gone":null}'
    )


def test_expected_words_split_like_spark() -> None:
    assert expected.words("Don't STOP—naïve Café's 42 x_y  'tis, o'clock!") == [
        "don't",
        "stop",
        "naïve",
        "café's",
        "x",
        "y",
        "'tis",
        "o'clock",
    ]
    assert expected.words(" ,. 7 ") == []


def test_expected_windows_and_watermark() -> None:
    def at(minute: int, second: int = 0) -> datetime:
        return datetime(2024, 1, 1, 10, minute, second, tzinfo=UTC)

    assert expected.windows(at(7, 30), timedelta(minutes=10), timedelta(minutes=5)) == [
        at(0),
        at(5),
    ]
    assert expected.windows(at(10), timedelta(minutes=10), timedelta(minutes=5)) == [at(5), at(10)]
    events = [
        {"event_time": at(1), "action": "Open"},
        {"event_time": at(7), "action": "Open"},
        {"event_time": at(8), "action": "Close"},
    ]
    assert expected.events_action_sliding(events) == [
        {
            "window_start": datetime(2024, 1, 1, 9, 55, tzinfo=UTC),
            "window_end": at(5),
            "action": "Open",
            "count": 1,
        },
        {"window_start": at(0), "window_end": at(10), "action": "Close", "count": 1},
        {"window_start": at(0), "window_end": at(10), "action": "Open", "count": 2},
        {"window_start": at(5), "window_end": at(15), "action": "Close", "count": 1},
        {"window_start": at(5), "window_end": at(15), "action": "Open", "count": 1},
    ]
    signals = [
        {"event_time": at(0, s), "deviceId": "d1", "deviceType": "smoke", "signalStrength": -70.0}
        for s in (1, 20, 40)
    ] + [
        {"event_time": at(m, 5), "deviceId": "d2", "deviceType": "camera", "signalStrength": v}
        for m, v in ((0, -40.0), (0, -30.0), (2, -35.0))
    ]
    lost = expected.sensors_lost_signal(signals)
    assert [(r["window_start"], r["deviceId"], r["count"]) for r in lost] == [
        (at(0), "d1", 3),
        (at(0), "d2", 2),
        (at(2), "d2", 1),
    ]
    assert expected.closed_windows(lost, at(12), timedelta(minutes=10)) == lost[:2]
    by_type = expected.sensors_type_signal(signals)
    assert by_type[0] == {
        "window_start": at(0),
        "window_end": at(1),
        "deviceType": "camera",
        "count": 2,
        "min_signal": -40.0,
        "max_signal": -30.0,
        "avg_signal": -35.0,
    }


def test_expected_late_counts_follow_delivery_order() -> None:
    def landing(*minutes: int) -> expected.LandingFile:
        lines = tuple(
            expected.Line(
                i,
                b"",
                "valid",
                record={"event_time": datetime(2024, 1, 1, 0, m, tzinfo=UTC)},
            )
            for i, m in enumerate(minutes, start=1)
        )
        return expected.LandingFile(path=Path("f"), date=None, lines=lines)

    files = [landing(0, 5, 9), landing(8, 10, 12), landing(12, 15)]
    assert expected.late_counts(files) == [0, 1, 0]
    assert expected.max_lateness(files) == timedelta(minutes=1)


def test_the_built_in_datasets_are_the_ones_with_sample_generators() -> None:
    """Bronze suggests `runoff generate` for a dataset whose spec is built in (its spec file in
    the seed folder): every built-in dataset has a generator, and only those do."""
    from core.specs import SEED_DIR
    from jobs.samples import GENERATORS

    assert set(GENERATORS) == {p.stem for p in SEED_DIR.glob("*.yaml")}
