"""Sample data for `events` (jobs/datasets/events.yaml): Open/Close pairs, one file per hour."""

from __future__ import annotations

import heapq
import random
from datetime import datetime, timedelta

from jobs.samples.generator import GeneratorSpec, Record, epoch_us, next_midnight

FILE_SECONDS = 3600  # one landing file per hour of events
MEAN_OPEN_SECONDS = 600


def _open_seconds(rng: random.Random) -> int:
    """How long something stays open: mostly minutes, at most two hours."""
    return max(1, min(7200, round(rng.expovariate(1 / MEAN_OPEN_SECONDS))))


def generate_records(
    rng: random.Random, start: datetime, files: int, rows_per_file: int
) -> list[list[Record]]:
    """Open/Close pairs: file i holds the events of one hour (cut at midnight).

    Each Open at t has its Close at t + a random duration, in the same file or a later one, so
    every Close follows its Open (pairs whose Close falls after the last file stay open).
    """
    second = epoch_us(start) // 1_000_000
    pending: list[tuple[int, int]] = []  # (close time, pair) of Closes not yet delivered
    built: list[list[tuple[int, int, str]]] = []  # per file: (time, pair, action)
    close_file: dict[int, int] = {}
    pair = 0
    for i in range(files):
        end = min(second + FILE_SECONDS, next_midnight(second, 86_400))
        due: list[tuple[int, int]] = []
        while pending and pending[0][0] < end:
            due.append(heapq.heappop(pending))
        for _, late_pair in due[rows_per_file:]:  # more Closes than fit: they close a bit later
            heapq.heappush(pending, (end + rng.randrange(60), late_pair))
        rows = [(when, p, "Close") for when, p in due[:rows_per_file]]
        while len(rows) < rows_per_file:
            opened = rng.randrange(second, end)
            closed = opened + _open_seconds(rng)
            rows.append((opened, pair, "Open"))
            if closed < end and len(rows) < rows_per_file:
                rows.append((closed, pair, "Close"))
            else:
                # no room left in this file: the Close goes to a later one
                closed = closed if closed >= end else end + rng.randrange(60)
                heapq.heappush(pending, (closed, pair))
            pair += 1
        rows.sort()
        close_file.update((p, i) for _, p, action in rows if action == "Close")
        built.append(rows)
        second = end
    return [
        [
            Record(
                time_us=when * 1_000_000,
                value={"time": when, "action": action},
                # an Open may arrive one file late only if its Close arrives later still
                movable=action == "Close" or close_file.get(p, files) >= i + 2,
            )
            for when, p, action in rows
        ]
        for i, rows in enumerate(built)
    ]


GENERATOR = GeneratorSpec(
    dataset="events",
    record_format="json",
    build=generate_records,
    default_files=50,
    default_rows_per_file=2000,
    event_time_field="time",
    wrong_types=(("time", "abc"), ("time", "yesterday")),
    text_fields=("action",),
    max_lateness=timedelta(minutes=30),
    demo={"files": 20, "rows_per_file": 1000, "malformed_rate": 0.002, "late_rate": 0.02},
)
