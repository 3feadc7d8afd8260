"""Dev-time generator of ``paddle_attr_types.json``: the AttrType Paddle declares for every attribute of every
legacy op (``core.get_all_op_protos()``, grad ops and ``c_*`` collectives left out, ``extra`` attributes such as
``op_role`` / ``op_callstack`` left out: Paddle reads no semantics from them).

Paddle's attribute checker refuses an OpDesc whose attribute has another type than the proto declares
(``Cannot get attribute (axis) by type int, its type is float``); `loader.validate` reads this table to refuse
the same programs at load time, so an op never reaches a converter or a host kernel with, say, a float where
an int is expected. Requires paddlepaddle 3.3.1 (the version the loader targets). Run from the repository root::

    python -m devtools.regenerate_attr_types [--out PATH]
"""
from __future__ import annotations

import argparse
import json
import os

# The table is package data of the loader, one folder over from this (development-only) script.
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "nnadapter_bridge", "loader",
                   "paddle_attr_types.json")


def collect() -> dict:
    os.environ["FLAGS_enable_pir_api"] = "0"
    from paddle.base import core, framework  # importing paddle registers the protos

    table = {}
    for raw in core.get_all_op_protos():
        proto = framework.framework_pb2.OpProto.FromString(raw) if isinstance(raw, bytes) else raw
        if "grad" in proto.type or proto.type.startswith("c_"):
            continue
        attrs = {a.name: int(a.type) for a in proto.attrs if not a.extra}
        if attrs:
            table[proto.type] = dict(sorted(attrs.items()))
    return dict(sorted(table.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT)
    args = parser.parse_args()
    import paddle

    table = collect()
    lines = [f'  "_generated_by": {json.dumps(f"{__name__} with paddlepaddle {paddle.__version__}")}']
    lines += [f"  {json.dumps(op)}: {json.dumps(attrs, separators=(',', ':'))}" for op, attrs in table.items()]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("{\n" + ",\n".join(lines) + "\n}\n")
    print(f"{args.out}: {len(table)} op types")


if __name__ == "__main__":
    main()
