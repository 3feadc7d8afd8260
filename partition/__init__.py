"""Partitioning a Paddle program into device subgraphs and host ops.

`config`: the partition config (ops forced to the host) and where it is read from; `detector`: the
clustering of supported ops into subgraphs; `dump`: Paddle Lite's debug dump (DOT + `subgraph operators`);
`picture`: the readable drawing (boxes of ops by device, host ops with their reason, a legend).

The package re-exports each module's public names: that namespace is the partitioner's API
(`from partition import detect_subgraphs`). It imports only the ground; never converters, hal or the floors above.
"""
from partition.config import (  # noqa: F401
    ENV_CONFIG_BUFFER,
    ENV_CONFIG_FILE,
    PartitionConfig,
    PartitionConfigWarning,
    PartitionSpec,
    SpecMatch,
    op_key,
    resolve_partition_config,
)
from partition.detector import (  # noqa: F401
    HOST_ONLY_OP_TYPES,
    PartitionError,
    PartitionResult,
    Subgraph,
    body_ops,
    detect_subgraphs,
    sub_block_indices,
)

# The dump and the picture (subprocess, graphviz, drawing) load on first use: a predictor's start needs neither
# (issue 31: a warm start imports only what it runs).
_LAZY = {
    "SUBGRAPH_COLORS": "partition.dump", "GraphvizNotFoundError": "partition.picture", "dot_text": "partition.dump",
    "dump_text": "partition.dump", "print_dump_if_verbose": "partition.dump", "render": "partition.dump",
    "write_dot": "partition.dump", "MAX_PIXELS": "partition.picture", "Picture": "partition.picture",
    "PictureSizeWarning": "partition.picture", "Placement": "partition.picture", "build_picture": "partition.picture",
    "render_picture": "partition.picture",
}


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'partition' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
