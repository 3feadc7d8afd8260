"""Loader speed: median time to load resnet50 (__model__ + combined __params__, ~100 MB) against the time
to read the same two files into memory, in one run.

    python benchmarks/bench_loader.py [--model-dir DIR] [--repeat N] [--touch]

Without --model-dir the zoo builds resnet50 once into the fixture cache (paddlepaddle needed). The loader
maps the params file and hands out views, so by default it does not touch the tensor bytes; --touch also
sums every parameter once, which makes the loader read every page as the raw read does.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from nnadapter_bridge.loader import load_model  # noqa: E402


def _default_model_dir() -> str:
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from model_zoo_fixtures import zoo_model_path

    return zoo_model_path("resnet50", "combined")


def _median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", help="a __model__ + __params__ directory (default: zoo resnet50)")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--touch", action="store_true", help="also read every parameter byte after loading")
    args = parser.parse_args(argv)
    model_dir = args.model_dir or _default_model_dir()
    files = [os.path.join(model_dir, "__model__"), os.path.join(model_dir, "__params__")]
    total = sum(os.path.getsize(f) for f in files)

    def raw_read():
        for path in files:
            with open(path, "rb") as f:
                f.read()

    def load():
        graph = load_model(model_dir)
        if args.touch:
            for array in graph.params.values():
                np.add.reduce(array, axis=None)

    raw_read(), load()  # warm the page cache and imports: both sides then read from memory
    raw = _median_seconds(raw_read, args.repeat)
    ours = _median_seconds(load, args.repeat)
    graph = load_model(model_dir)
    print(f"model: {model_dir} ({total / 2**20:.1f} MiB, {len(graph.params)} params, {graph.num_ops()} ops)")
    print(f"{'what':<28}{'median ms':>10}{'x raw':>8}")
    print(f"{'raw read (both files)':<28}{raw * 1000:>10.1f}{1.0:>8.2f}")
    label = "load_model + touch all" if args.touch else "load_model"
    print(f"{label:<28}{ours * 1000:>10.1f}{ours / raw:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
