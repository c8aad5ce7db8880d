"""Sample-data generators of the seed datasets (`runoff generate`), apart from their specs."""

from __future__ import annotations

from jobs.generate import GeneratorSpec
from jobs.samples import activity, events, lines, sensors

GENERATORS: dict[str, GeneratorSpec] = {
    module.GENERATOR.dataset: module.GENERATOR for module in (events, sensors, activity, lines)
}
