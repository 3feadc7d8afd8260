"""Object detection with the zoo's `yolo_detector` (conv backbone + yolo_box + multiclass_nms3), with the
detection post-processing kept on the host by a partition config.

Builds the model once (paddlepaddle needed for that), prints the partition (device subgraphs, and host ops
with the reason each one is on the host), runs it on a generated picture, prints the detections, and
compares them with Paddle Inference (exit status 1 when they differ).

    python demos/detect.py [--device builtin_device] [--partition-config configs/partition_yolo_detector.txt]

The weights are random, so the boxes mean nothing; what matters is that they agree with Paddle.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

# The demo's model is built by the repository's development zoo (devtools/, not part of the installed package).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from devtools import zoo  # noqa: E402

MODEL = "yolo_detector"
SIZE = zoo.DETECTOR_SIZE
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join(HERE, os.pardir, "configs", "partition_yolo_detector.txt")


def synthetic_image(seed: int) -> np.ndarray:
    """A 64x64 picture: dim noise with three bright rectangles."""
    rng = np.random.default_rng(seed)
    image = 0.1 * rng.standard_normal((1, 3, SIZE, SIZE)).astype(np.float32)
    for top, left, h, w in ((6, 8, 20, 14), (30, 36, 16, 22), (44, 4, 12, 12)):
        image[0, :, top:top + h, left:left + w] += rng.uniform(0.5, 1.5, size=(3, 1, 1)).astype(np.float32)
    return image


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Detect objects with yolo_detector through nnadapter-bridge, "
                                                 "with yolo_box and multiclass_nms3 on the host.")
    parser.add_argument("--device", default="builtin_device",
                        help="NNAdapter device (default: builtin_device; `nnadapter-bridge devices` lists them)")
    parser.add_argument("--model-dir", default=None,
                        help=f"where the zoo model is built and kept (default: $NNADAPTER_BRIDGE_DEMO_DIR/{MODEL} "
                             f"or $TMPDIR/nnadapter-bridge-demo/{MODEL})")
    parser.add_argument("--partition-config", default=os.path.normpath(DEFAULT_CONFIG),
                        help="ops to keep on the host (default: configs/partition_yolo_detector.txt)")
    parser.add_argument("--cache-dir", default=None, help="model cache dir (default: none)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated picture (default: 0)")
    parser.add_argument("--no-paddle", action="store_true", help="skip the comparison with Paddle Inference")
    args = parser.parse_args(argv)

    import nnadapter_bridge as nb
    from nnadapter_bridge.commands import options, output, partition_report
    from nnadapter_bridge.errors import BridgeError
    from nnadapter_bridge.validation import inputs, paddle_reference

    model_dir = args.model_dir or os.path.join(zoo.demo_models_dir(), MODEL)
    try:
        zoo.ensure_model(MODEL, model_dir)
        if not os.path.isfile(args.partition_config):
            raise options.CliError(f"--partition-config {args.partition_config}: no such file")
        config = nb.Config()
        config.set_model_dir(model_dir)
        config.set_nnadapter_device_names([args.device])
        config.set_nnadapter_subgraph_partition_config_path(args.partition_config)
        if args.cache_dir:
            config.set_nnadapter_model_cache_dir(args.cache_dir)

        print(partition_report.render_summary(partition_report.report(partition_report.analyze(config))))

        predictor = nb.create_predictor(config)
        feeds = {"image": synthetic_image(args.seed), "im_shape": np.array([[SIZE, SIZE]], dtype=np.int32)}
        inputs.feed(predictor, feeds)
        predictor.run()
        outputs = inputs.outputs_of(predictor)
        programs = output.program_report(predictor)
        predictor.close()
    except BridgeError as exc:
        print(f"detect: error: {exc}", file=sys.stderr)
        return 2

    print()
    for p in programs:
        print(f"subgraph {p['subgraph']} ({p['ops']} ops): {p['source']}  token {p['token']}")
    rows_name, count_name = predictor.get_output_names()
    rows, count = outputs[rows_name], outputs[count_name]
    print(f"\n{int(count.sum())} detection(s) (class, score, box x1 y1 x2 y2), best first:")
    table = [[int(r[0]), f"{r[1]:.4f}"] + [f"{v:.1f}" for v in r[2:]] for r in rows[np.argsort(-rows[:, 1])][:10]]
    if table:
        print(output.format_table(["class", "score", "x1", "y1", "x2", "y2"], table, right_align={0, 1, 2, 3, 4, 5}))
    if len(rows) > 10:
        print(f"... and {len(rows) - 10} more")

    if args.no_paddle:
        print("\nPaddle Inference: skipped (--no-paddle)")
        return 0
    if not paddle_reference.paddle_available():
        print("\nPaddle Inference: skipped (paddlepaddle is not installed)")
        return 0
    want = paddle_reference.paddle_outputs(model_dir, None, feeds)
    passed = True
    print()
    for name, got in outputs.items():
        result = paddle_reference.compare(got, want[name])
        passed = passed and result["passed"]
        detail = result.get("note") or (f"max abs error {result['max_abs_error']:.3g}, max error relative to "
                                        f"max|want| {result['max_rel_error']:.3g}")
        print(f"Paddle Inference, {name}: {detail}: {'PASS' if result['passed'] else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
