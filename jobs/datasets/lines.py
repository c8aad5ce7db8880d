"""lines: plain text, one record per non-empty line (landing files `*.txt`).

Lines carry no timestamp: bronze takes the event time from the landing folder's date
(`landing/lines/date=YYYY-MM-DD/...`, midnight UTC), so backfills by date work as for the others.

Silver `lines_word_counts`: one row per word (a maximal run of letters and apostrophes of the
lower-cased line, so "don't" is one word): the classic running word count, upserted after every
batch; no window, so no watermark applies.
"""

from __future__ import annotations

import random
from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from jobs.datasets.base import Dataset, SilverAggregate
from jobs.generate import GeneratorSpec, Record, epoch_us

BRONZE_SCHEMA = StructType([StructField("line", StringType(), True)])
DATE_IN_PATH = r"date=(\d{4}-\d{2}-\d{2})"


def event_time() -> Column:
    day = F.regexp_extract(F.col("_source_file"), DATE_IN_PATH, 1)
    return F.to_timestamp(F.when(day != "", day), "yyyy-MM-dd")


def to_bronze(parsed: DataFrame) -> DataFrame:
    return parsed.select("line")


def word_counts(bronze: DataFrame, watermark: str) -> DataFrame:
    """One row per word with its running count over all lines (no window, no watermark)."""
    words = F.explode(F.split(F.lower(F.col("line")), r"[^\p{L}']+")).alias("word")
    return (
        bronze.select(words)
        .where(F.col("word") != "")
        .groupBy("word")
        .agg(F.count(F.lit(1)).alias("count"))
    )


# -- sample data (`runoff generate lines`) -----------------------------------------------------
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
)


DATASET = Dataset(
    name="lines",
    description=__doc__ or "",
    record_format="text",
    record_schema=None,
    bronze_schema=BRONZE_SCHEMA,
    required=("line",),
    to_bronze=to_bronze,
    event_time=event_time,
    watermark="0 seconds",
    generator=GENERATOR,
    aggregates=(
        SilverAggregate(
            table="lines_word_counts",
            description="Running count of every word",
            transform=word_counts,
            keys=("word",),
        ),
    ),
)
