"""PIR load speed: JSON parsers compared, and `load_model` on a PIR program against the floor.

The floor is what any reader must do: read the `.json` and the `.pdiparams` from disk and parse the JSON
once. The issue's target is `load_model` within 1.5x of that floor (with the fastest parser that fits).

    python benchmarks/bench_pir_load.py MODEL.json [--rounds 15]

Prints the median of each step (files in the page cache: every step is timed after a warm-up read), and
the ratio load_model / floor. `msgspec` is measured only when installed.
"""
from __future__ import annotations

import argparse
import json
import sys

from bench_loader import _median_seconds  # this directory is on sys.path when run as a script


def _median(fn, rounds: int) -> float:
    fn()  # warm-up: page cache, imports
    return _median_seconds(fn, rounds)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a PIR <name>.json with its <name>.pdiparams beside it")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    params = args.model[: -len(".json")] + ".pdiparams"

    def read(path):
        with open(path, "rb") as f:
            return f.read()

    data = read(args.model)
    parsers = {"json (stdlib)": lambda: json.loads(data)}
    try:
        import orjson

        parsers["orjson"] = lambda: orjson.loads(data)
    except ImportError:
        pass
    try:
        import msgspec

        decoder = msgspec.json.Decoder()
        parsers["msgspec"] = lambda: decoder.decode(data)
    except ImportError:
        pass
    print(f"model: {args.model} ({len(data) / 1024:.0f} KiB json, {len(read(params)) / 2**20:.1f} MiB params)")
    parse_times = {}
    for name, fn in parsers.items():
        parse_times[name] = _median(fn, args.rounds)
        print(f"  parse {name:<14} {parse_times[name] * 1000:8.2f} ms")
    fastest = min(parse_times, key=parse_times.get)

    from nnadapter_bridge.loader import load_model

    read_time = _median(lambda: (read(args.model), read(params)), args.rounds)
    floor = read_time + parse_times[fastest]
    load_time = _median(lambda: load_model(args.model), args.rounds)
    print(f"  read both files        {read_time * 1000:8.2f} ms")
    print(f"  floor (read + {fastest}) {floor * 1000:8.2f} ms")
    print(f"  load_model             {load_time * 1000:8.2f} ms  (parser in use: orjson; params memory-mapped)")
    print(f"  ratio load_model / floor: {load_time / floor:.2f}x (target <= 1.5x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
