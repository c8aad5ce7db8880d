"""Sample data for `sensors` (jobs/datasets/sensors.yaml): 20 devices signalling every 2-3 s,
now and then one going quiet (the lost-signal alert's windows)."""

from __future__ import annotations

import heapq
import random
from datetime import datetime, timedelta

from jobs.samples.generator import GeneratorSpec, Record, chunk_by_day, epoch_us, iso_ms

# Device types and the range of their signal strength (dBm).
SIGNAL_RANGES: dict[str, tuple[float, float]] = {
    "thermostat": (-75.0, -40.0),
    "camera": (-70.0, -30.0),
    "doorbell": (-85.0, -50.0),
    "smoke": (-95.0, -60.0),
}
DEVICES_PER_TYPE = 5
SIGNAL_EVERY_MS = (2_000, 3_000)  # a healthy device signals every 2-3 seconds
QUIET_EVERY_MS = (16_000, 40_000)  # a device losing signal: at most 4 signals a minute
QUIET_MINUTES = (2, 5)
MEAN_HEALTHY_MINUTES = 15


def devices() -> list[tuple[str, str]]:
    """(deviceId, deviceType) of the 20 simulated devices: thermostat-01, camera-01, ..."""
    return [
        (f"{kind}-{n:02d}", kind) for n in range(1, DEVICES_PER_TYPE + 1) for kind in SIGNAL_RANGES
    ]


def generate_records(
    rng: random.Random, start: datetime, files: int, rows_per_file: int
) -> list[list[Record]]:
    """Every device signals every 2-3 s; now and then one goes quiet for a few minutes.

    A quiet device sends at most 4 signals a minute (weak ones), so those minutes show up in
    `sensors_lost_signal`. The first device goes quiet 20 seconds after the start, so that even
    small samples hold lost-signal windows. Times are milliseconds.
    """
    begin = epoch_us(start) // 1000
    fleet = devices()
    quiet_from: list[int] = []
    for d in range(len(fleet)):
        healthy_ms = 20_000 if d == 0 else round(rng.expovariate(1 / MEAN_HEALTHY_MINUTES) * 60_000)
        quiet_from.append(begin + healthy_ms)
    quiet_until = [q + rng.randint(*QUIET_MINUTES) * 60_000 for q in quiet_from]
    heap = [(begin + rng.randrange(SIGNAL_EVERY_MS[1]), d) for d in range(len(fleet))]
    heapq.heapify(heap)
    stream: list[tuple[int, int, float]] = []  # (ms, device, signal)
    while len(stream) < files * rows_per_file:
        when, d = heapq.heappop(heap)
        if when >= quiet_until[d]:  # back to health; the next quiet spell comes later
            healthy_ms = round(rng.expovariate(1 / MEAN_HEALTHY_MINUTES) * 60_000)
            quiet_from[d] = quiet_until[d] + healthy_ms
            quiet_until[d] = quiet_from[d] + rng.randint(*QUIET_MINUTES) * 60_000
        low, high = SIGNAL_RANGES[fleet[d][1]]
        if quiet_from[d] <= when < quiet_until[d]:
            signal = rng.uniform(low, low + (high - low) / 4)
            step = rng.randint(*QUIET_EVERY_MS)
        else:
            signal = rng.uniform(low, high)
            step = rng.randint(*SIGNAL_EVERY_MS)
        stream.append((when, d, round(signal, 1)))
        heapq.heappush(heap, (when + step, d))
    chunks = chunk_by_day([ms for ms, _, _ in stream], files, rows_per_file, 86_400_000)
    return [
        [
            Record(
                time_us=ms * 1000,
                value={
                    "timestamp": iso_ms(ms),
                    "deviceId": fleet[d][0],
                    "deviceType": fleet[d][1],
                    "signalStrength": signal,
                },
            )
            for ms, (_, d, signal) in zip(
                chunk, stream[c * rows_per_file : (c + 1) * rows_per_file], strict=True
            )
        ]
        for c, chunk in enumerate(chunks)
    ]


GENERATOR = GeneratorSpec(
    dataset="sensors",
    record_format="json",
    build=generate_records,
    event_time_field="timestamp",
    wrong_types=(
        ("signalStrength", "strong"),
        ("signalStrength", "weak"),
        ("timestamp", "yesterday"),
    ),
    text_fields=("deviceId", "deviceType"),
    max_lateness=timedelta(minutes=4),
    demo={"files": 10, "rows_per_file": 1000, "malformed_rate": 0.002, "late_rate": 0.02},
)
