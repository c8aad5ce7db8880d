"""The table catalog's refusals that need the data folder: landing folders shared by datasets;
the error for an unknown name."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import RunoffConfig
from core.errors import ConfigError
from core.specs import SEED_DIR, SpecError
from delta_tables.catalog import Catalog
from tests.unit.core.test_specs import GOOD, problems, write


def spec(name: str, path: str | None) -> str:
    source = f"{{format: json, path: {path}}}" if path else "{format: json}"
    text = GOOD.replace("name: shop", f"name: {name}").replace("shop_hourly", f"{name}_hourly")
    return text.replace("source: {format: json}", f"source: {source}")


def catalog(home: Path, folder: Path) -> Catalog:
    return Catalog.load(RunoffConfig.from_sources(home=home, env={"RUNOFF_DATASETS": str(folder)}))


@pytest.mark.parametrize(
    ("first", "second", "second_folder"),
    [
        ("landing/shop", "landing/shop", "landing/shop"),  # the same folder
        ("landing/shop", "landing/shop/eu", "landing/shop/eu"),  # inside the first
        ("landing/shop/eu", "landing/shop", "landing/shop"),  # holding the first
        ("landing/shop", "./landing/x/../shop/", "landing/shop"),  # the same, spelled otherwise
    ],
)
def test_datasets_sharing_a_landing_folder_are_refused_naming_both(
    tmp_path: Path, first: str, second: str, second_folder: str
) -> None:
    folder, home = tmp_path / "specs", tmp_path / "home"
    kept = write(folder, "aaa", spec("aaa", first))
    refused = write(folder, "bbb", spec("bbb", second))
    write(folder, "ccc", spec("ccc", "landing/elsewhere"))
    found = catalog(home, folder)
    assert found.names == ("aaa", "activity", "ccc", "events", "lines", "sensors")
    assert found.problems == {
        refused: (
            f"{refused}: source.path: the landing folder {home}/{second_folder} overlaps "
            f"{home}/{first} of dataset 'aaa' ({kept}): bronze archives the files it ingests, "
            "so one dataset would miss the other's files; give each its own folder",
        )
    }
    with pytest.raises(SpecError, match="overlaps"):
        found.spec("bbb")
    # A name no file declares: the choices are every declared name, the refused one's too.
    assert (found.declares("bbb"), found.declares("zzz")) == (True, False)
    with pytest.raises(ConfigError) as unknown:
        found.spec("zzz")
    assert str(unknown.value) == (
        "unknown dataset 'zzz': choose one of aaa, activity, bbb, ccc, events, lines, sensors"
    )


def test_a_dataset_may_not_land_in_a_seed_datasets_folder(tmp_path: Path) -> None:
    folder = tmp_path / "specs"
    mine = write(folder, "mine", spec("mine", "landing/events/extra"))
    found = catalog(tmp_path / "home", folder)
    assert "mine" not in found.names and "events" in found.names
    assert "of dataset 'events' (" + str(SEED_DIR / "events.yaml") + ")" in found.problems[mine][0]


@pytest.mark.parametrize("path", ["../elsewhere", "landing/../../etc", ".."])
def test_a_relative_source_path_may_not_leave_the_data_folder(tmp_path: Path, path: str) -> None:
    spec_file = write(tmp_path, "shop", spec("shop", path))
    assert problems(spec_file) == (
        f"{spec_file}: source.path: {path!r} leaves the data folder: use a path inside it, or "
        "an absolute path",
    )


def test_paths_inside_the_data_folder_and_absolute_paths_are_kept(tmp_path: Path) -> None:
    folder = tmp_path / "specs"
    write(folder, "aaa", spec("aaa", "landing/x/../aaa"))
    write(folder, "bbb", spec("bbb", str(tmp_path / "outside" / "bbb")))
    found = catalog(tmp_path / "home", folder)
    assert {"aaa", "bbb"} <= set(found.names)
    assert found.problems == {}
