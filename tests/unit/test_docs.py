"""Every design note the code or the README cites is in the repository."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import REPO_ROOT

CITED = re.compile(r"\b(docs/[\w./-]+\.md)\b")


def tracked_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True
    )
    return [f for f in listed.stdout.splitlines() if f.endswith((".py", ".md", ".yaml", ".toml"))]


def test_every_cited_design_note_exists() -> None:
    cited = {
        (name, note)
        for name in tracked_files()
        if (REPO_ROOT / name).is_file()
        for note in CITED.findall((REPO_ROOT / name).read_text(encoding="utf-8", errors="replace"))
    }
    assert ("jobs/cli/server.py", "docs/server.md") in cited  # the check sees citations
    missing = sorted((name, note) for name, note in cited if not (REPO_ROOT / note).is_file())
    assert missing == []


def test_no_file_cites_a_design_document_outside_the_repository() -> None:
    for name in tracked_files():
        if name == "tests/unit/test_docs.py":  # names what it looks for
            continue
        text = (REPO_ROOT / name).read_text(encoding="utf-8", errors="replace")
        assert "DESIGN.md" not in text and "../shared" not in text, name
