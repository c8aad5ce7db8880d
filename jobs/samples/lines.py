"""Sample data for `lines` (jobs/datasets/lines.yaml): prose lines, one folder per day."""

from __future__ import annotations

import random
from datetime import datetime

from jobs.samples.generator import GeneratorSpec, Record, epoch_us

_WORD_TEXT = """
the a an and or but if then so as of to in on at by for with from into over under river
rain stream water flood bank bridge valley hill stone road town field garden morning
evening night day week year hour moment season storm cloud wind light shadow old new small
great quiet cold warm long short slow quick green grey bright dark runs falls rises turns
waits keeps brings carries leaves finds holds says knows sees we they she he it you i
people miller's children neighbour friend stranger keeper don't can't won't it's isn't
wasn't o'clock ma'am y'know 'tis café naïve façade fiancée jalapeño déjà résumé über
"""
WORDS = tuple(_WORD_TEXT.split())
ENDINGS = (".", ".", ".", "!", "?", "...")


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
    for i, word in enumerate(words):
        roll = rng.random()
        if roll < 0.04:
            words[i] = word.upper()
        elif roll < 0.10:
            words[i] = word.capitalize()
        elif roll < 0.14:
            words[i] = f"{word}-{rng.choice(WORDS)}"  # a hyphenated compound
        elif roll < 0.18 and i + 1 < len(words):
            words[i] = f"{word},"
        elif roll < 0.20 and i + 1 < len(words):
            words[i] = f"{word};"
        elif roll < 0.22:
            words[i] = f"({word})"
        elif roll < 0.24:
            words[i] = f"{rng.randint(2, 99)} {word}"
    if rng.random() < 0.15:
        words[0] = f'"{words[0]}'
        words[-1] = f'{words[-1]}"'
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice(ENDINGS)


def generate_records(
    rng: random.Random, start: datetime, files: int, rows_per_file: int
) -> list[list[Record]]:
    """Prose lines of one or two sentences from a fixed word list (apostrophes, accents,
    punctuation, mixed case). File i belongs to the day of `start` + i hours."""
    begin = epoch_us(start)
    built: list[list[Record]] = []
    for i in range(files):
        day_us = (begin + i * 3_600_000_000) // 86_400_000_000 * 86_400_000_000
        built.append(
            [
                Record(
                    time_us=day_us,
                    value=" ".join(_sentence(rng) for _ in range(rng.randint(1, 2))),
                    movable=False,
                )
                for _ in range(rows_per_file)
            ]
        )
    return built


GENERATOR = GeneratorSpec(
    dataset="lines",
    record_format="text",
    build=generate_records,
    malformed_kinds=("bad_utf8",),
    demo={"files": 10, "rows_per_file": 200, "malformed_rate": 0.005},
)
