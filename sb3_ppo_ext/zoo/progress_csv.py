"""``progress.csv`` in a training run's folder: every value SB3's logger writes (``rollout/``, ``train/``, ``eval/``,
``time/`` ...), one CSV row per dump at full precision (rl-zoo3 only prints them, to 3 or 4 digits, and sends them
to tensorboard with ``-tb``). The rows are written by SB3's own CSV writer, added to the logger SB3 configures; a run
continued with ``train --resume`` appends to its file.
"""

from __future__ import annotations

import os
from typing import Any

from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import CSVOutputFormat, filter_excluded_keys

from sb3_ppo_ext.files import atomic_write
from sb3_ppo_ext.zoo.run_text_files import bounded_lines

#: The file, in the run folder, that :class:`ProgressCSVCallback` writes (SB3's name for its logger's CSV).
PROGRESS_FILE = "progress.csv"
#: Most bytes of ``progress.csv``'s header read back (SB3's logger keys, a few kilobytes).
MAX_HEADER_BYTES = 1 << 20


def _not_written_by_sb3(filename: str, what: str) -> ValueError:
    """The refusal of a ``progress.csv`` of which ``what`` is wrong."""
    return ValueError(
        f"{filename}: {what}, not a progress.csv SB3's logger wrote; move it aside to continue the run with a new one"
    )


def read_header(filename: str) -> list[str]:
    """The column names of an existing ``progress.csv`` (its first line, at most :data:`MAX_HEADER_BYTES`).

    :raises ValueError: naming the file, when the header is longer or not UTF-8 text.
    """
    with open(filename, "rb") as stream:
        line = stream.readline(MAX_HEADER_BYTES + 1)
    if len(line) > MAX_HEADER_BYTES:
        raise _not_written_by_sb3(filename, f"its header is longer than {MAX_HEADER_BYTES} bytes")
    try:
        return line.decode("utf-8").rstrip("\r\n").split(",")
    except UnicodeDecodeError:
        raise _not_written_by_sb3(filename, "its header is not UTF-8 text") from None


def check_progress_csv(filename: str) -> list[str]:
    """Check an existing ``progress.csv`` before a resumed run continues it, and return its column names: UTF-8 text
    (:func:`read_header`), each line at most :data:`~sb3_ppo_ext.zoo.run_text_files.MAX_LINE_CHARACTERS` characters,
    read one at a time. A new column rewrites the file's rows while the model learns
    (:meth:`AppendingCSVOutputFormat.add_columns`), where a damaged file would end training with a traceback.

    :raises ValueError: naming the file (and line), for a file SB3's logger did not write.
    """
    keys = read_header(filename)
    with open(filename, encoding="utf-8") as stream:
        try:
            for _ in bounded_lines(stream, filename):
                pass
        except UnicodeDecodeError as error:
            raise _not_written_by_sb3(filename, f"not UTF-8 text ({error.reason})") from None
    return keys


class AppendingCSVOutputFormat(CSVOutputFormat):
    """SB3's CSV writer of the logger (:class:`~stable_baselines3.common.logger.CSVOutputFormat`) that continues an
    existing file (SB3's opens it with ``"w+"``, erasing a resumed run's earlier rows) and takes its header as its
    columns. A key the header lacks becomes a new column, as in SB3's writer, but the file is rewritten atomically
    (:func:`~sb3_ppo_ext.files.atomic_write`, where SB3 rewrites it in place, which a stop would leave mixed) and the
    new columns come sorted (SB3's in a set's order, which changes from process to process).

    :param filename: the CSV file, created when missing.
    """

    def __init__(self, filename: str) -> None:
        # SB3's attributes, set here because its __init__ opens the file with "w+" (nothing else in it is needed).
        self.filename = filename
        self.separator = ","
        self.quotechar = '"'
        self.keys: list[str] = []
        cut_short = False
        if os.path.isfile(filename) and os.path.getsize(filename) > 0:
            self.keys = read_header(filename)
            with open(filename, "rb") as stream:
                stream.seek(-1, os.SEEK_END)
                cut_short = stream.read(1) != b"\n"
        self.file = open(filename, "a", encoding="utf-8")  # closed by close(), as SB3's file
        if cut_short:  # a row cut short by a stop mid-write: the next row starts on a line of its own
            self.file.write("\n")

    def write(self, key_values: dict[str, Any], key_excluded: dict[str, tuple[str, ...]], step: int = 0) -> None:
        """Add the columns this row brings (:meth:`add_columns`), then write it with SB3's :meth:`write`.

        :param key_values: the values of this dump, by key.
        :param key_excluded: the output formats each key is excluded from.
        :param step: the step of the dump (not written: SB3's CSV writer ignores it too).
        """
        new_keys = filter_excluded_keys(key_values, key_excluded, "csv").keys() - set(self.keys)
        if new_keys:
            self.add_columns(sorted(new_keys))
        super().write(key_values, key_excluded, step)

    def add_columns(self, keys: list[str]) -> None:
        """Append ``keys`` to the header: a file without rows gets its header written; one with rows is rewritten with
        the longer header and an empty cell per new column in each row, a bounded line at a time, atomically, and
        opened again for appending."""
        self.keys.extend(keys)
        header = self.separator.join(self.keys) + "\n"
        self.file.flush()
        if self.file.tell() == 0:
            self.file.write(header)
            return
        self.file.close()
        with open(self.filename, encoding="utf-8") as source, atomic_write(self.filename, "w") as stream:
            stream.write(header)
            rows = bounded_lines(source, self.filename)
            next(rows, None)  # the old header
            stream.writelines(row.rstrip("\r\n") + self.separator * len(keys) + "\n" for row in rows if row.strip("\r\n"))
        self.file = open(self.filename, "a", encoding="utf-8")  # closed by close(), as SB3's file


class ProgressCSVCallback(BaseCallback):
    """Write the values SB3's logger dumps during training to ``path`` as CSV rows (:class:`AppendingCSVOutputFormat`),
    besides the logger's other outputs.

    SB3's ``learn`` configures the model's logger (the standard output at ``verbose >= 1``, tensorboard when the model
    has a ``tensorboard_log``) before it sets up the callbacks, so the CSV writer is added to that logger here, when
    training starts, and closed when it ends: the standard output and tensorboard are left exactly as SB3 makes them.

    :param path: the CSV file; an existing one is continued.
    """

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        self.output: AppendingCSVOutputFormat | None = None

    def _init_callback(self) -> None:
        self.output = AppendingCSVOutputFormat(self.path)
        self.logger.output_formats.append(self.output)

    def _on_step(self) -> bool:
        return True

    def _on_training_end(self) -> None:
        # rl-zoo3 calls on_training_end of its first callback again after training: the second call finds nothing.
        if self.output is None:
            return
        if self.output in self.logger.output_formats:
            self.logger.output_formats.remove(self.output)
        self.output.close()
        self.output = None
