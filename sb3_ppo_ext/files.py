"""Writing files safely: output folders checked up front, and atomic writes (a crash never leaves a half-written
file). Used by the callbacks, the plain-data statistics, shipped agents and resumed runs."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from collections.abc import Iterator
from typing import IO, Any


def check_writable_dir(name: str, path: Any) -> str:
    """Create the folder ``path`` if needed and check that files can be created in it.

    :param name: parameter name, used in the error message.
    :param path: folder path (``str`` or ``os.PathLike``).
    :return: the path as a string.
    :raises ValueError: when the path is not a folder or cannot be written.
    """
    if not isinstance(path, (str, os.PathLike)) or str(path) == "":
        raise ValueError(f"{name} must be a folder path, got {path!r}")
    folder = os.fspath(path)
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-check-"):
            pass
    except OSError as error:
        raise ValueError(f"{name} must be a folder that can be written, got {folder!r} ({error.strerror or error})") from error
    return folder


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "wb") -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path``; on success fsync it and move it onto ``path`` atomically.

    A failure inside the ``with`` block (or a crash) leaves any previous ``path`` untouched and removes the temporary
    file (a crash can leave a ``.<name>.*.tmp`` file behind, never a half-written ``path``).

    :param path: the final file path.
    :param mode: ``"wb"`` or ``"w"``.
    """
    with atomic_path(path) as temporary, open(temporary, mode) as handle:
        yield handle


@contextlib.contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """Like :func:`atomic_write` for writers that want a file name: yields a temporary path with the same extension.

    The temporary file is fsynced and moved onto ``path`` when the block succeeds, and removed when it fails.
    """
    folder = os.path.dirname(os.path.abspath(path))
    extension = os.path.splitext(path)[1]
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.", suffix=f".tmp{extension}")
    os.close(descriptor)
    try:
        os.chmod(temporary, _file_mode(path))  # mkstemp makes 0600 files; keep the mode a plain open() would give
        yield temporary
        with open(temporary, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    fsync_directory(folder)


def _file_mode(path: str) -> int:
    """The permission bits for writing ``path``: those of the file it replaces, else ``0o666`` minus the umask."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        umask = os.umask(0)  # reading the umask means setting it: put it straight back
        os.umask(umask)
        return 0o666 & ~umask


def fsync_directory(folder: str) -> None:
    """Flush a directory entry change (rename, unlink) to disk where the platform allows it."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)
