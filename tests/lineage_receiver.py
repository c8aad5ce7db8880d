"""An OpenLineage endpoint on loopback that checks every event against the specification.

`LineageReceiver` is the HTTP receiver of tests/receiver.py with the OpenLineage client's path
(`/api/v1/lineage`); `problems(event)` lists where an event breaks the JSON schemas in
tests/openlineage_spec/ (the core `RunEvent`, then each facet against the schema its `_schemaURL`
names: the core schema leaves facets open).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests.receiver import Receiver

SPEC = Path(__file__).with_name("openlineage_spec")
RUN_EVENT = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
ENDPOINT = "/api/v1/lineage"


@cache
def registry() -> Registry:  # type: ignore[type-arg]
    documents = [json.loads(p.read_text()) for p in sorted(SPEC.rglob("*.json"))]
    return Registry().with_resources((doc["$id"], Resource.from_contents(doc)) for doc in documents)


def _errors(instance: Any, schema_url: str) -> list[str]:
    validator = Draft202012Validator(
        {"$ref": schema_url},
        registry=registry(),
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator.iter_errors(instance)
    ]


def facets_of(event: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every facet of an event, with where it is."""
    places = [("run", event.get("run") or {}), ("job", event.get("job") or {})]
    for kind in ("inputs", "outputs"):
        places += [(f"{kind}/{d['name']}", d) for d in event.get(kind) or ()]
    for where, holder in places:
        for group in ("facets", "inputFacets", "outputFacets"):
            for name, facet in (holder.get(group) or {}).items():
                yield f"{where}/{group}/{name}", facet


def problems(event: dict[str, Any]) -> list[str]:
    """Where `event` breaks the specification (empty: valid)."""
    found = _errors(event, RUN_EVENT)
    for where, facet in facets_of(event):
        url = facet.get("_schemaURL", "")
        try:
            found += [f"{where}: {e}" for e in _errors(facet, url)]
        except Exception as exc:  # noqa: BLE001 - a facet schema not in the copy is a finding
            found.append(f"{where}: cannot check against {url!r}: {exc}")
    return found


class LineageReceiver(Receiver):
    """Receives OpenLineage events over HTTP on 127.0.0.1."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def events(self) -> list[dict[str, Any]]:
        return [body for method, path, body in self.received if path == ENDPOINT]
