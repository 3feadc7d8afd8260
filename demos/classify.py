"""Image classification with a random-weight MobileNetV1 from the model zoo, through NNAdapter with a model cache.

Builds the model once (paddlepaddle needed for that) in the format Paddle 3 users have: a PIR program,
`mobilenet_v1.json` + `mobilenet_v1.pdiparams`, as `paddle.jit.save` writes it (`--format legacy` uses the
legacy `.pdmodel` export of the same weights instead). Then it runs two predictors on one cache dir: the first
converts and compiles the subgraph and writes `<cache dir>/<token>.nnc`; the second, created afterwards,
restores the program from that file. Prints the top-5 classes, whether each predictor compiled or restored
its program, and the match with Paddle Inference (exit status 1 when it does not match).

    python demos/classify.py [--device builtin_device] [--format pir|legacy] [--cache-dir DIR] [--image x.npy]

The weights are random, so the classes mean nothing; the numbers are what must agree with Paddle.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

# The demo's model is built by the repository's development zoo (devtools/, not part of the installed package).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from devtools import zoo  # noqa: E402

MODEL = "mobilenet_v1"
IMAGE_SIZE = 224
IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1)




def synthetic_image() -> np.ndarray:
    """A 224x224 RGB picture (colour gradients and a bright disc), normalized as ImageNet models expect."""
    y, x = np.mgrid[0:IMAGE_SIZE, 0:IMAGE_SIZE].astype(np.float32) / (IMAGE_SIZE - 1)
    disc = ((x - 0.6) ** 2 + (y - 0.4) ** 2 < 0.05).astype(np.float32)
    rgb = np.stack([0.2 + 0.6 * x, 0.3 + 0.5 * y, 0.8 - 0.5 * x * y])
    rgb = np.clip(rgb + 0.5 * disc, 0.0, 1.0)
    return ((rgb - IMAGENET_MEAN) / IMAGENET_STD)[None].astype(np.float32)


def load_image(path: str) -> np.ndarray:
    image = np.load(path, allow_pickle=False).astype(np.float32)
    if image.shape == (3, IMAGE_SIZE, IMAGE_SIZE):
        image = image[None]
    if image.shape != (1, 3, IMAGE_SIZE, IMAGE_SIZE):
        raise SystemExit(f"--image {path}: expected a normalized float array of shape [1,]3,224,224; "
                         f"got {list(image.shape)}")
    return image


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max())
    return shifted / shifted.sum()


def run_predictor(model_path: str, device: str, cache_dir: str, image: np.ndarray):
    """One predictor: create, run once, and describe how its programs were obtained."""
    import nnadapter_bridge as nb
    from nnadapter_bridge.commands.output import program_report

    config = nb.Config()
    config.set_model_file(model_path)  # its .pdiparams beside it is found by name
    config.set_nnadapter_device_names([device])
    config.set_nnadapter_model_cache_dir(cache_dir)
    predictor = nb.create_predictor(config)
    predictor.get_input(0).from_numpy(image)
    predictor.run()
    logits = predictor.get_output(0).numpy()
    programs = program_report(predictor)
    stats = predictor.stats
    predictor.close()
    return logits, programs, stats


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Classify an image with MobileNetV1 through nnadapter-bridge, "
                                                 "compiling once and restoring from the model cache.")
    parser.add_argument("--device", default="builtin_device",
                        help="NNAdapter device (default: builtin_device; `nnadapter-bridge devices` lists them)")
    parser.add_argument("--format", choices=("pir", "legacy"), default="pir",
                        help="pir: the .json Paddle 3 writes by default (default); legacy: the .pdmodel export")
    parser.add_argument("--model-dir", default=None,
                        help=f"where the zoo model is built and kept (default: $NNADAPTER_BRIDGE_DEMO_DIR/{MODEL} "
                             f"or $TMPDIR/nnadapter-bridge-demo/{MODEL})")
    parser.add_argument("--cache-dir", default=None,
                        help="model cache dir; default: a new temporary dir (removed at the end), so the first "
                             "predictor always compiles. With a kept dir a later demo run restores both.")
    parser.add_argument("--image", metavar="FILE.npy",
                        help="a normalized float32 image [1,]3,224,224 (default: a generated picture)")
    parser.add_argument("--no-paddle", action="store_true", help="skip the comparison with Paddle Inference")
    args = parser.parse_args(argv)

    from nnadapter_bridge.commands import output
    from nnadapter_bridge.errors import BridgeError
    from nnadapter_bridge.validation import paddle_reference

    model_dir = args.model_dir or os.path.join(zoo.demo_models_dir(), MODEL)
    image = load_image(args.image) if args.image else synthetic_image()
    cache_dir = args.cache_dir or tempfile.mkdtemp(prefix="nnadapter-bridge-classify-")
    try:
        model_path = zoo.ensure_model(MODEL, model_dir, layout=zoo.PIR_LAYOUT if args.format == "pir" else "pdmodel")
        print(f"model      {model_path}")
        print(f"device     {args.device}")
        print(f"cache dir  {cache_dir}")
        results = []
        for number in (1, 2):
            logits, programs, stats = run_predictor(model_path, args.device, cache_dir, image)
            results.append(logits)
            print(f"\npredictor {number}: {stats.subgraphs} subgraph(s), {stats.host_ops} host op(s)")
            for p in programs:
                where = f"{p['file']} ({output.human_bytes(p['bytes'])})" if p["file"] else "no .nnc file"
                print(f"  subgraph {p['subgraph']} ({p['ops']} ops): {p['source']}  token {p['token']}  {where}")
        probabilities = softmax(results[1][0].astype(np.float64))
        print("\ntop-5 classes (class id, probability):")
        for rank, cls in enumerate(np.argsort(-probabilities)[:5], start=1):
            print(f"  {rank}. class {int(cls):4d}  {probabilities[cls]:.4f}")
        same = np.array_equal(results[0], results[1])
        print(f"\ncompiled and cache-restored programs give {'identical' if same else 'DIFFERENT'} logits")
        passed = same
        if args.no_paddle:
            print("Paddle Inference: skipped (--no-paddle)")
        elif not paddle_reference.paddle_available():
            print("Paddle Inference: skipped (paddlepaddle is not installed)")
        else:
            want = paddle_reference.paddle_outputs(model_path, None, {"x": image})
            result = paddle_reference.compare(results[1], next(iter(want.values())))
            verdict = "PASS" if result["passed"] else "FAIL"
            print(f"Paddle Inference: max abs error {result['max_abs_error']:.3g}, max error relative to "
                  f"max|want| {result['max_rel_error']:.3g}: {verdict} "
                  "(|got-want| <= 1e-4*|want| + 1e-5*max|want|)")
            passed = passed and result["passed"]
    except BridgeError as exc:
        print(f"classify: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if not args.cache_dir:
            shutil.rmtree(cache_dir, ignore_errors=True)
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
