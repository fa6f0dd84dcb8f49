"""The text files of a run read a bounded line at a time: CSV files (``progress.csv``, the grid's collected CSVs),
logs, and SB3's ``Monitor`` files, each refused by name (``ValueError``) where it is not what SB3 or the grid writes.
Used by ``grid collect`` and ``report``, ``train --resume`` and ``plot``."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from typing import IO

#: Most characters of one line of a text file read here (``progress.csv``, a collected CSV, ``train.log``): a
#: row of SB3's logger is a few kilobytes; a crafted 500 MB line would otherwise be held whole in memory.
MAX_LINE_CHARACTERS = 1 << 20


def bounded_lines(stream: IO[str], path: str, *, skip_long: bool = False) -> Iterator[str]:
    """The lines of an open text file, each read with at most :data:`MAX_LINE_CHARACTERS` characters in memory.

    :param skip_long: leave out a longer line (a log's) rather than refuse the file.
    :raises ValueError: naming the file and line, for a longer line unless ``skip_long``.
    """
    number = 0
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


def read_monitor(path: str) -> tuple[float, list[tuple[float, int]]]:
    """A ``*.monitor.csv`` file of SB3's ``Monitor``: its start time (``t_start`` of its JSON header) and each
    episode's end time since then (``t``) and length (``l``). A last row cut short (the file is being written) is left
    out.

    :raises ValueError: naming the file and line, for a header or row that is not the Monitor's.
    """
    with open(path, encoding="utf-8", errors="replace") as stream:
        try:
            header = json.loads(stream.readline(MAX_MONITOR_HEADER_CHARACTERS).lstrip("#"))
            start = float(header["t_start"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: line 1 is not a Monitor header (a JSON object with a t_start)") from None
        if not math.isfinite(start):
            raise ValueError(f"{path}: its t_start must be a finite number of seconds, got {start}")
        rows = list(csv_rows(stream, path))
    episodes = []
    for index, row in enumerate(rows):
        try:
            end, length = float(row["t"]), int(row["l"])
            if not math.isfinite(end) or length < 0:
                raise ValueError
        except (KeyError, TypeError, ValueError):
            if index == len(rows) - 1:  # the row being written
                break
            raise ValueError(f"{path}, episode {index + 1}: not a Monitor row of t and l ({row})") from None
        episodes.append((end, length))
    return start, episodes


#: Most characters of a Monitor file's header line (its JSON: t_start, env_id and the info keywords' names).
MAX_MONITOR_HEADER_CHARACTERS = 1 << 16
