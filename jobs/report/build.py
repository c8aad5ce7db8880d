"""`runoff report <dataset>`: one self-contained HTML page with charts of a dataset's runs.

Input: the dataset's spec, its tables (read with delta-rs, no Spark), the run ledger, the
quality results history and the Data Docs site. Output: `<home>/reports/<dataset>.html`, inline
CSS and SVG only, with relative links to the Data Docs pages. The work is split by what changes
together: `jobs.report.data` reads and shapes, `jobs.report.charts` draws (matplotlib),
`jobs.report.page` renders the page (Jinja2, `jobs/report/templates/report.html.j2`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from core.config import RunoffConfig
from jobs.report.data import TableInfo, load_report_data, report_path, table_info
from jobs.report.page import render_report


def write_report(config: RunoffConfig, dataset: str) -> Path:
    """Render the report of `dataset` and write it atomically; returns its path."""
    page = render_report(load_report_data(config, dataset))
    path = report_path(config, dataset)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(page, encoding="utf-8")
    partial.replace(path)
    return path


def cmd_report(config: RunoffConfig, args: argparse.Namespace) -> int:
    print(write_report(config, args.dataset), flush=True)
    return 0


__all__ = ["TableInfo", "cmd_report", "report_path", "table_info", "write_report"]
