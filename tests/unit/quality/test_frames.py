"""quality.frames: derived columns and frames, checked against plain-Python computations."""

from __future__ import annotations

from quality.frames import quarantine_share_frame


def test_quarantine_share() -> None:
    frame = quarantine_share_frame(bronze_rows=90, quarantined_rows=10)
    assert frame.to_dict("records") == [
        {"bronze_rows": 90, "quarantined_rows": 10, "quarantine_share": 10 / 100}
    ]
    assert quarantine_share_frame(0, 0)["quarantine_share"].tolist() == [0.0]
