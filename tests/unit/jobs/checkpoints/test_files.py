"""Reading Spark's checkpoint files (`jobs.checkpoints.files`), on folders written by hand.

`SparkCheckpoint` writes what a Spark 4.2 file-source query leaves in its checkpoint, byte for byte
as a real run does (`metadata`, `offsets/<n>`, `commits/<n>`, the file source log `sources/0/`
with its `<n>.compact` files holding every earlier entry, hidden `.crc` files beside each, no
newline at the end), so that the expected batches and files are known without starting Spark.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
from upath import UPath

from core.config import object_path, real_name
from core.errors import RunoffError
from jobs.checkpoints.files import (
    CheckpointFileError,
    LogKind,
    SourceFile,
    batch_ids,
    files_of_batch,
    files_read_at_start,
    ingested_files,
    last_committed,
    log_lines,
    read_query_id,
    real_path,
    source_log,
    source_offset,
    spark_path,
)

QUERY_ID = "6f2a3707-27e4-45a3-9eba-4898a1eaebf9"
BATCH_METADATA = '{"batchWatermarkMs":0,"batchTimestampMs":1795630469574,"conf":{}}'
COMMIT = '{"nextBatchWatermarkMs":0}'
URI_SAFE = "/@,;:$&+=!~'()*"  # what java.net.URI leaves unescaped in a path


def compact(doc: object) -> str:
    return json.dumps(doc, separators=(",", ":"))


def spark_uri(path: Path) -> str:
    """How Spark logs a local file: `file://` and the path, escaped as `java.net.URI` does
    (`a b#1.json` -> `a%20b%231.json`; `=` and `:` stay)."""
    return "file://" + quote(str(path), safe=URI_SAFE)


class SparkCheckpoint:
    """A checkpoint folder as a file-source query writes it (`compact_interval`:
    `spark.sql.streaming.fileSource.log.compactInterval`)."""

    def __init__(self, root: Path, compact_interval: int = 10) -> None:
        self.root = root
        self.interval = compact_interval
        self.entries: list[dict[str, object]] = []  # every entry of the file source log so far
        self.log_batch = -1  # the file source's newest log batch
        self.batch = -1  # the newest planned micro-batch
        self.write(root / "metadata", [compact({"id": QUERY_ID})])

    @staticmethod
    def write(path: Path, lines: list[str]) -> None:
        """A file and its hidden checksum, as Spark's checkpoint file manager leaves them."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines))
        path.with_name(f".{path.name}.crc").write_bytes(b"crc\x00\x00\x00\x00\x1f\x8b")

    def log(self, *files: Path) -> int:
        """The file source takes `files` into its next log batch: `sources/0/<L>`, or on every
        `compact_interval`-th batch `<L>.compact` holding every entry so far."""
        self.log_batch += 1
        batch = self.log_batch
        new = [
            {"path": spark_uri(f), "timestamp": f.stat().st_mtime_ns // 10**6, "batchId": batch}
            for f in files
        ]
        self.entries += new
        compaction = (batch + 1) % self.interval == 0
        name = f"{batch}.compact" if compaction else str(batch)
        entries = self.entries if compaction else new
        self.write(self.root / "sources" / "0" / name, ["v1", *map(compact, entries)])
        return batch

    def plan(self) -> int:
        """Plan the next micro-batch: `offsets/<N>` with the file source's newest log batch."""
        self.batch += 1
        offset = compact({"logOffset": self.log_batch})
        self.write(self.root / "offsets" / str(self.batch), ["v1", BATCH_METADATA, offset])
        return self.batch

    def commit(self) -> None:
        self.write(self.root / "commits" / str(self.batch), ["v1", COMMIT])

    def run(self, *files: Path) -> int:
        """One micro-batch of `files`, planned and committed."""
        self.log(*files)
        batch = self.plan()
        self.commit()
        return batch


def landed(folder: Path, *names: str) -> list[Path]:
    files = []
    for name in names:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{name}\n")
        files.append(path)
    return files


# -- names, commits, the query id -----------------------------------------------------------------
def test_batch_ids_skip_hidden_temp_and_checksum_files(tmp_path: Path) -> None:
    checkpoint = tmp_path / "ckpt"
    assert last_committed(None) is None
    assert last_committed(checkpoint) is None
    (checkpoint / "commits").mkdir(parents=True)
    assert last_committed(checkpoint) is None
    for name in ("0", "1", "2", "10", ".10.crc", ".11.1f9c2b.tmp", "9", "9.compact", "x"):
        (checkpoint / "commits" / name).write_text(f"v1\n{COMMIT}")
    assert batch_ids(checkpoint / "commits") == [0, 1, 2, 9, 10]
    assert batch_ids(checkpoint / "commits", ".compact") == [9]
    assert last_committed(checkpoint) == 10
    assert batch_ids(tmp_path / "missing") == []


def test_read_query_id(tmp_path: Path) -> None:
    checkpoint = SparkCheckpoint(tmp_path / "ckpt").root
    assert read_query_id(checkpoint) == QUERY_ID
    assert read_query_id(tmp_path / "never-started") is None
    (checkpoint / "metadata").write_text('{"id": "6f2a')
    with pytest.raises(RunoffError, match=r"cannot read the query id from .*metadata"):
        read_query_id(checkpoint)


# -- one log file ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kind", "text", "lines"),
    [
        ("commits", f"v1\n{COMMIT}", [COMMIT]),
        (
            "offsets",
            f'v1\n{BATCH_METADATA}\n{{"logOffset":3}}',
            [BATCH_METADATA, '{"logOffset":3}'],
        ),
        ("offsets", f"v1\n{BATCH_METADATA}\n-", [BATCH_METADATA, "-"]),
        # spark.sql.streaming.offsetLog.formatVersion=2: `<source id>:<offset>` lines
        ("offsets", f'v2\n{BATCH_METADATA}\n0:{{"logOffset":3}}\n1:-', None),
        ("source", 'v1\n{"path":"file:///a","timestamp":1,"batchId":0}', None),
        ("source", "v1", []),
    ],
)
def test_log_lines_of_files_spark_writes(
    tmp_path: Path, kind: LogKind, text: str, lines: list[str] | None
) -> None:
    path = tmp_path / "0"
    path.write_text(text)
    assert log_lines(path, kind) == (text.split("\n")[1:] if lines is None else lines)


def test_a_file_spark_cannot_read_names_itself(tmp_path: Path) -> None:
    path = tmp_path / "commits" / "4"
    path.parent.mkdir()
    path.write_text('v1\n{"nextBatchWat')
    with pytest.raises(CheckpointFileError) as caught:
        log_lines(path, "commits")
    assert (caught.value.path, caught.value.problem) == (path, "line 2 is not complete JSON")
    assert str(caught.value) == f"cannot read checkpoint file {path}: line 2 is not complete JSON"
    assert isinstance(caught.value, RunoffError)  # the CLI prints it as one line
    with pytest.raises(CheckpointFileError, match="unreadable: No such file or directory"):
        log_lines(tmp_path / "commits" / "5", "commits")


# -- the file source log --------------------------------------------------------------------------
def test_the_log_is_the_newest_compaction_and_the_files_after_it(tmp_path: Path) -> None:
    landing = tmp_path / "landing" / "events"
    spark = SparkCheckpoint(tmp_path / "ckpt", compact_interval=10)
    files = landed(landing, *(f"date=2024-01-01/f{n:02}.json" for n in range(25)))
    for path in files:
        spark.run(path)
    log = spark.root / "sources" / "0"
    # What Spark leaves within fileSource.log.cleanupDelay: every file, each compaction a copy.
    assert sorted(p.name for p in log.iterdir() if not p.name.startswith(".")) == sorted(
        [*(str(n) for n in range(25) if n not in (9, 19)), "9.compact", "19.compact"]
    )
    entries = source_log(spark.root)
    assert [e.path for e in entries] == [str(f) for f in files]
    assert [e.batch_id for e in entries] == list(range(25))
    assert entries[0] == SourceFile(spark_uri(files[0]), files[0].stat().st_mtime_ns // 10**6, 0)
    assert ingested_files(spark.root) == {real_name(UPath(f)) for f in files}
    assert source_log(None) == [] and ingested_files(tmp_path / "missing") == set()


def test_files_spark_no_longer_reads_are_not_read(tmp_path: Path) -> None:
    """The file source log before its newest compaction is a redundant copy Spark deletes when it
    expires, even while `runoff status` reads the folder (the old status reader read every file
    present and failed on such a file, garbage or gone)."""
    spark = SparkCheckpoint(tmp_path / "ckpt", compact_interval=10)
    files = landed(tmp_path / "landing", *(f"f{n:02}.json" for n in range(12)))
    for path in files:
        spark.run(path)
    log = spark.root / "sources" / "0"
    (log / "3").write_text("garbage")  # before the newest compaction (9.compact)
    (log / "4").unlink()
    (log / "4").symlink_to(log / "deleted")  # listed, then deleted by Spark before it is read
    assert [e.path for e in source_log(spark.root)] == [str(f) for f in files]
    assert len(ingested_files(spark.root)) == 12
    (log / "10").write_text('v1\n{"path":"file:///l/x.json","timest')  # after it: Spark reads it
    with pytest.raises(CheckpointFileError, match=r"sources/0/10: line 2 is not complete JSON"):
        source_log(spark.root)


def test_a_logged_path_is_the_one_spark_listed_decoded(tmp_path: Path) -> None:
    """Spark logs the escaped URI of the path below the folder it was given, symlinks kept:
    `spark_path` is that path (where `cleanSource=archive` moves the file, under the archive
    root), `real_path` resolves it to compare with a listed landing file's `real_name`."""
    real = tmp_path / "disk" / "landing"
    real.mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "disk")
    (listed,) = landed(tmp_path / "link" / "landing", "date=2024-01-01/a b#1%.json")
    spark = SparkCheckpoint(tmp_path / "ckpt")
    spark.run(listed)
    (entry,) = source_log(spark.root)
    assert entry.uri == (
        f"file://{quote(str(tmp_path), safe=URI_SAFE)}/link/landing/date=2024-01-01/"
        "a%20b%231%25.json"
    )
    assert entry.path == str(listed)  # not resolved: Spark's name
    assert entry.real_path == str((real / "date=2024-01-01" / "a b#1%.json").resolve())
    assert ingested_files(spark.root) == {real_name(UPath(listed))}
    assert spark_path(f"file:{quote(str(listed))}") == str(listed)  # Hadoop's `file:/` form


def test_an_object_path_is_decoded_too(tmp_path: Path) -> None:
    """An s3a key is logged escaped like a local path: decoded, it is the object's name (the old
    readers kept the escapes, so such a file never matched its landing object)."""
    uri = "s3a://bucket/landing/date=2024-01-01/a%20b%231.json"
    key = "s3a://bucket/landing/date=2024-01-01/a b#1.json"
    assert spark_path(uri) == real_path(uri) == key == real_name(object_path(key))
    assert spark_path("s3a://bucket/landing/x.json") == "s3a://bucket/landing/x.json"


# -- what a micro-batch read ----------------------------------------------------------------------
def test_files_of_batch_follow_the_offsets_across_log_batches(tmp_path: Path) -> None:
    """A micro-batch planned again after a crash covers every log batch the source wrote since
    the previous micro-batch; a log batch folded into a compaction is read from it."""
    spark = SparkCheckpoint(tmp_path / "ckpt", compact_interval=10)
    files = landed(tmp_path / "landing", *(f"f{n:02}.json" for n in range(14)))
    spark.log(files[0], files[1])
    spark.log(files[2])
    spark.plan()  # micro-batch 0: log batches 0 and 1 (the second written before a crash)
    spark.commit()
    for path in files[3:9]:  # log batches 2-7, one micro-batch each
        spark.run(path)
    spark.log(files[9], files[10])  # log batch 8
    spark.log(files[11])  # log batch 9: 9.compact, every entry so far
    spark.log(files[12], files[13])  # log batch 10
    spark.plan()  # micro-batch 7: log batches 8-10
    assert not (spark.root / "sources" / "0" / "9").exists()

    def names(batch: int) -> list[str]:
        return [Path(e.path).name for e in files_of_batch(spark.root, batch)]

    assert names(0) == ["f00.json", "f01.json", "f02.json"]
    assert names(3) == ["f05.json"]
    assert names(7) == [f"f{n:02}.json" for n in range(9, 14)]
    with pytest.raises(CheckpointFileError, match=r"offsets/8: unreadable"):
        files_of_batch(spark.root, 8)  # not planned: unknown, not empty
    (spark.root / "sources" / "0" / "9.compact").unlink()
    with pytest.raises(CheckpointFileError, match=r"log batch 9 is in none of its files"):
        files_of_batch(spark.root, 7)


def test_source_offsets_of_both_offset_log_formats(tmp_path: Path) -> None:
    offsets = tmp_path / "ckpt" / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "0").write_text(f'v1\n{BATCH_METADATA}\n-\n{{"logOffset":4}}')
    (offsets / "1").write_text(f'v2\n{BATCH_METADATA}\n1:{{"logOffset":6}}\n0:-')
    (offsets / "2").write_text(f"v1\n{BATCH_METADATA}\n7")  # a bare number, as older Spark wrote
    (offsets / "3").write_text(f'v1\n{BATCH_METADATA}\n{{"partition":3}}')
    checkpoint = tmp_path / "ckpt"
    offsets_of = [source_offset(checkpoint, b, source=s) for b in (0, 1) for s in (0, 1)]
    assert offsets_of == [-1, 4, -1, 6]
    assert source_offset(checkpoint, 2) == 7
    with pytest.raises(CheckpointFileError, match="no offset line for source 2"):
        source_offset(checkpoint, 0, source=2)
    with pytest.raises(CheckpointFileError, match="is not a file source's"):
        source_offset(checkpoint, 3)


# -- what a restart reads -------------------------------------------------------------------------
def test_files_read_at_start(tmp_path: Path) -> None:
    spark = SparkCheckpoint(tmp_path / "ckpt", compact_interval=2)
    for path in landed(tmp_path / "landing", "a.json", "b.json", "c.json", "d.json", "e.json"):
        spark.run(path)
    spark.log(*landed(tmp_path / "landing", "f.json"))
    spark.plan()  # micro-batch 5, not committed
    root, log = spark.root, spark.root / "sources" / "0"
    assert sorted(p.name for p in log.iterdir() if not p.name.startswith(".")) == [
        "0",
        "1.compact",
        "2",
        "3.compact",
        "4",
        "5.compact",
    ]
    assert files_read_at_start(root) == [
        (root / "offsets" / "5", "offsets"),
        (root / "offsets" / "4", "offsets"),
        (root / "commits" / "4", "commits"),
        (log / "5.compact", "source"),
    ]
    spark.run(*landed(tmp_path / "landing", "g.json"))
    assert files_read_at_start(root)[-2:] == [(log / "5.compact", "source"), (log / "6", "source")]
    assert files_read_at_start(tmp_path / "empty") == []


def test_the_query_reads_what_the_reader_reads(tmp_path: Path) -> None:
    """`source_log` reads exactly the source files of `files_read_at_start`."""
    spark = SparkCheckpoint(tmp_path / "ckpt", compact_interval=3)
    for path in landed(tmp_path / "landing", *(f"{n}.json" for n in range(8))):
        spark.run(path)
    read: list[str] = []
    original = Path.read_text

    def spy(self: Path, *args: object, **kwargs: object) -> str:
        read.append(self.name)
        return original(self, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Path, "read_text", spy)
        assert len(source_log(spark.root)) == 8
    assert read == ["5.compact", "6", "7"]
    at_start = [p.name for p, kind in files_read_at_start(spark.root) if kind == "source"]
    assert sorted(at_start) == sorted(read)
