"""Partitioning a Paddle program into device subgraphs and host ops.

`config`: the partition config (ops forced to the host) and where it is read from; `detector`: the
clustering of supported ops into subgraphs; `dump`: Paddle Lite's debug dump (DOT + `subgraph operators`);
`picture`: the readable drawing (boxes of ops by device, host ops with their reason, a legend).
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
from partition.dump import (  # noqa: F401
    SUBGRAPH_COLORS,
    GraphvizNotFoundError,
    dot_text,
    dump_text,
    print_dump_if_verbose,
    render,
    write_dot,
)
from partition.picture import (  # noqa: F401
    MAX_PIXELS,
    Picture,
    PictureSizeWarning,
    Placement,
    build_picture,
    render_picture,
)
