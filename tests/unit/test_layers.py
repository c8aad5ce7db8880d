"""Imports point one way: dags -> jobs -> quality -> delta_tables -> core, with no cycles.

The graph is built by grimp from the source (imports inside functions count too).
"""

from __future__ import annotations

import grimp
import pytest

LAYERS = ("dags", "jobs", "quality", "delta_tables", "core")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(*LAYERS)


def test_no_layer_imports_a_layer_above_it(graph: grimp.ImportGraph) -> None:
    illegal = graph.find_illegal_dependencies_for_layers(layers=LAYERS)
    assert {(d.importer, d.imported, tuple(tuple(c) for c in d.routes)) for d in illegal} == set()


def test_core_imports_nothing_of_the_other_packages(graph: grimp.ImportGraph) -> None:
    for module in graph.find_children("core") | {"core"}:
        imported = graph.find_modules_directly_imported_by(module)
        assert {m for m in imported if m.split(".")[0] != "core"} == set(), module


def test_there_are_no_import_cycles(graph: grimp.ImportGraph) -> None:
    cycles = set()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                cycles.add((module, *back))
    assert cycles == set()


def test_the_check_catches_an_upward_import() -> None:
    """The same checks on a graph with one arrow added back up: they must see it."""
    graph = grimp.build_graph(*LAYERS)
    graph.add_import(importer="core.config", imported="jobs.cli.main")
    illegal = graph.find_illegal_dependencies_for_layers(layers=LAYERS)
    assert [(d.importer, d.imported) for d in illegal] == [("core", "jobs")]
    assert graph.find_shortest_chain(importer="jobs.cli.main", imported="core.config") is not None


# Inside `jobs`, sub-packages by role, each importing only those after it (jobs/__init__.py);
# bronze and silver are independent of each other.
JOBS_LAYERS = (
    "cli",
    "lineage",
    "samples",
    "report",
    "ops",
    "backfill",
    grimp.Layer("bronze", "silver", independent=True),
    "streaming",
    "checkpoints",
    "spark",
)


def test_jobs_sub_packages_import_one_way(graph: grimp.ImportGraph) -> None:
    illegal = graph.find_illegal_dependencies_for_layers(layers=JOBS_LAYERS, containers={"jobs"})
    assert {(d.importer, d.imported) for d in illegal} == set()


def test_the_jobs_check_catches_an_upward_import() -> None:
    graph = grimp.build_graph(*LAYERS)
    graph.add_import(importer="jobs.checkpoints.files", imported="jobs.bronze.parse")
    graph.add_import(importer="jobs.silver", imported="jobs.bronze.job")
    illegal = graph.find_illegal_dependencies_for_layers(layers=JOBS_LAYERS, containers={"jobs"})
    assert {(d.importer, d.imported) for d in illegal} == {
        ("jobs.checkpoints", "jobs.bronze"),
        ("jobs.silver", "jobs.bronze"),
    }
