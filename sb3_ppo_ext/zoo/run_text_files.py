"""The text files of a run read a bounded line at a time: CSV files (``progress.csv``, the grid's collected CSVs),
logs, and SB3's ``Monitor`` files, each refused by name (``ValueError``) where it is not what SB3 or the grid writes.
Used by ``grid collect`` and ``report``, ``train --resume`` and ``plot``."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

#: Most characters of one line of a text file read here (``progress.csv``, a collected CSV, ``train.log``): a
#: row of SB3's logger is a few kilobytes; a crafted 500 MB line would otherwise be held whole in memory.
MAX_LINE_CHARACTERS = 1 << 20


def bounded_lines(stream: IO[str], path: str, *, skip_long: bool = False, first_line: int = 1) -> Iterator[str]:
    """The lines of an open text file, each read with at most :data:`MAX_LINE_CHARACTERS` characters in memory.

    :param skip_long: leave out a longer line (a log's) rather than refuse the file.
    :param first_line: the number of the stream's next line in the file (for the message), when lines were read
        before.
    :raises ValueError: naming the file and line, for a longer line unless ``skip_long``.
    """
    number = first_line - 1
    while line := stream.readline(MAX_LINE_CHARACTERS + 1):
        number += 1
        if len(line) <= MAX_LINE_CHARACTERS:
            yield line
            continue
        if not skip_long:
            raise ValueError(
                f"{path}, line {number}: longer than {MAX_LINE_CHARACTERS} characters; not a file SB3 or this package wrote"
            )
        while line and not line.endswith("\n"):  # the rest of the long line, read and dropped piece by piece
            line = stream.readline(MAX_LINE_CHARACTERS + 1)


def csv_rows(stream: IO[str], path: str) -> Iterator[dict[str, str]]:
    """The rows of a CSV file as dicts, its lines bounded (:func:`bounded_lines`) and csv's own errors (a field
    beyond its size limit, a NUL byte) named as the file's."""
    yield from checked_csv_rows(csv.DictReader(bounded_lines(stream, path)), path)


def checked_csv_rows(reader: csv.DictReader, path: str) -> Iterator[dict[str, str]]:
    """``reader``'s rows, a ``csv.Error`` raised as a ValueError naming the file and line."""
    try:
        yield from reader
    except csv.Error as error:
        raise ValueError(f"{path}, line {reader.line_num}: not a CSV row ({error})") from None


@dataclass(frozen=True)
class MonitorFile:
    """What :func:`scan_monitor` read of a ``*.monitor.csv`` file of SB3's ``Monitor``.

    :param start: its start time (``t_start`` of its JSON header, seconds since the epoch).
    :param episodes: each episode's end time since ``start`` (``t``) and length (``l``), in the file's order (only
        the last one, when read with ``keep_episodes=False``).
    :param complete_bytes: the bytes of the file up to the end of its last whole line (the header, the column names,
        the rows read): a row cut short by a stop mid-write lies beyond them.
    :param has_columns: whether the file has its line of column names (a file cut short after its header has not).
    """

    start: float
    episodes: list[tuple[float, int]]
    complete_bytes: int
    has_columns: bool


def scan_monitor(path: str, *, keep_episodes: bool = True) -> MonitorFile:
    """Read a ``*.monitor.csv`` file of SB3's ``Monitor`` once, a bounded line at a time: its header (a JSON object
    with a finite ``t_start``), its column names and each row's ``t`` and ``l``. A last line without its line end (a
    row cut short as the file was being written) is left out; every whole row must hold a finite ``t`` and a length.

    :param keep_episodes: keep every episode (else only the last, so that a long file costs no memory).
    :raises ValueError: naming the file and line, for a header or row that is not the Monitor's.
    """
    # surrogateescape: a byte that is not UTF-8 fails as a value, and each line re-encodes to its exact bytes.
    with open(path, encoding="utf-8", errors="surrogateescape", newline="") as stream:
        header = stream.readline(MAX_MONITOR_HEADER_CHARACTERS)
        try:
            start = float(json.loads(header.lstrip("#"))["t_start"])
        except (KeyError, TypeError, ValueError):  # ValueError: json's errors too
            raise ValueError(f"{path}: line 1 is not a Monitor header (a JSON object with a t_start)") from None
        if not math.isfinite(start):
            raise ValueError(f"{path}: its t_start must be a finite number of seconds, got {start}")
        complete_bytes = _byte_length(header)
        lines = bounded_lines(stream, path, first_line=2)
        names = next(lines, "")
        if not names.endswith("\n"):
            return MonitorFile(start, [], complete_bytes, has_columns=False)
        columns = next(csv.reader([names]), [])
        complete_bytes += _byte_length(names)
        episodes: list[tuple[float, int]] = []
        for line in lines:
            if not line.endswith("\n"):  # the row being written when the file was read or its writer stopped
                break
            complete_bytes += _byte_length(line)
            fields = next(csv.reader([line]), [])
            if not fields:
                continue
            row = dict(zip(columns, fields, strict=False))
            try:
                end, length = float(row["t"]), int(row["l"])
                if not math.isfinite(end) or length < 0:
                    raise ValueError
            except (KeyError, ValueError):
                raise ValueError(f"{path}, episode {len(episodes) + 1}: not a Monitor row of t and l ({row})") from None
            if not keep_episodes:
                episodes.clear()
            episodes.append((end, length))
    return MonitorFile(start, episodes, complete_bytes, has_columns=True)


def _byte_length(line: str) -> int:
    """The bytes of a line read with ``errors="surrogateescape"``, as they are in the file."""
    return len(line.encode("utf-8", errors="surrogateescape"))


#: Most characters of a Monitor file's header line (its JSON: t_start, env_id and the info keywords' names).
MAX_MONITOR_HEADER_CHARACTERS = 1 << 16
