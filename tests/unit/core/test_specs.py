"""`core.specs`: reading dataset specs, and refusing bad ones with one line per problem."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.specs import SEED_DIR, SpecError, SpecScan, interval_seconds, load_spec, scan

GOOD = """\
name: shop
source: {format: json}
schema: "id STRING, ts STRING, amount DOUBLE"
event_time: "to_timestamp(ts)"
silver:
  - table: shop_hourly
    window: "1 hour"
    keys: [id]
    measures: {n: "count(*)", total: "sum(amount)"}
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(text)
    return path


def problems(path: Path) -> tuple[str, ...]:
    with pytest.raises(SpecError) as refused:
        load_spec(path)
    assert str(refused.value) == "\n".join(refused.value.problems)
    assert refused.value.exit_code == 2
    return refused.value.problems


def test_defaults_of_a_minimal_spec(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "shop", GOOD))
    assert (spec.name, spec.file, spec.source_format, spec.source_path) == (
        "shop",
        tmp_path / "shop.yaml",
        "json",
        "landing/shop",
    )
    assert (spec.watermark, spec.schema_evolution, spec.schedule) == (
        "10 minutes",
        "rescue",
        "@hourly",
    )
    assert (spec.required, spec.rename, spec.select, spec.rules, spec.expectations) == (
        (),
        (),
        (),
        (),
        (),
    )
    (silver,) = spec.silver
    assert silver.measures == (("n", "count(*)"), ("total", "sum(amount)"))
    assert silver.key_columns == ("window_start", "window_end", "id")
    assert silver.columns == ("window_start", "window_end", "id", "n", "total")
    assert (silver.output, silver.slide, silver.partition_by) == ("update", None, ())


def test_keys_and_required_fields_within_structs(tmp_path: Path) -> None:
    text = GOOD.replace("keys: [id]", "keys: [user.address.city, {country: user.country}, id]")
    text = text.replace("silver:", "required: [id, user.country]\nsilver:")
    spec = load_spec(write(tmp_path, "shop", text))
    (silver,) = spec.silver
    assert spec.required == ("id", "user.country")
    assert silver.keys == ("user_address_city", "country", "id")
    assert silver.key_sources == (
        ("user_address_city", "user.address.city"),
        ("country", "user.country"),
        ("id", "id"),
    )
    assert silver.key_columns == (
        "window_start",
        "window_end",
        "user_address_city",
        "country",
        "id",
    )
    # plain keys keep no paths: a spec read before keys had paths is read the same
    assert load_spec(write(tmp_path / "plain", "shop", GOOD)).silver[0].key_paths == ()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("  - table: shop_hourly\n", "  - table: Shop\n"),
            "silver[0].table: 'Shop' does not match",
        ),
        (
            ('window: "1 hour"', 'window: "1 hour"\n    slide: "2 hours"'),
            "silver[0].slide: the slide is longer than the window",
        ),
        (('window: "1 hour"', 'slide: "5 minutes"'), "silver[0].slide: a slide needs a window"),
        (
            ('window: "1 hour"', 'window: "1 hour"\n    output: apend'),
            "silver[0].output: 'apend' is not one of ['update', 'append']",
        ),
        (
            ('window: "1 hour"', "output: append"),
            "silver[0].output: append emits closed windows only: it needs a window",
        ),
        (("keys: [id]", "keys: [id, id]"), "silver[0].keys: ['id', 'id'] has non-unique elements"),
        (
            ("keys: [id]", "keys: [user.id, user_id]"),
            "silver[0].keys: two keys are column 'user_id': name one of them",
        ),
        (
            ("keys: [id]", "keys: [user.id, {user_id: id}]"),
            "silver[0].keys: two keys are column 'user_id': name one of them",
        ),
        (("keys: [id]", "keys: [user..id]"), "silver[0].keys[0]: 'user..id' is not valid under"),
        (("keys: [id]", "keys: [{a: b, c: d}]"), "silver[0].keys[0]: {'a': 'b', 'c': 'd'} is not"),
        (("silver:", "required: [user.]\nsilver:"), "required[0]: 'user.' does not match"),
        (
            ("keys: [id]", "keys: [window_start]"),
            "silver[0]: column 'window_start' is derived from the window: rename it",
        ),
        (('n: "count(*)"', 'id: "count(*)"'), "silver[0].measures.id: is also a key"),
        (
            ("keys: [id]", "keys: [id]\n    partition_by: [amount]"),
            "silver[0].partition_by: "
            "'amount' is neither a key nor window_date (the window's UTC day)",
        ),
        (("format: json", "format: csv"), "source.format: 'csv' is not one of ['json', 'text']"),
        (
            ("silver:", "colour: red\nsilver:"),
            "colour: unknown key (allowed: bronze, description, "
            "event_time, expectations, name, required, rules, schedule, schema, schema_evolution, "
            "silver, source, watermark)",
        ),
        (
            ("silver:", 'schedule: "every day"\nsilver:'),
            "schedule: 'every day' is neither a cron "
            "expression nor one of @once, @continuous, @hourly, @daily, @weekly, @monthly, "
            "@quarterly, @yearly",
        ),
        (
            ("silver:", 'watermark: "1 fortnight"\nsilver:'),
            "watermark: '1 fortnight' does not match",
        ),
        (
            ("silver:", "expectations: {shop_daily: []}\nsilver:"),
            "expectations.shop_daily: no such table (tables: bronze, quarantine, shop_hourly)",
        ),
        (
            ("silver:", "bronze: {rename: {id: event_time}}\nsilver:"),
            "bronze.rename.id: 'event_time' is a column runoff adds itself",
        ),
        (("name: shop", "name: shops"), "name: 'shops' differs from the file name 'shop'"),
        (
            (
                "silver:",
                "expectations: {shop_hourly: [{expect: expect_column_values_to_not_be_null, "
                "column: n, severity: quarantine}]}\nsilver:",
            ),
            "expectations.shop_hourly[0].severity: quarantine moves bronze rows: use it on bronze",
        ),
        (
            (
                "silver:",
                "expectations: {bronze: [{expect: expect_column_mean_to_be_between, "
                "column: amount, severity: quarantine}]}\nsilver:",
            ),
            "expectations.bronze[0].severity: quarantine needs a row-level expectation: one of "
            "expect_column_values_to_not_be_null, ",
        ),
    ],
)
def test_a_bad_spec_names_file_key_and_problem(
    tmp_path: Path, change: tuple[str, str], expected: str
) -> None:
    assert change[0] in GOOD
    path = write(tmp_path, "shop", GOOD.replace(change[0], change[1], 1))
    (line,) = problems(path)
    assert line.startswith(f"{path}: {expected}"), line


def test_every_problem_of_a_file_is_listed(tmp_path: Path) -> None:
    path = write(tmp_path, "shop", "name: shop\nsource: {format: csv}\nschema: 3\n")
    assert problems(path) == (
        f"{path}: (top level): 'event_time' is a required property",
        f"{path}: schema: 3 is not of type 'string'",
        f"{path}: source.format: 'csv' is not one of ['json', 'text']",
    )


def test_not_yaml_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path, "shop", GOOD.replace("keys: [id]", "keys: [id"))
    (line,) = problems(path)
    assert line.startswith(f"{path}: line 9: not valid YAML (")


def test_scan_keeps_good_specs_and_refuses_clashes(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    write(mine, "shop", GOOD)
    events = write(mine, "events", (SEED_DIR / "events.yaml").read_text())
    clash = write(mine, "zshop", GOOD.replace("name: shop", "name: zshop"))
    broken = write(mine, "broken", "name: [\n")
    found = scan([SEED_DIR, mine])
    assert sorted(found.specs) == ["activity", "events", "lines", "sensors", "shop"]
    assert found.specs["events"].file == SEED_DIR / "events.yaml"
    assert set(found.problems) == {events, clash, broken}
    hourly, sliding = "events_action_hourly", "events_action_sliding"
    seed = SEED_DIR / "events.yaml"
    assert found.problems[events] == (
        f"{events}: name: dataset 'events' is already declared in {seed}",
        f"{events}: silver: table '{hourly}' is already declared in {seed}",
        f"{events}: silver: table '{sliding}' is already declared in {seed}",
    )
    assert found.problems[clash] == (
        f"{clash}: silver: table 'shop_hourly' is already declared in {mine / 'shop.yaml'}",
    )


def test_scan_refuses_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"datasets folder .* does not exist"):
        scan([tmp_path / "nowhere"])


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5 seconds", 5),
        ("1 minute", 60),
        ("10 minutes", 600),
        ("2 hours", 7200),
        ("1 day", 86400),
        ("1 week", 604800),
        ("0 seconds", 0),
    ],
)
def test_interval_seconds(text: str, seconds: int) -> None:
    assert interval_seconds(text) == seconds


def test_interval_seconds_refuses_other_forms() -> None:
    with pytest.raises(ConfigError, match="interval '1h' is not of the form"):
        interval_seconds("1h")


# -- freshness ----------------------------------------------------------------------------------
FRESH = (
    GOOD
    + """\
  - table: shop_totals
    keys: [id]
    measures: {n: "count(*)"}
expectations:
  bronze:
    - {expect: freshness, max_age: "2 hours", severity: critical}
  quarantine:
    - {expect: freshness, max_age: "1 day", notes: "malformed lines stop arriving"}
  shop_hourly:
    - {expect: freshness, max_age: "90 minutes", severity: warning}
    - {expect: expect_column_values_to_not_be_null, column: n}
"""
)


def test_freshness_is_read_with_its_max_age(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "shop", FRESH))
    fresh = [e for e in spec.expectations if e.is_freshness]
    assert [(e.table, e.max_age, e.max_age_seconds, e.severity, dict(e.kwargs)) for e in fresh] == [
        ("bronze", "2 hours", 2 * 3600, "critical", {}),
        ("quarantine", "1 day", 24 * 3600, "warning", {"notes": "malformed lines stop arriving"}),
        ("shop_hourly", "90 minutes", 90 * 60, "warning", {}),
    ]
    (other,) = [e for e in spec.expectations if not e.is_freshness]
    assert (other.max_age, other.max_age_seconds) == (None, None)
    assert [spec.newest_event_column(t) for t in ("bronze", "quarantine")] == [
        "event_time",
        "_ingested_at",
    ]
    assert spec.newest_event_column("shop_hourly") == "window_end"
    assert spec.newest_event_column("shop_totals") is None


BRONZE_FRESHNESS = '    - {expect: freshness, max_age: "2 hours", severity: critical}'


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (
            '{expect: freshness, max_age: "2 hourz"}',
            "expectations.bronze[0].max_age: '2 hourz' does not match "
            "'^[0-9]+ (second|minute|hour|day|week)s?$'",
        ),
        (
            '{expect: freshness, max_age: "2"}',
            "expectations.bronze[0].max_age: '2' does not match "
            "'^[0-9]+ (second|minute|hour|day|week)s?$'",
        ),
        (
            "{expect: freshness, severity: critical}",
            "expectations.bronze[0]: 'max_age' is a required property",
        ),
        (
            '{expect: freshness, max_age: "2 hours", column: id}',
            "expectations.bronze[0].column: unknown key "
            "(allowed: expect, max_age, notes, severity)",
        ),
        (
            '{expect: freshness, max_age: "2 hours", severity: quarantine}',
            "expectations.bronze[0].severity: quarantine needs a row-level expectation: one of "
            "expect_column_values_to_not_be_null, expect_column_values_to_be_between, "
            "expect_column_values_to_be_in_set, expect_column_values_to_not_be_in_set, "
            "expect_column_value_lengths_to_be_between, expect_column_values_to_match_regex",
        ),
        (
            '{expect: fresh, max_age: "2 hours"}',
            "expectations.bronze[0].expect: 'fresh' does not match "
            "'^(expect_[a-z0-9_]+|freshness)$'",
        ),
    ],
)
def test_a_bad_freshness_names_file_key_and_problem(
    tmp_path: Path, item: str, expected: str
) -> None:
    assert BRONZE_FRESHNESS in FRESH
    path = write(tmp_path, "shop", FRESH.replace(BRONZE_FRESHNESS, f"    - {item}"))
    assert problems(path) == (f"{path}: {expected}",)


def test_freshness_of_a_running_total_is_refused(tmp_path: Path) -> None:
    text = FRESH.replace(
        "  shop_hourly:\n",
        '  shop_totals:\n    - {expect: freshness, max_age: "1 hour"}\n  shop_hourly:\n',
    )
    path = write(tmp_path, "shop", text)
    assert problems(path) == (
        f"{path}: expectations.shop_totals[0].expect: freshness needs an event time: a silver "
        "table without a window (a running total) has none",
    )


def alias_bomb(levels: int = 9) -> str:
    """A spec whose description is a list of nested aliases standing for 9**levels strings in
    under 1 KB (its type error would print all of them)."""
    items = ['&l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for level in range(1, levels):
        items.append(f"&l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return GOOD + "description: [" + ", ".join(items) + "]\n"


def test_yaml_aliases_are_refused_naming_the_line(tmp_path: Path) -> None:
    """Refused while the file is read, before anything walks what the aliases stand for: the
    check runs in a thread so that a walk of 9**9 nodes fails the test instead of hanging it."""
    bomb = write(tmp_path / "mine", "bomb", alias_bomb())
    assert len(bomb.read_bytes()) < 1024
    write(tmp_path / "mine", "shop", GOOD)
    found: list[SpecScan] = []
    worker = threading.Thread(
        target=lambda: found.append(scan([SEED_DIR, tmp_path / "mine"])), daemon=True
    )
    worker.start()
    worker.join(timeout=60)
    assert not worker.is_alive(), "a spec's aliases were expanded"
    (result,) = found
    assert sorted(result.specs) == ["activity", "events", "lines", "sensors", "shop"]
    line = len(GOOD.splitlines()) + 1  # the description's line, the first after GOOD
    assert result.problems == {
        bomb: (f"{bomb}: line {line}: not valid YAML (aliases (*name) are not allowed in a spec)",)
    }


def test_anchors_without_aliases_still_load(tmp_path: Path) -> None:
    path = write(tmp_path, "shop", GOOD.replace("keys: [id]", "keys: &keys [id]"))
    assert load_spec(path).silver[0].keys == ("id",)
