"""Sample-data generators of the seed datasets, apart from their specs, and `runoff generate`.

A generator (`jobs.samples.generator.GeneratorSpec`) exists for the four seed datasets only;
declared datasets bring their own landing files.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from core.config import Location
from core.errors import ConfigError
from jobs.samples import activity, events, lines, sensors
from jobs.samples.generator import GeneratedFile, GeneratorSpec

if TYPE_CHECKING:
    from core.config import RunoffConfig

GENERATORS: dict[str, GeneratorSpec] = {
    module.GENERATOR.dataset: module.GENERATOR for module in (events, sensors, activity, lines)
}


def spec_for(dataset: str) -> GeneratorSpec:
    """The sample-data generator of a seed dataset (declared datasets bring their own data)."""
    try:
        return GENERATORS[dataset]
    except KeyError:
        raise ConfigError(
            f"dataset {dataset!r} has no sample-data generator (generators exist for: "
            f"{', '.join(sorted(GENERATORS))})"
        ) from None


def generate(
    dataset: str, landing_dir: str | os.PathLike[str] | Location, **options: Any
) -> list[GeneratedFile]:
    """`GeneratorSpec.generate` for the dataset called `dataset`."""
    return spec_for(dataset).generate(landing_dir, **options)


def generate_dataset(config: RunoffConfig, dataset: str, **options: Any) -> list[GeneratedFile]:
    """Generate into the dataset's landing folder (its spec's `source.path`)."""
    from delta_tables.catalog import Catalog

    return generate(dataset, Catalog.load(config).landing_dir(dataset), **options)


def generated_line(dataset: str, written: Sequence[GeneratedFile], landing_dir: Location) -> str:
    """What this call wrote; files it found already there (same name, same bytes) are counted
    apart, so that generating twice does not claim twice the data."""
    new = [f for f in written if f.new]
    records = sum(f.records for f in new)
    malformed = sum(f.malformed for f in new)
    late = sum(f.late for f in new)
    line = (
        f"generated {len(new)} {dataset} files: {records} records, "
        f"{malformed} malformed lines, {late} late records in {landing_dir}"
    )
    if len(new) < len(written):
        line += f" ({len(written) - len(new)} identical files were already there: left alone)"
    return line


def cmd_generate(config: RunoffConfig, args: argparse.Namespace) -> int:
    """`runoff generate <dataset> ...`: write sample landing files, print one summary line."""
    from core.console import say
    from delta_tables.catalog import Catalog

    landing = Catalog.load(config).landing_dir(args.dataset)
    written = generate(
        args.dataset,
        landing,
        files=args.files,
        rows_per_file=args.rows_per_file,
        start=args.start,
        seed=args.seed,
        malformed_rate=args.malformed_rate,
        late_rate=args.late_rate,
    )
    say(generated_line(args.dataset, written, landing))
    return 0
