"""Sample data for `activity` (jobs/datasets/activity.yaml): users a..i, one phone each,
switching activity every few minutes."""

from __future__ import annotations

import heapq
import random
from datetime import datetime, timedelta

from jobs.samples.generator import GeneratorSpec, Record, chunk_by_day, epoch_us

GT_LABELS = ("stand", "sit", "walk", "bike", "stairsup", "stairsdown", "null")

USERS = tuple("abcdefghi")
PHONES = (
    "nexus4_1",
    "nexus4_2",
    "s3_1",
    "s3_2",
    "s3mini_1",
    "s3mini_2",
    "samsungold_1",
    "samsungold_2",
)
# Mean acceleration (m/s^2) of a phone in a pocket per activity, and its spread.
ACCELERATION: dict[str, tuple[tuple[float, float, float], float]] = {
    "stand": ((-0.3, 9.6, 0.8), 0.2),
    "sit": ((0.6, 3.1, 9.1), 0.15),
    "walk": ((-0.8, 9.2, 1.4), 2.5),
    "bike": ((1.2, 7.4, 5.1), 1.6),
    "stairsup": ((-1.0, 9.9, 2.0), 3.0),
    "stairsdown": ((-0.9, 9.5, 1.7), 3.3),
    "null": ((0.0, 8.0, 3.0), 0.6),
}
READING_EVERY_US = (800_000, 1_200_000)
ACTIVITY_MINUTES = (2, 6)


def generate_records(
    rng: random.Random, start: datetime, files: int, rows_per_file: int
) -> list[list[Record]]:
    """Users a..i each carry one phone that reads about once a second; users switch activity
    (gt) every 2-6 minutes. Creation_Time is epoch ns, Arrival_Time epoch ms a little later,
    Index counts each phone's readings."""
    begin = epoch_us(start)
    phone = {user: rng.choice(PHONES) for user in USERS}
    label = {user: rng.choice(GT_LABELS) for user in USERS}
    switch_at = {user: begin + rng.randint(*ACTIVITY_MINUTES) * 60_000_000 for user in USERS}
    heap = [(begin + rng.randrange(READING_EVERY_US[1]), user) for user in USERS]
    heapq.heapify(heap)
    stream: list[tuple[int, str, str, tuple[float, float, float]]] = []
    while len(stream) < files * rows_per_file:
        when, user = heapq.heappop(heap)
        if when >= switch_at[user]:
            label[user] = rng.choice(GT_LABELS)
            switch_at[user] = when + rng.randint(*ACTIVITY_MINUTES) * 60_000_000
        mean, spread = ACCELERATION[label[user]]
        xyz = (
            round(rng.gauss(mean[0], spread), 6),
            round(rng.gauss(mean[1], spread), 6),
            round(rng.gauss(mean[2], spread), 6),
        )
        stream.append((when, user, label[user], xyz))
        heapq.heappush(heap, (when + rng.randint(*READING_EVERY_US), user))
    chunks = chunk_by_day([us for us, _, _, _ in stream], files, rows_per_file, 86_400_000_000)
    index = dict.fromkeys(PHONES, 0)
    built: list[list[Record]] = []
    for c, chunk in enumerate(chunks):
        records: list[Record] = []
        rows = stream[c * rows_per_file : (c + 1) * rows_per_file]
        for us, (_, user, gt, (x, y, z)) in zip(chunk, rows, strict=True):
            created_ns = us * 1000 + rng.randrange(1000)
            device = phone[user]
            index[device] += 1
            value = {
                "Arrival_Time": created_ns // 1_000_000 + rng.randint(1, 250),
                "Creation_Time": created_ns,
                "Device": device,
                "Index": index[device],
                "Model": device.rsplit("_", 1)[0],
                "User": user,
                "gt": gt,
                "x": x,
                "y": y,
                "z": z,
            }
            records.append(Record(time_us=us, value=value))
        built.append(records)
    return built


GENERATOR = GeneratorSpec(
    dataset="activity",
    record_format="json",
    build=generate_records,
    event_time_field="Creation_Time",
    wrong_types=(("x", "abc"), ("z", "n/a"), ("Creation_Time", "soon")),
    text_fields=("Device", "User", "gt"),
    max_lateness=timedelta(minutes=4),
    demo={"files": 10, "rows_per_file": 1000, "malformed_rate": 0.002, "late_rate": 0.02},
)
