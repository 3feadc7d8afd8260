"""Detection post-processing: multiclass_nms3 alone and a detector head ending in it, ours on each device
against Paddle Inference on the same CPU.

    python benchmarks/bench_nms.py [--cases nms_picodet,head_ppyoloe,...] [--runs 15] [--threads 1]
                                   [--runners ...] [--json out.json] [--model DIR ...]

`--model DIR` adds a case for an exported model (the real-architecture zoo's form: DIR/<name>.json,
DIR/<name>.pdiparams and DIR/feeds.json listing each input's name, dtype, shape and [low, high) range; inputs
drawn uniformly, seed 7), e.g. the zoo's PicoDet and PP-YOLOE+ exports.

Cases (batch 1, 80 classes; the attributes are PicoDet's and PP-YOLOE+'s post-processing configs):

  nms_picodet     multiclass_nms3 alone on 3549 boxes (PicoDet-S 416: strides 8/16/32), score_threshold 0.025,
                  nms_top_k 1000, keep_top_k 100, nms_threshold 0.6
  nms_ppyoloe     multiclass_nms3 alone on 8400 boxes (PP-YOLOE+ 640: strides 8/16/32), score_threshold 0.01,
                  nms_top_k 1000, keep_top_k 300, nms_threshold 0.7
  head_picodet    a PicoDet-like model: a small conv stack to strides 8/16/32 on a 416 image, per level a class
                  conv (sigmoid) and a distance conv (exp, times the stride) decoded around the cell centres,
                  concatenated and fed to the multiclass_nms3 of nms_picodet
  head_ppyoloe    the same at 640 with the multiclass_nms3 of nms_ppyoloe
  nms_picodet_sparse, nms_ppyoloe_sparse   the NMS-alone cases with scores as a real image gives them (about
                  0.1% of the class scores over the threshold)

The NMS-alone inputs are boxes decoded the same way from random distances, and scores spread the way
random weights spread them (about a third of the class scores above the threshold: every class reaches
nms_top_k candidates, the hard case; a real image has far fewer). The head models have random weights with
the class bias set so that their scores spread the same way.

Runners, each timed `--runs` times after 3 warm-up runs, interleaved (one run of each runner per round):

  paddle_inference     paddle.inference, enable_mkldnn(), IR optimization on, set_cpu_math_library_num_threads
                       (oneDNN off where it cannot run the program: "paddle (oneDNN off)" in the NMS-on column)
  ours_builtin         our predictor on builtin_device (numpy reference: the host path's speed)
  ours_openvino        our predictor on intel_openvino (NMS as MulticlassNms)
  ours_onnxruntime     our predictor on microsoft_onnxruntime (NMS composed around NonMaxSuppression)

Reported per case and runner: median and p90 latency (ms), the ratio Paddle Inference / ours (above 1 we
are faster), where multiclass_nms3 ran, and whether the outputs equal Paddle Inference's (Index and the
per-image counts exactly, the rows within 1e-5 relative).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CLASSES = 80
STRIDES = (8, 16, 32)
NMS_ATTRS = {
    "picodet": dict(image=416, score_threshold=0.025, nms_top_k=1000, keep_top_k=100, nms_threshold=0.6),
    "ppyoloe": dict(image=640, score_threshold=0.01, nms_top_k=1000, keep_top_k=300, nms_threshold=0.7),
}
CASES = ("nms_picodet", "nms_ppyoloe", "head_picodet", "head_ppyoloe", "nms_picodet_sparse", "nms_ppyoloe_sparse")
RUNNERS = ("paddle_inference", "ours_builtin", "ours_openvino", "ours_onnxruntime")
DEVICE_OF = {"ours_builtin": "builtin_device", "ours_openvino": "intel_openvino",
             "ours_onnxruntime": "microsoft_onnxruntime"}
# Class-score logits ~ N(SCORE_BIAS, 1.5): sigmoid puts about a third of them above 0.025 (and 0.01).
SCORE_BIAS = -3.6
# The "_sparse" cases: logits ~ N(-9, 1.5), about 0.1% of the class scores above 0.01 (a real image's few
# hundred candidates over all classes).
SPARSE_SCORE_BIAS = -9.0


def _cell_centres(image: int) -> np.ndarray:
    """[M, 2] (x, y) centres of every cell of every stride level, level by level, row-major."""
    centres = []
    for stride in STRIDES:
        side = image // stride
        ys, xs = np.meshgrid(np.arange(side), np.arange(side), indexing="ij")
        centres.append(np.stack([xs.reshape(-1), ys.reshape(-1)], -1) * stride + stride / 2)
    return np.concatenate(centres).astype(np.float32)


def _strides(image: int) -> np.ndarray:
    return np.concatenate([np.full((image // s) ** 2, s, np.float32) for s in STRIDES])


def nms_inputs(image: int, seed: int = 0, score_bias: float = SCORE_BIAS):
    rng = np.random.default_rng(seed)
    centres, strides = _cell_centres(image), _strides(image)
    distances = np.exp(rng.normal(0.5, 0.6, (centres.shape[0], 4))) * strides[:, None]
    boxes = np.concatenate([centres - distances[:, :2], centres + distances[:, 2:]], -1)[None].astype(np.float32)
    logits = rng.normal(score_bias, 1.5, (1, CLASSES, centres.shape[0]))
    scores = (1 / (1 + np.exp(-logits))).astype(np.float32)
    return {"boxes": boxes, "scores": scores}


def _nms(paddle, boxes, scores, attrs):
    out, index, rois_num = paddle._C_ops.multiclass_nms3(boxes, scores, None, attrs["score_threshold"],
                                                         attrs["nms_top_k"], attrs["keep_top_k"],
                                                         attrs["nms_threshold"], True, 1.0, -1)
    return out, index, rois_num


def build_nms_model(out_dir: str, attrs: dict, feeds: dict) -> str:
    import paddle

    paddle.enable_static()
    with paddle.pir_utils.IrGuard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            boxes = paddle.static.data("boxes", list(feeds["boxes"].shape), "float32")
            scores = paddle.static.data("scores", list(feeds["scores"].shape), "float32")
            outs = _nms(paddle, boxes, scores, attrs)
        exe = paddle.static.Executor(paddle.CPUPlace())
        prefix = os.path.join(out_dir, "model")
        paddle.static.save_inference_model(prefix, [boxes, scores], list(outs), exe, program=main)
    return prefix + ".json"


def build_head_model(out_dir: str, attrs: dict, seed: int = 0) -> str:
    """The PicoDet-like head (module docstring), exported the Paddle 3 way (PIR .json)."""
    import paddle

    paddle.disable_static()
    paddle.seed(seed)
    nn = paddle.nn
    image = attrs["image"]

    class Head(nn.Layer):
        def __init__(self):
            super().__init__()
            self.register_buffer("centres", paddle.to_tensor(_cell_centres(image)), persistable=True)
            self.register_buffer("strides", paddle.to_tensor(_strides(image)[:, None]), persistable=True)
            self.stem = nn.Sequential(nn.Conv2D(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2D(16, 24, 3, 2, 1), nn.ReLU(),
                                      nn.Conv2D(24, 32, 3, 2, 1), nn.ReLU())
            self.down = nn.LayerList([nn.Conv2D(32, 32, 3, 2, 1), nn.Conv2D(32, 32, 3, 2, 1)])
            self.cls = nn.LayerList([nn.Conv2D(32, CLASSES, 1) for _ in STRIDES])
            self.reg = nn.LayerList([nn.Conv2D(32, 4, 1) for _ in STRIDES])
            for conv in self.cls:  # scores spread as random weights spread them (module docstring)
                conv.bias.set_value(np.full([CLASSES], SCORE_BIAS, np.float32))
                conv.weight.set_value((np.random.default_rng(seed).normal(0, 0.25, conv.weight.shape))
                                      .astype(np.float32))

        def forward(self, x):
            levels = [self.stem(x)]
            for down in self.down:
                levels.append(nn.functional.relu(down(levels[-1])))
            scores = paddle.concat([nn.functional.sigmoid(cls(f)).flatten(2) for cls, f in zip(self.cls, levels)], 2)
            distances = paddle.concat([paddle.exp(reg(f)).flatten(2) for reg, f in zip(self.reg, levels)], 2)
            distances = distances.transpose([0, 2, 1]) * self.strides
            boxes = paddle.concat([self.centres - distances[:, :, :2], self.centres + distances[:, :, 2:]], -1)
            return _nms(paddle, boxes, scores, attrs)

    net = Head()
    net.eval()
    prefix = os.path.join(out_dir, "model")
    spec = [paddle.static.InputSpec([1, 3, image, image], "float32", "image")]
    paddle.jit.save(paddle.jit.to_static(net, input_spec=spec, full_graph=True), prefix)
    return prefix + ".json"


def head_inputs(image: int, seed: int = 1) -> dict:
    return {"image": np.random.default_rng(seed).normal(0, 1, (1, 3, image, image)).astype(np.float32)}


# -- runners --------------------------------------------------------------------------------------------------

def _paddle_inference(model: str, threads: int, onednn: bool = True):
    import paddle.inference as paddle_infer

    params = model[: -len(".json")] + ".pdiparams"
    config = paddle_infer.Config(model, params if os.path.exists(params) else "")
    config.disable_glog_info()
    if onednn:
        config.enable_mkldnn()
    else:
        config.disable_mkldnn()
    config.set_cpu_math_library_num_threads(threads)
    predictor = paddle_infer.create_predictor(config)
    names = predictor.get_input_names()

    def run(feeds):
        for name in names:
            handle = predictor.get_input_handle(name)
            handle.reshape(list(feeds[name].shape))
            handle.copy_from_cpu(feeds[name])
        predictor.run()
        return [predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()]

    return run, "paddle" if onednn else "paddle (oneDNN off)"


def _ours(model: str, device: str, threads: int):
    import nnadapter_bridge as nb

    config = nb.Config()
    config.set_model_file(model)
    params = model[: -len(".json")] + ".pdiparams"
    if os.path.exists(params):
        config.set_param_file(params)
    config.set_nnadapter_device_names([device])
    config.set_nnadapter_context_properties({"intel_openvino": f"INTEL_OPENVINO_INFERENCE_NUM_THREADS={threads}",
                                             "microsoft_onnxruntime": f"MICROSOFT_ONNXRUNTIME_NUM_THREADS={threads}",
                                             "builtin_device": f"BUILTIN_DEVICE_NUM_THREADS={threads}"}[device])
    predictor = nb.create_predictor(config)
    where = "host" if any(op.type == "multiclass_nms3" for op in predictor.host_ops) else device

    def run(feeds):
        for name in predictor.get_input_names():
            predictor.get_input_by_name(name).from_numpy(feeds[name])
        predictor.run()
        return [predictor.get_output(k).numpy() for k in range(len(predictor.get_output_names()))]

    return run, where


def make_runner(name: str, model: str, threads: int):
    if name == "paddle_inference":
        return _paddle_inference(model, threads)
    if name in DEVICE_OF:
        return _ours(model, DEVICE_OF[name], threads)
    raise SystemExit(f"unknown runner {name}; choose from {', '.join(RUNNERS)}")


def same_detections(got, want) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        if g.size != w.size:
            return False
        g = g.reshape(w.shape)
        if np.issubdtype(w.dtype, np.integer):
            if not np.array_equal(g, w):
                return False
        elif not np.allclose(g, w, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(w).max(initial=0)))):
            return False
    return True


def exported_model(directory: str):
    """(model path, feeds) of an exported model directory (see `--model`)."""
    with open(os.path.join(directory, "feeds.json")) as f:
        spec = json.load(f)
    rng = np.random.default_rng(7)
    feeds = {}
    for item in spec["inputs"]:
        if item["dtype"].startswith("int"):
            feeds[item["name"]] = rng.integers(int(item["low"]), int(item["high"]), item["shape"]).astype(item["dtype"])
        else:
            feeds[item["name"]] = rng.uniform(item["low"], item["high"], item["shape"]).astype(item["dtype"])
    return os.path.join(directory, spec["model"] + ".json"), feeds


def measure(case: str, runners, runs: int, threads: int, work: str) -> list:
    if os.path.isdir(case):
        model, feeds = exported_model(case)
        case = os.path.basename(os.path.normpath(case))
        return _measure(case, model, feeds, runners, runs, threads)
    kind, family = case.split("_")[:2]
    attrs = NMS_ATTRS[family]
    if kind == "nms":
        feeds = nms_inputs(attrs["image"], score_bias=SPARSE_SCORE_BIAS if case.endswith("_sparse") else SCORE_BIAS)
        model = build_nms_model(work, attrs, feeds)
    else:
        feeds = head_inputs(attrs["image"])
        model = build_head_model(work, attrs)
    return _measure(case, model, feeds, runners, runs, threads)


def _measure(case: str, model: str, feeds: dict, runners, runs: int, threads: int) -> list:
    made = {}
    for name in runners:
        try:
            made[name] = make_runner(name, model, threads)
        except Exception as exc:  # a runner that cannot start is reported, not fatal
            print(f"  {case} {name}: cannot start: {exc}", file=sys.stderr)
    reference = None
    if "paddle_inference" in made:
        try:
            reference = made["paddle_inference"][0](feeds)
        except Exception as exc:  # oneDNN fails on some PIR programs (a float64 array attribute): without it
            print(f"  {case} paddle_inference with oneDNN fails ({str(exc).splitlines()[0][:120]}); oneDNN off",
                  file=sys.stderr)
            made["paddle_inference"] = _paddle_inference(model, threads, onednn=False)
            reference = made["paddle_inference"][0](feeds)
    correct = {name: (reference is None or same_detections(run(feeds), reference)) for name, (run, _) in made.items()}
    for _ in range(2):
        for run, _ in made.values():
            run(feeds)
    times = {name: [] for name in made}
    for _ in range(runs):
        for name, (run, _) in made.items():
            start = time.perf_counter()
            run(feeds)
            times[name].append((time.perf_counter() - start) * 1e3)
    rows = []
    paddle_median = statistics.median(times["paddle_inference"]) if "paddle_inference" in times else None
    for name, samples in times.items():
        median = statistics.median(samples)
        rows.append({"case": case, "runner": name, "nms_on": made[name][1], "median_ms": round(median, 2),
                     "p90_ms": round(float(np.percentile(samples, 90)), 2),
                     "paddle_over_ours": None if paddle_median is None or name == "paddle_inference"
                     else round(paddle_median / median, 2),
                     "kept": int(reference[0].shape[0]) if reference is not None else None,
                     "correct": correct[name]})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--runners", default=",".join(RUNNERS))
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--model", action="append", default=[], metavar="DIR",
                        help="an exported model directory to measure as one more case (module docstring)")
    args = parser.parse_args(argv)
    runners = [r for r in args.runners.split(",") if r]
    rows = []
    print("| case | runner | NMS on | median ms | p90 ms | Paddle / ours | kept | equal to Paddle |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for case in [c for c in args.cases.split(",") if c] + args.model:
        if case not in CASES and case not in args.model:
            raise SystemExit(f"unknown case {case}; choose from {', '.join(CASES)}")
        with tempfile.TemporaryDirectory() as work:
            for row in measure(case, runners, args.runs, args.threads, work):
                rows.append(row)
                ratio = "" if row["paddle_over_ours"] is None else f"{row['paddle_over_ours']:.2f}x"
                print(f"| {row['case']} | {row['runner']} | {row['nms_on']} | {row['median_ms']:.1f} | "
                      f"{row['p90_ms']:.1f} | {ratio} | {row['kept']} | {'yes' if row['correct'] else 'NO'} |",
                      flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
