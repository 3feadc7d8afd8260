"""Reading and writing `.nnc` files safely: nothing unsafe is followed, blocked on, or read beyond its declared size.

Owns `read_nnc_file` (a checked CompilationRecord or a miss), `read_cache_file` and `map_cache_file` (files are
opened without following symlinks and without blocking, must be regular files, and are read only up to the size
their header and entry headers declare, which must be the file's size: `declared_container_size`),
`write_file_atomically`, `cache_file_path`, `CacheFileError`, `read_kept_file`, and `file_identity` (what the
records kept beside the cache, the program snapshot, the code digests and the weight digests, check a user's file
against). Imports the container, the records, the writer (a path being written is waited for before it is read) and
the cleanup's temp prefix.
"""
from __future__ import annotations

import errno
import mmap
import os
import stat
import struct
from collections.abc import Callable, Collection, Iterable

import numpy as np

from nnadapter_bridge.nnadapter.nnc.cleanup import TMP_PREFIX
from nnadapter_bridge.nnadapter.nnc.container import (
    ENTRY_HEADER_SIZE,
    HEADER_SIZE,
    MAGIC,
    MAGIC_BYTES,
    VERSION,
    BytesLike,
    align4,
)
from nnadapter_bridge.nnadapter.nnc.identity import CacheIdentity
from nnadapter_bridge.nnadapter.nnc.records import CompilationRecord, load_compilation_record, warn_miss
from nnadapter_bridge.nnadapter.nnc.writer import wait_for_pending_write

FILE_EXTENSION = ".nnc"
# check(fd, size): vets a file's declared layout before anything is read (declared_container_size).
LayoutCheck = Callable[[int, int], None]


def cache_file_path(cache_dir: str, token: str) -> str:
    return os.path.join(cache_dir, token + FILE_EXTENSION)


MAX_FILE_SIZE_ENV = "NNADAPTER_BRIDGE_CACHE_MAX_FILE_BYTES"
DEFAULT_MAX_FILE_SIZE = 16 << 30  # a sane global cap on one cache file, whatever its header declares
_MAX_ENTRIES = 1 << 20


class CacheFileError(OSError):
    """A cache file that must not be read (a symlink, not a regular file, too large, or a layout that does
    not match its size); readers turn it into a warned miss."""


def max_file_size() -> int:
    try:
        value = int(os.environ.get(MAX_FILE_SIZE_ENV, ""))
    except ValueError:
        return DEFAULT_MAX_FILE_SIZE
    return value if value > 0 else DEFAULT_MAX_FILE_SIZE


_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0))


def _pread(fd: int, size: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - platforms without pread (Windows)
    return os.read(fd, size)


def _pread_exact(fd: int, size: int, offset: int) -> bytes:
    data = _pread(fd, size, offset)
    if len(data) != size:
        raise CacheFileError(f"{len(data)} bytes at offset {offset}, expected {size} (the file shrank)")
    return data


def declared_container_size(fd: int, size: int) -> None:
    """Check, reading only the 24-byte header and the 16-byte entry headers, that the container layout the
    file declares ends exactly at its `size` (CacheFileError otherwise): nothing larger is ever read."""
    if size < HEADER_SIZE:
        raise CacheFileError(f"{size} bytes is shorter than the {HEADER_SIZE}-byte header")
    magic, version, _crc, _padding, count = struct.unpack("<IIIIQ", _pread_exact(fd, HEADER_SIZE, 0))
    if magic != MAGIC:
        raise CacheFileError(f"bad magic (expected {MAGIC_BYTES!r})")
    if version != VERSION:
        raise CacheFileError(f"unsupported version {version} (expected {VERSION})")
    if count > min((size - HEADER_SIZE) // ENTRY_HEADER_SIZE, _MAX_ENTRIES):
        raise CacheFileError(f"the header declares {count} entries, more than {size} bytes can hold")
    offset = HEADER_SIZE
    for index in range(count):
        if size - offset < ENTRY_HEADER_SIZE:
            raise CacheFileError(f"entry {index} starts past the end of the {size}-byte file")
        key_size, value_size = struct.unpack("<QQ", _pread_exact(fd, ENTRY_HEADER_SIZE, offset))
        offset += align4(ENTRY_HEADER_SIZE + key_size + value_size)
        if offset > size:
            raise CacheFileError(f"entry {index} declares {key_size} + {value_size} bytes, past the end of "
                                 f"the {size}-byte file")
    if offset != size:
        raise CacheFileError(f"the entries declare {offset} bytes, the file has {size}")


def read_cache_file(path: str, max_size: int, check: LayoutCheck | None = None) -> bytes:
    """The bytes of the regular file `path`, read safely: the last path component is not followed when it
    is a symlink, opening never blocks (FIFOs), fstat must say regular file of at most `max_size` bytes, and
    `check(fd, size)` may vet the declared layout before anything is read. Raises FileNotFoundError for a
    missing file and OSError (CacheFileError) for everything else."""
    fd = _open_no_follow(path)
    try:
        return _read_open_file(fd, os.fstat(fd), max_size, check)
    finally:
        os.close(fd)


def read_kept_file(path: str, max_size: int) -> tuple[bytes | None, str | None]:
    """read_cache_file for the records kept beside the cache (verdicts, plans, snapshots, digests): (bytes, None);
    (None, None) when there is no file (a plain miss); (None, why) when it cannot be read (a miss the caller
    warns about)."""
    try:
        return read_cache_file(path, max_size), None
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, str(exc) if isinstance(exc, CacheFileError) else f"cannot read it: {exc}"


def read_kept_json(path: str, max_size: int) -> tuple[object, str | None]:
    """read_kept_file, then the bytes parsed as JSON (orjson): (document, None); (None, None) when there is no
    file; (None, why) when it cannot be read or is not JSON (a miss the caller warns about). orjson refuses more
    than 1024 levels of nesting without recursing; no record kept beside the cache needs more than a few."""
    data, problem = read_kept_file(path, max_size)
    if data is None:
        return None, problem
    import orjson  # only when a record exists: not on the import path of the package

    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as exc:  # bad UTF-8 too
        if "depth limit" in str(exc):
            return None, "it nests more than 1024 levels deep (no record here needs more than a few)"
        return None, f"not valid JSON ({exc})"
    if document is None:  # None means "no file" to the caller
        return None, "it holds JSON null, not a record"
    return document, None


def _open_no_follow(path: str) -> int:
    """A descriptor for `path`, never following a symlink in its last component and never blocking."""
    try:
        return os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise CacheFileError("it is a symbolic link (cache files are never followed)") from None
        raise


def _read_open_file(fd: int, info: os.stat_result, max_size: int, check: LayoutCheck | None = None) -> bytes:
    """The checks and the read of read_cache_file on an open descriptor."""
    if not stat.S_ISREG(info.st_mode):
        kind = ("a directory" if stat.S_ISDIR(info.st_mode) else "a FIFO" if stat.S_ISFIFO(info.st_mode)
                else "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
                else "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file")
        raise CacheFileError(f"it is {kind}, not a regular file")
    size = info.st_size
    if size > max_size:
        raise CacheFileError(f"it is {size} bytes, more than the {max_size}-byte limit")
    if check is not None:
        check(fd, size)
    pieces = []
    left = size
    while left:
        piece = _pread(fd, min(left, 1 << 30), size - left)
        if not piece:
            raise CacheFileError(f"it shrank while being read ({size - left} of {size} bytes)")
        pieces.append(piece)
        left -= len(piece)
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)  # b"" for an empty file


# Files at least this large are memory-mapped instead of read (when `_may_map` allows): reading costs a copy
# into memory (and the peak RSS of the whole file); a mapping costs nothing until a page is touched.
MAP_THRESHOLD = 1 << 20


def _may_map(info: os.stat_result) -> bool:
    """Whether the file's contents can change only through its owner, and that owner is this process's user:
    then a mapping checked once (CRC, HMAC, identity) keeps holding what was checked. Our writers never
    modify a cache file in place (they rename a new file over it), so such a file does not change under the
    map; a file someone else owns, or that group/others may write, is read into memory instead."""
    return (hasattr(os, "geteuid") and info.st_uid == os.geteuid()
            and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and info.st_size >= MAP_THRESHOLD)


def map_cache_file(path: str, max_size: int, check: LayoutCheck | None = None) -> bytes | mmap.mmap:
    """`read_cache_file`, with the same checks, but a large file that only this user can change (`_may_map`)
    comes back as a private memory map (copy-on-write: nothing written to it reaches the file) instead of
    bytes read into memory. The map stays valid after the file is replaced or removed (it holds the inode)."""
    fd = _open_no_follow(path)
    try:
        info = os.fstat(fd)
        if not (stat.S_ISREG(info.st_mode) and info.st_size <= max_size and _may_map(info)):
            return _read_open_file(fd, info, max_size, check)
        if check is not None:
            check(fd, info.st_size)
        return mmap.mmap(fd, info.st_size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    finally:
        os.close(fd)


def mapped_program_buffer(data: BytesLike, view: BytesLike) -> np.ndarray | None:
    """For a value `view` of a record read from the private map `data` (map_cache_file): a writable uint8 array
    over the same bytes (copy-on-write, writes never reach the file), which a driver may keep instead of
    copying the bytes (driver_protocol.Cache.mapped_buffer); None when `data` is not such a map."""
    if not isinstance(data, mmap.mmap) or not len(view):
        return None
    base = np.frombuffer(data, dtype=np.uint8)
    if not base.flags.writeable:  # a read-only map: a driver could not hand it to an SDK as its memory
        return None
    inner = np.frombuffer(view, dtype=np.uint8)
    offset = inner.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    if not 0 <= offset <= len(base) - len(inner):
        return None
    return base[offset:offset + len(inner)]


def read_nnc_file(path: str, known_devices: Collection[str] | None = None, *,
                  expect: CacheIdentity | None = None,
                  key: bytes | None = None) -> CompilationRecord | None:
    """Read and check a .nnc file; a missing file is a silent miss, an unreadable, unsafe (see
    `read_cache_file`) or bad one a warned miss. A large file only this user can change is memory-mapped
    (`map_cache_file`); its program records then carry `mapped` arrays (`mapped_program_buffer`). When this
    process is writing `path` in the background (PendingCacheWrite), the write is waited for first."""
    wait_for_pending_write(path)
    try:
        data = map_cache_file(path, max_file_size(), declared_container_size)
    except FileNotFoundError:
        return None
    except OSError as exc:
        warn_miss(path, f"cannot read it: {exc}" if not isinstance(exc, CacheFileError) else str(exc))
        return None
    except ValueError as exc:  # mmap refusing the file (it shrank to nothing meanwhile)
        warn_miss(path, f"cannot map it: {exc}")
        return None
    record = load_compilation_record(data, path, known_devices, expect=expect, key=key)
    if record is not None:
        for program in record.programs:
            program.mapped = mapped_program_buffer(data, program.model_buffer)
    return record


def _process_umask() -> int:
    # Read once, at import: setting and restoring the umask later would briefly give every file another
    # thread creates meanwhile mode 0666.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _process_umask()


def file_identity(path: str, *, resolve: bool = False) -> list | None:
    """[path, device, inode, size, modification ns, status-change ns] of a regular file; None for anything else
    or a file that cannot be stat'ed. The status-change time is the content check that stays cheap: any write
    or time change sets it to the current time, and a user cannot set it back (a file rewritten with the same
    size and modification time has a new one). `resolve`: the real path (a syscall per path component)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return [os.path.realpath(path) if resolve else path, info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns,
            info.st_ctime_ns]


def write_file_atomically(path: str, data: BytesLike | Iterable[BytesLike]) -> None:
    """Write `data` (bytes, or a sequence of bytes-like pieces written one after another) to a temporary
    file next to `path`, then rename it over `path` (readers never see a half-written file)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    import tempfile  # here: a warm start writes nothing, and tempfile brings shutil, bz2, lzma and random (~4 ms)

    fd, temp_path = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=FILE_EXTENSION, dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            pieces = (data,) if isinstance(data, (bytes, bytearray, memoryview, mmap.mmap)) else data
            for piece in pieces:
                f.write(piece)
        # No fsync (0.3 s per 100 MB): after a crash the worst case is a torn file, which the CRC and size
        # checks turn into a cache miss with a warning, and the next run rewrites it.
        # mkstemp creates 0600; a cache dir shared between users wants the usual umask-based mode.
        os.chmod(temp_path, 0o666 & ~_UMASK)
        os.replace(temp_path, path)
    except BaseException:
        try:
            os.unlink(temp_path)
        except OSError:
            pass
        raise


