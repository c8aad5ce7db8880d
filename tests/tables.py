"""Read what a pipeline run left behind, without Spark: Delta tables (delta-rs).

Shared by the DAG tests and the Airflow end-to-end test. Table names and paths come from the
catalog of the given configuration (its spec folders); expected contents never do.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from core.config import RunoffConfig
from delta_tables.arrow import read_arrow
from delta_tables.catalog import Catalog

if TYPE_CHECKING:
    from tests.expected import LandingFile

# Set per ingestion: a re-run (backfill) writes the same data with new values here.
INGESTION_COLUMNS = ("_ingested_at", "_batch_id")


def read_table(path: Path) -> pa.Table:
    return read_arrow(str(path))


def sorted_rows(table: pa.Table, drop: tuple[str, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows as tuples in a stable order, `drop` columns left out."""
    keep = sorted(c for c in table.column_names if c not in drop)
    columns = [table.column(c).to_pylist() for c in keep]
    return sorted(zip(*columns, strict=True), key=repr)


def snapshot_tables(config: RunoffConfig, dataset: str) -> dict[str, list[tuple[Any, ...]]]:
    """The content of a dataset's bronze and silver tables, ingestion metadata left out."""
    tables = Catalog.load(config).tables(dataset)
    return {
        table.name: sorted_rows(read_table(table.path), drop=INGESTION_COLUMNS)
        for table in (tables.bronze, *tables.silver)
    }


def assert_silver_matches_expected(
    config: RunoffConfig,
    dataset: str,
    landing: Path | None = None,
    files: list[LandingFile] | None = None,
) -> None:
    """Every silver table of a seed dataset equals tests/expected.py over the landing files
    (`files`, read when they landed: bronze archives ingested files out of the landing folder;
    else those below `landing`, else below the dataset's landing folder), row for row; the
    catalog declares exactly the tables tests/expected.py computes."""
    from tests import expected

    catalog = Catalog.load(config)
    if files is None:
        files = expected.read_landing(dataset, landing or catalog.landing_dir(dataset))
    want = expected.silver(dataset, expected.valid_records(files))
    silver = catalog.tables(dataset).silver
    assert [t.name for t in silver] == list(expected.SILVER_TABLES[dataset])
    for table in silver:
        actual = expected.naive_utc(read_table(table.path).to_pylist())
        wanted = expected.naive_utc(want[table.name])
        assert len(actual) == len(wanted), (
            f"{table.name}: {len(actual)} rows, expected {len(wanted)}"
        )
        assert sorted(actual, key=_row_key) == sorted(wanted, key=_row_key), table.name


def _row_key(row: dict[str, Any]) -> str:
    return repr(sorted(row.items()))
