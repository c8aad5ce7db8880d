"""The README's benchmark table, rendered from `benchmarks/results/*.json`.

Input: the result files (format in benchmarks/README.md). Output: a markdown table (benchmark,
metric, baseline, runoff, ratio, target, met?) plus the re-run commands and the machine, written
between `<!-- bench:start -->` and `<!-- bench:end -->` in README.md; nothing outside the markers
changes. Without the markers the table is printed and the README is left alone.

    uv run --frozen python -m benchmarks.readme_table [--readme README.md] [--results DIR]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.result import RESULTS_DIR, load_results, target_met

START = "<!-- bench:start -->"
END = "<!-- bench:end -->"
README = Path(__file__).resolve().parents[1] / "README.md"
HEADER = ("benchmark", "metric", "baseline", "runoff", "ratio", "target", "met?")


def format_number(value: float | None, unit: str = "") -> str:
    """Short, readable numbers: 10.6 s, 1.23 s, 0.0456 s, 1,234,567 rows/s."""
    if value is None:
        return "-"
    size = abs(value)
    if size >= 100:
        text = f"{value:,.0f}"
    elif size >= 10:
        text = f"{value:.1f}"
    elif size >= 1:
        text = f"{value:.2f}"
    elif size == 0:
        text = "0"
    else:
        text = f"{value:.3g}"
    return f"{text} {unit}".strip()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def metric_met(item: Mapping[str, Any]) -> bool | None:
    """`met` as recorded, else computed from the target (on the ratio, else on the value)."""
    met = item.get("met")
    if isinstance(met, bool):
        return met
    target = item.get("target")
    if not target:
        return None
    ratio = item.get("ratio")
    if ratio is None and item.get("baseline"):
        ratio = item["value"] / item["baseline"]
    return target_met(target, ratio if ratio is not None else item["value"])


def table_rows(results: Sequence[Mapping[str, Any]]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for result in results:
        for item in result["metrics"]:
            unit = item.get("unit") or ""
            baseline = format_number(item.get("baseline"), unit)
            if item.get("baseline") is not None and item.get("baseline_label"):
                baseline = f"{baseline} ({item['baseline_label']})"
            ratio = item.get("ratio")
            if ratio is None and item.get("baseline"):
                ratio = item["value"] / item["baseline"]
            met = metric_met(item)
            rows.append(
                (
                    f"`{result['name']}`",
                    item["metric"],
                    baseline,
                    format_number(item["value"], unit),
                    f"{ratio:.2f}" if ratio is not None else "-",
                    f"`{item['target']}`" if item.get("target") else "-",
                    "-" if met is None else ("yes" if met else "**no**"),
                )
            )
    return rows


def _load_text(params: Mapping[str, Any]) -> str:
    """The machine's load averages (1, 5, 15 minutes) recorded before and after the run."""
    parts = []
    for when in ("before", "after"):
        load = params.get(f"load_{when}")
        if isinstance(load, list) and load:
            parts.append(f"{when} {' / '.join(f'{x:.2f}' for x in load)}")
    return f"load averages (1 / 5 / 15 min) {', '.join(parts)}" if parts else ""


def _machine_line(machine: Mapping[str, Any]) -> str:
    parts = []
    if machine.get("cpus"):
        parts.append(f"{machine['cpus']} cores")
    if machine.get("memory_gb"):
        parts.append(f"{machine['memory_gb']} GB RAM")
    for key in ("platform", "python", "java"):
        if machine.get(key):
            parts.append(f"{key if key != 'platform' else ''} {machine[key]}".strip())
    packages = machine.get("packages") or {}
    parts.extend(f"{name} {version}" for name, version in sorted(packages.items()))
    return ", ".join(parts)


def render_table(results: Sequence[Mapping[str, Any]], errors: Sequence[str] = ()) -> str:
    """The markdown block that goes between the markers."""
    if not results:
        lines = ["_No benchmark results yet: run `make bench`._"]
    else:
        lines = [
            "| " + " | ".join(HEADER) + " |",
            "|" + "|".join("---" for _ in HEADER) + "|",
            *("| " + " | ".join(_cell(c) for c in row) + " |" for row in table_rows(results)),
            "",
            "What each benchmark measures and how to re-run it alone:",
            "",
        ]
        for result in results:
            load = _load_text(result.get("params") or {})
            lines.append(
                f"- `{result['name']}`: {result['description']} `{result['rerun']}`"
                + (f" ({load})" if load else "")
            )
        machines = list(
            dict.fromkeys(_machine_line(r["machine"]) for r in results if r.get("machine"))
        )
        if machines:
            lines.append("")
            label = "Measured on" if len(machines) == 1 else "Measured on (differs per result)"
            lines.append(f"{label}: " + "; ".join(m for m in machines if m) + ".")
    if errors:
        lines.append("")
        lines.extend(f"- result not shown: {e}" for e in errors)
    return "\n".join(lines)


def replace_between_markers(text: str, block: str) -> str | None:
    """`text` with everything between the markers replaced by `block`; None without markers."""
    start = text.find(START)
    end = text.find(END, start + len(START)) if start >= 0 else -1
    if start < 0 or end < 0:
        return None
    return text[: start + len(START)] + "\n" + block.strip("\n") + "\n" + text[end:]


def update_readme(readme: Path, block: str) -> bool:
    """Write `block` between the README's markers; False (README untouched) without markers."""
    text = readme.read_text(encoding="utf-8") if readme.is_file() else ""
    updated = replace_between_markers(text, block)
    if updated is None:
        return False
    if updated != text:
        readme.write_text(updated, encoding="utf-8")
    return True


def regenerate(readme: Path = README, results_dir: Path = RESULTS_DIR) -> tuple[bool, list[str]]:
    """Render the table from `results_dir` into `readme`; prints it when the markers are missing.

    Returns (written into the README, error lines for result files that were not shown).
    """
    results, errors = load_results(results_dir)
    block = render_table(results, errors)
    if update_readme(readme, block):
        print(f"benchmark table: {len(results)} result(s) written into {readme}")
        return True, errors
    print(f"benchmark table: {readme} has no {START} ... {END} markers; the table is:\n")
    print(block)
    return False, errors


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.readme_table")
    parser.add_argument("--readme", type=Path, default=README)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    _written, errors = regenerate(args.readme, args.results)
    for error in errors:
        print(f"error: {error}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
