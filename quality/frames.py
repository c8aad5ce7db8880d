"""Pure frame builders: Arrow rows in, the pandas frames the suites validate out.

No I/O here. Derived columns are computed in Python so that the observed values shown in the
reports are the real ones:
- bronze: `event_time_date` (UTC date of event_time, compared with the `event_date` partition);
- silver: `window_seconds` (window_end - window_start) and `window_start_offset_seconds`
  (seconds since the last multiple of the slide, or of the window size for tumbling windows);
- `quarantine_share_frame`: one row per run: bronze rows, quarantined rows, quarantined share.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

MICROS = 1_000_000


def _epoch_seconds(column: pa.ChunkedArray) -> np.ndarray:
    """Timestamps -> float seconds since the epoch (NaN for nulls), whatever the unit."""
    micros = pc.cast(pc.cast(column, pa.timestamp("us", tz="UTC")), pa.int64())
    values: np.ndarray = micros.to_numpy(zero_copy_only=False).astype("float64")
    return values / MICROS


def bronze_frame(rows: pa.Table) -> pd.DataFrame:
    """Bronze rows plus `event_time_date`."""
    frame = rows.to_pandas()
    if "event_time" in rows.column_names:
        utc = pc.cast(rows.column("event_time"), pa.timestamp("us", tz="UTC"))
        frame["event_time_date"] = pc.cast(utc, pa.date32()).to_pandas()
    return frame


def silver_frame(
    rows: pa.Table, window_seconds: int | None, slide_seconds: int | None
) -> pd.DataFrame:
    """Silver rows plus `window_seconds` and `window_start_offset_seconds` for windowed tables."""
    frame = rows.to_pandas()
    if window_seconds is None:
        return frame
    start = _epoch_seconds(rows.column("window_start"))
    end = _epoch_seconds(rows.column("window_end"))
    frame["window_seconds"] = end - start
    frame["window_start_offset_seconds"] = np.mod(start, float(slide_seconds or window_seconds))
    return frame


def quarantine_share_frame(bronze_rows: int, quarantined_rows: int) -> pd.DataFrame:
    """One row: the run's bronze rows, quarantined rows and the quarantined share of both."""
    total = bronze_rows + quarantined_rows
    share = quarantined_rows / total if total else 0.0
    return pd.DataFrame(
        {
            "bronze_rows": [bronze_rows],
            "quarantined_rows": [quarantined_rows],
            "quarantine_share": [share],
        }
    )
