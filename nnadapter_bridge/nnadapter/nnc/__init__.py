"""The `.nnc` model-cache format of Paddle Lite's NNAdapter runtime, byte for byte (facts §2.1-2.4), and its files.

One module per object:

* `container`: Paddle Lite's key/value container and its naive CRC32C;
* `records`: the 328-byte operand-type record and the compilation record (the keys a Compilation writes), read
  back as a checked record or a warned miss;
* `identity`: which model a record is for (token, fingerprint) and its keyed MAC;
* `files`: reading cache files safely (no symlink, no FIFO, nothing beyond the declared size, large files mapped)
  and writing them atomically;
* `writer`: the background writer (a thread per file, waited for by readers and at exit; fork-aware);
* `cleanup`: the temporary files of interrupted writes.

This module is the package's public API: the names below are what the rest of the project imports. The package
belongs to the ground: it imports only the standard's codes and types (`nnadapter.codes`, `nnadapter.types`), never
the runtime nor anything above the ground. docs/cache.md has the layout and what each check protects against.
"""
from nnadapter_bridge.nnadapter.nnc.cleanup import (
                                                    DEFAULT_TMP_MAX_AGE_S,
                                                    TMP_MAX_AGE_ENV,
                                                    TMP_PREFIX,
                                                    clean_stale_temp_files,
                                                    tmp_max_age_s,
)
from nnadapter_bridge.nnadapter.nnc.container import (
                                                    ENTRY_HEADER_SIZE,
                                                    HEADER_SIZE,
                                                    MAGIC,
                                                    MAGIC_BYTES,
                                                    VERSION,
                                                    BytesLike,
                                                    NncCacheWarning,
                                                    NncFormatError,
                                                    crc32c_naive,
                                                    crc32c_naive_tail,
                                                    crc32c_naive_update,
                                                    crc_shift,
                                                    pack_container,
                                                    pack_container_parts,
                                                    unpack_container,
                                                    unpack_container_views,
)
from nnadapter_bridge.nnadapter.nnc.files import (
                                                    DEFAULT_MAX_FILE_SIZE,
                                                    FILE_EXTENSION,
                                                    MAX_FILE_SIZE_ENV,
                                                    CacheFileError,
                                                    cache_file_path,
                                                    declared_container_size,
                                                    file_identity,
                                                    map_cache_file,
                                                    mapped_program_buffer,
                                                    max_file_size,
                                                    read_cache_file,
                                                    read_kept_file,
                                                    read_kept_json,
                                                    read_nnc_file,
                                                    write_file_atomically,
)
from nnadapter_bridge.nnadapter.nnc.identity import (
                                                    CACHE_KEY_ENV,
                                                    FINGERPRINT_KEY,
                                                    MAC_KEY,
                                                    MAC_PADDING,
                                                    MAC_SIZE,
                                                    TOKEN_KEY,
                                                    CacheIdentity,
                                                    identity_entries,
                                                    resolve_cache_key,
)
from nnadapter_bridge.nnadapter.nnc.records import (
                                                    OPERAND_TYPE_SIZE,
                                                    CompilationRecord,
                                                    ProgramRecord,
                                                    load_compilation_record,
                                                    pack_compilation_record,
                                                    pack_compilation_record_parts,
                                                    pack_operand_type,
                                                    pack_operand_types,
                                                    unpack_compilation_record,
                                                    unpack_operand_type,
                                                    unpack_operand_types,
)
from nnadapter_bridge.nnadapter.nnc.writer import PendingCacheWrite, has_pending_writes, wait_for_cache_writes

__all__ = [
    "CACHE_KEY_ENV", "DEFAULT_MAX_FILE_SIZE", "DEFAULT_TMP_MAX_AGE_S", "ENTRY_HEADER_SIZE", "FILE_EXTENSION",
    "FINGERPRINT_KEY", "HEADER_SIZE", "MAC_KEY", "MAC_PADDING", "MAC_SIZE", "MAGIC", "MAGIC_BYTES",
    "MAX_FILE_SIZE_ENV", "OPERAND_TYPE_SIZE", "TMP_MAX_AGE_ENV", "TMP_PREFIX", "TOKEN_KEY", "VERSION", "BytesLike",
    "CacheFileError", "CacheIdentity", "CompilationRecord", "NncCacheWarning", "NncFormatError", "PendingCacheWrite",
    "ProgramRecord", "cache_file_path", "clean_stale_temp_files", "crc32c_naive", "crc32c_naive_tail",
    "crc32c_naive_update", "crc_shift", "declared_container_size", "file_identity", "has_pending_writes",
    "identity_entries", "load_compilation_record", "map_cache_file", "mapped_program_buffer", "max_file_size",
    "pack_compilation_record", "pack_compilation_record_parts", "pack_container", "pack_container_parts",
    "pack_operand_type", "pack_operand_types", "read_cache_file", "read_kept_file", "read_kept_json",
    "read_nnc_file", "resolve_cache_key", "tmp_max_age_s", "unpack_compilation_record", "unpack_container",
    "unpack_container_views", "unpack_operand_type", "unpack_operand_types", "wait_for_cache_writes",
    "write_file_atomically",
]
