"""Finding the lines Hadoop's line reader skips, without Spark: `scan` and `lost_bytes`.

The reader skips a line whose bytes with its `\\n` reach HUGE_LINE_BYTES (a first line's byte
order mark not counted); `scan` must name exactly those, with their numbers and first bytes,
whatever the chunk boundaries. The lines here are made long by lowering HUGE_LINE_BYTES and
CHUNK; the same reader on real sizes is tests/spark/jobs/bronze/test_long_lines.py's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from upath import UPath

from jobs.bronze import long_lines
from jobs.bronze.long_lines import BOM, LongLine, lost_bytes, scan


@pytest.fixture(autouse=True)
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(long_lines, "HUGE_LINE_BYTES", 10)
    monkeypatch.setattr(long_lines, "KEPT_BYTES", 6)


def lines_of(tmp_path: Path, data: bytes) -> list[LongLine]:
    path = tmp_path / "f.json"
    path.write_bytes(data)
    return scan(UPath(path), "file:/f.json")


def expected_long(data: bytes, huge: int = 10, kept: int = 6) -> list[LongLine]:
    """The same rule written out over the whole file in memory (an independent computation)."""
    found = []
    parts = data.split(b"\n")
    ends_with_newline = data.endswith(b"\n")
    if ends_with_newline:
        parts = parts[:-1]
    for number, line in enumerate(parts, start=1):
        consumed = len(line) + (1 if (number < len(parts) or ends_with_newline) else 0)
        if number == 1 and line.startswith(BOM):
            line, consumed = line[3:], consumed - 3
        if consumed >= huge:
            found.append(LongLine("file:/f.json", number, line[:kept]))
    return found


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
@pytest.mark.parametrize(
    "data",
    [
        b"short\n123456789\nok\n",  # 9 bytes + \n: exactly the limit
        b"12345678\nabcdefghijklmnop\n\nxyz",  # 8 + \n is under it; the last has no \n
        b"aaaaaaaaaaaaaaaaaaaaaaaaaa",  # one long line, no \n
        BOM + b"12345678\n" + b"b" * 30 + b"\n",  # the mark is not the line's
        BOM + b"123456789\n",
        b"",
        b"\n\n\n",
    ],
)
def test_scan_names_exactly_the_lines_the_reader_skips(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, chunk: int
) -> None:
    monkeypatch.setattr(long_lines, "CHUNK", chunk)
    assert lines_of(tmp_path, data) == expected_long(data)


def test_lost_bytes_allows_each_files_mark_and_missing_newline() -> None:
    # Three files of 100 bytes: lines holding 3 bytes less each (byte order marks) lose nothing.
    assert not lost_bytes(300 - 9, [100, 100, 100])
    assert not lost_bytes(300 + 3, [100, 100, 100])  # no file ends with a newline
    assert lost_bytes(300 - 10, [100, 100, 100])
    assert not lost_bytes(0, [])
