"""Sizes of what a zip (a model, ``VecNormalize`` statistics) may inflate to, checked on the sizes its directory
declares before anything is read (``zipfile`` never inflates an entry beyond its declared size)."""

from __future__ import annotations

import math
import zipfile
from collections.abc import Collection, Mapping

import numpy as np

#: Highest compression ratio of a zip entry over :data:`MIN_RATIO_CHECKED_BYTES`: SB3 and numpy store entries
#: uncompressed (ratio 1), deflate packs weights to about 1.1 and JSON to about 10, while an entry of zeros deflates
#: 1000-fold (a 3 MB zip of 3 GB).
MAX_COMPRESSION_RATIO = 100
#: Entries up to this size are not ratio-checked: whatever they hold costs little.
MIN_RATIO_CHECKED_BYTES = 1 << 20


def check_zip_sizes(
    archive: zipfile.ZipFile, where: str, *, limits: Mapping[str, int] | None = None, nested: Collection[str] = (".pth",)
) -> None:
    """Refuse a zip whose entries would inflate to more than a file of its kind holds, before any entry is read.

    Each entry must declare at most its limit in ``limits`` (by name) and, above :data:`MIN_RATIO_CHECKED_BYTES`, a
    compression ratio of at most :data:`MAX_COMPRESSION_RATIO`. Entries whose names end with one of ``nested`` and
    that are zips themselves (torch's ``.pth`` files, which ``torch.load`` inflates) are checked the same way.

    :param archive: the open zip.
    :param where: the file, used in the messages.
    :raises ValueError: naming the entry, its declared size and the limit.
    """
    for info in archive.infolist():
        what = f"{where}: its entry {info.filename!r} inflates to {info.file_size} bytes"
        limit = (limits or {}).get(info.filename)
        if limit is not None and info.file_size > limit:
            raise ValueError(f"{what}, the limit is {limit}; it is not a file Stable-Baselines3 or this package wrote")
        ratio = info.file_size / max(info.compress_size, 1)
        if info.file_size > MIN_RATIO_CHECKED_BYTES and ratio > MAX_COMPRESSION_RATIO:
            raise ValueError(
                f"{what} from {info.compress_size} ({ratio:.0f} times; the limit is "
                f"{MAX_COMPRESSION_RATIO}, MAX_COMPRESSION_RATIO): a zip bomb, refused before inflating it"
            )
        if info.filename.endswith(tuple(nested)):
            with archive.open(info) as member:
                if zipfile.is_zipfile(member):
                    member.seek(0)
                    with zipfile.ZipFile(member) as inner:
                        check_zip_sizes(inner, f"{where}:{info.filename}", nested=())


def npz_headers(archive: zipfile.ZipFile, where: str) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """The shape and dtype of every array of an ``.npz`` (by name, without ``.npy``), read from the ``.npy`` headers
    only (:mod:`numpy.lib.format`), so that sizes are known before any array is read.

    :raises ValueError: for an entry that is not a ``.npy`` array of format 1.0 or 2.0 (what ``numpy.savez`` writes).
    """
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    headers = {}
    for info in archive.infolist():
        with archive.open(info) as member:
            try:
                version = np.lib.format.read_magic(member)
                if version not in readers:
                    raise ValueError(f"format version {version} is not read")
                shape, _, dtype = readers[version](member)
            except ValueError as error:
                raise ValueError(f"{where}: its entry {info.filename!r} is not a .npy array ({error})") from None
        headers[info.filename.removesuffix(".npy")] = (tuple(shape), dtype)
    return headers


def load_bounded_npz(path: str, max_entry_bytes: int) -> dict[str, np.ndarray]:
    """The arrays of the ``.npz`` file ``path`` (``numpy.savez``'s zip of ``.npy`` entries), each checked before it is
    read: at most ``max_entry_bytes`` inflated (:func:`check_zip_sizes`), an array header whose shape and type fit the
    bytes the entry holds (a header may declare 10**12 elements in a few bytes, which ``numpy.load`` would allocate),
    and no pickled objects.

    :raises ValueError: naming the file and the entry, for a damaged, oversized or inconsistent file.
    """
    try:
        with zipfile.ZipFile(path) as archive:
            check_zip_sizes(archive, path, limits={info.filename: max_entry_bytes for info in archive.infolist()})
            headers = npz_headers(archive, path)
            arrays = {}
            for info in archive.infolist():
                name = info.filename.removesuffix(".npy")
                shape, dtype = headers[name]
                if dtype.hasobject:
                    raise ValueError(f"{path}: its entry {name!r} holds Python objects (pickles); refused")
                declared = math.prod(shape) * dtype.itemsize
                if declared > info.file_size:
                    raise ValueError(
                        f"{path}: its entry {name!r} declares {shape} {dtype} ({declared} bytes) in {info.file_size}"
                    )
                with archive.open(info) as member:
                    try:
                        arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
                    except ValueError as error:  # e.g. fewer bytes than the header declares
                        raise ValueError(f"{path}: its entry {name!r}: {error}") from None
            return arrays
    except (zipfile.BadZipFile, EOFError, OSError) as error:
        raise ValueError(f"{path}: not a readable .npz file ({error})") from None
