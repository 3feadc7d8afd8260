"""Build one real-architecture zoo model with its package's own code and export it the Paddle 3 way.

Usage (in the side venv of tests/support/real_zoo/env.py, never in the project's venv):
    python build_model.py NAME OUT_DIR

Writes OUT_DIR/NAME.json + NAME.pdiparams (`paddle.jit.save`, a PIR program) and OUT_DIR/feeds.json:
{"inputs": [{"name", "declared" (the InputSpec shape), "shape" (what the tests feed), "dtype", "low", "high"}]}.

Every model is the official architecture class (paddleclas, paddleseg, paddledet `ppdet`, paddlex, paddlenlp) with
pretrained=False, weights drawn from a fixed seed by the package's own initialisers; then the tensors those
initialisers leave constant (norm scales and shifts, biases, class tokens) are drawn at random too, and every batch
norm is calibrated by a few train-mode forwards on random inputs (momentum 0.5), so activations keep a realistic
scale instead of vanishing or exploding through a deep random network. NMS detectors get their classification
logits spread (scale and shift of the last classification layer) so that many candidates pass the score threshold
and the post-processing does real work. Inputs are declared the way each zoo exports them.

The architecture modules are imported directly (`ppcls.arch.backbone.legendary_models.pp_lcnet`, ...) with their
parent packages registered as empty shells: the packages' __init__ files import training, data and download code
(and their dependencies) that an exported model never needs. Nothing is downloaded.

Imports only the standard library, numpy and paddle at module level; must not import the project (nnadapter_bridge
is not installed in the side venv).
"""
from __future__ import annotations

import collections
import importlib
import importlib.metadata
import json
import linecache
import os
import site
import sys
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from catalog import MODELS  # noqa: E402  (the side venv has no project on its path)

SEED = 2024
CALIBRATION_STEPS = 3
BN_MOMENTUM = 0.5


def _site_dir() -> str:
    for directory in site.getsitepackages():
        if os.path.isdir(os.path.join(directory, "paddle")):
            return directory
    raise SystemExit("paddle is not installed in this interpreter: run build_model.py in the real-zoo side venv")


def import_architecture(root: str, dotted: str, shells: tuple[str, ...]):
    """Import `dotted` from the source tree at `root` (put on sys.path) with the packages in `shells`
    registered as empty modules, so their __init__ (training and download code) never runs."""
    if root not in sys.path:
        sys.path.insert(0, root)
    for package in shells:
        if package not in sys.modules:
            module = types.ModuleType(package)
            module.__path__ = [os.path.join(root, *package.split("."))]
            if "." not in package:  # some submodules read their package's version
                try:
                    module.__version__ = importlib.metadata.version(package)
                except importlib.metadata.PackageNotFoundError:
                    pass
            sys.modules[package] = module
    return importlib.import_module(dotted)


# ------------------------------------------------------------------------------------------------------------
# Weights: random but not degenerate.

def _is_batch_norm(layer) -> bool:
    import paddle

    return isinstance(layer, (paddle.nn.layer.norm._BatchNormBase, paddle.nn.BatchNorm))


def randomise_trivial_tensors(model, rng: np.random.Generator) -> None:
    """Draw the float parameters an initialiser left constant (all elements equal: norm scales 1, shifts and
    biases 0, class tokens, and one-element parameters: PP-HGNetV2's and PP-LCNetV3's learnable affine blocks
    start at scale 1 and bias 0, which every runtime would drop as a multiply by one and an add of zero): a
    scale around its value, a shift small and centred on it. Batch-norm running statistics are calibrated
    afterwards (calibrate_batch_norms)."""
    import paddle

    for name, param in model.named_parameters():
        value = param.numpy()
        if value.dtype.kind != "f" or value.size < 1 or not np.all(value == value.flat[0]):
            continue
        base = float(value.flat[0])
        if base != 0.0:
            drawn = base * rng.uniform(0.75, 1.25, value.shape)
        else:
            drawn = rng.normal(0.0, 0.05, value.shape)
        param.set_value(paddle.to_tensor(drawn.astype(value.dtype)))


def calibrate_batch_norms(model, make_batch, forward) -> None:
    """Train-mode forwards on random batches with momentum BN_MOMENTUM: each batch norm's running mean and
    variance move to the statistics of the activations it really sees. Only the batch norms are put in train
    mode (dropout and drop-path stay off, so the calibration batches see the eval network)."""
    import paddle

    norms = [layer for layer in model.sublayers() if _is_batch_norm(layer)]
    if not norms:
        return
    for layer in norms:
        layer._momentum = BN_MOMENTUM
        layer.train()
    with paddle.no_grad():
        for _ in range(CALIBRATION_STEPS):
            forward(make_batch())
    for layer in norms:
        layer.eval()


# ------------------------------------------------------------------------------------------------------------
# Export.

class Spec:
    """One model input: its name, the shape declared in the export, the shape the tests feed, dtype and range."""

    def __init__(self, name, declared, shape, dtype="float32", low=-1.0, high=1.0):
        self.name, self.declared, self.shape = name, list(declared), list(shape)
        self.dtype, self.low, self.high = dtype, low, high

    def sample(self, rng: np.random.Generator, batch: int | None = None) -> np.ndarray:
        shape = list(self.shape)
        if batch is not None:
            shape[0] = batch
        if self.dtype.startswith("int"):
            return rng.integers(int(self.low), int(self.high), shape).astype(self.dtype)
        return rng.uniform(self.low, self.high, shape).astype(self.dtype)

    def as_json(self) -> dict:
        return {"name": self.name, "declared": self.declared, "shape": self.shape, "dtype": self.dtype,
                "low": self.low, "high": self.high}


def export(model, specs: list[Spec], out_dir: str, name: str) -> None:
    import paddle
    from paddle.static import InputSpec

    model.eval()
    # ppdet's export (engine/trainer.py) re-parameterises RepVGG-style blocks first: one conv instead of two
    # branches mixed by a learned alpha (which to_static would otherwise turn into a cond on a parameter).
    for layer in model.sublayers():
        if hasattr(layer, "convert_to_deploy"):
            layer.convert_to_deploy()
    input_spec = [InputSpec(s.declared, s.dtype, s.name) for s in specs]
    static = paddle.jit.to_static(model, input_spec=input_spec, full_graph=True)
    paddle.jit.save(static, os.path.join(out_dir, name), input_spec=input_spec)
    if not os.path.isfile(os.path.join(out_dir, name + ".json")):
        raise SystemExit(f"{name}: paddle.jit.save wrote no PIR program (.json) in {out_dir}: "
                         f"{sorted(os.listdir(out_dir))}")
    with open(os.path.join(out_dir, "feeds.json"), "w") as f:
        json.dump({"model": name, "inputs": [s.as_json() for s in specs]}, f, indent=1)


# ------------------------------------------------------------------------------------------------------------
# The models.

def _image_batch(spec: Spec, rng):
    import paddle

    return lambda: paddle.to_tensor(spec.sample(rng, batch=2))


def _classifier(arch_name: str, module: str, size: int, **kwargs):
    root = os.path.join(_site_dir(), "paddleclas")
    family = module.split(".")[0]
    arch = import_architecture(root, f"ppcls.arch.backbone.{module}", (
        "ppcls", "ppcls.arch", "ppcls.arch.backbone", f"ppcls.arch.backbone.{family}", "ppcls.utils"))
    sys.modules["ppcls.utils.logger"].init_logger()  # ppcls's engine does this; its layers log through it
    factory = getattr(arch, arch_name)
    if isinstance(factory, type):  # a class with the factory's configuration spelled out (no pretrained flag)
        model = factory(class_num=100, **kwargs)
    else:
        model = factory(pretrained=False, class_num=100, **kwargs)
    # ppcls exports classifiers with a fixed image size and a free batch (tools/export_model.py).
    return model, [Spec("x", [-1, 3, size, size], [1, 3, size, size])]


def build_classifier(name: str):
    table = {
        "pp_lcnet": ("PPLCNet_x0_25", "legendary_models.pp_lcnet", 96, {}),
        "pp_hgnetv2": ("PPHGNetV2_B0", "legendary_models.pp_hgnet_v2", 96, {}),
        "mobilenet_v3": ("MobileNetV3_small_x0_35", "legendary_models.mobilenet_v3", 96, {}),
        "resnet50_vd": ("ResNet50_vd", "legendary_models.resnet", 64, {}),
        "deit": ("DeiT_tiny_distilled_patch16_224", "model_zoo.distilled_vision_transformer", 96,
                 {"img_size": 96}),
        # Swin-T's configuration (SwinTransformer_tiny_patch4_window7_224) with window 4 at 128 px: every
        # stage's resolution (32, 16, 8, 4) stays a multiple of the window.
        "swin": ("SwinTransformer", "legendary_models.swin_transformer", 128,
                 {"img_size": 128, "window_size": 4, "embed_dim": 96, "depths": [2, 2, 6, 2],
                  "num_heads": [3, 6, 12, 24]}),
        "ghostnet": ("GhostNet_x0_5", "model_zoo.ghostnet", 96, {}),
        "efficientnet": ("EfficientNetB0", "model_zoo.efficientnet", 96, {}),
        "convnext": ("ConvNeXt_tiny", "model_zoo.convnext", 64, {}),
        "repvgg": ("RepVGG_A0", "model_zoo.repvgg", 64, {}),  # export() re-parameterises it (convert_to_deploy)
        "dla": ("DLA34", "model_zoo.dla", 64, {}),
        "res2net": ("Res2Net50_26w_4s", "model_zoo.res2net", 64, {}),
        "densenet": ("DenseNet121", "model_zoo.densenet", 64, {}),
        "inception_v3": ("InceptionV3", "legendary_models.inception_v3", 96, {}),
        "shufflenet_v2": ("ShuffleNetV2_x0_25", "model_zoo.shufflenet_v2", 64, {}),
        "pvt_v2": ("PVT_V2_B0", "model_zoo.pvt_v2", 96, {"img_size": 96}),
        # LeViT's attention biases are laid out for its 224 px grid (14x14 tokens): no smaller size.
        "levit": ("LeViT_128S", "model_zoo.levit", 224, {}),
        "mobilevit": ("MobileViT_XXS", "model_zoo.mobilevit", 64, {}),
        "resnest": ("ResNeSt50_fast_1s1x64d", "model_zoo.resnest", 64, {}),
        "mixnet": ("MixNet_S", "model_zoo.mixnet", 224, {}),  # its head pools a fixed 7x7 window
        "pp_hgnet": ("PPHGNet_tiny", "legendary_models.pp_hgnet", 64, {}),
        "se_resnext": ("SE_ResNeXt50_32x4d", "model_zoo.se_resnext", 64, {}),
        "xception": ("Xception41", "model_zoo.xception", 96, {}),
        "dpn": ("DPN68", "model_zoo.dpn", 64, {}),
        "rexnet": ("ReXNet_1_0", "model_zoo.rexnet", 64, {}),
        "mobilenet_v2": ("MobileNetV2_x0_25", "model_zoo.mobilenet_v2", 64, {}),
        "regnet": ("RegNetX_200MF", "model_zoo.regnet", 64, {}),
        # Op patterns the zoo had not seen: cross-shaped windows, involution, partial convolution, universal
        # inverted bottlenecks, grouped and sub-sampled attention, convolutional token embeddings.
        # CSWin-T's widths, heads and splits with one or two blocks a stage (its 21-block third stage cut to 2);
        # the splits (7 at 14x14 and 7x7) fix the 224 px.
        "cswin": ("CSwinTransformer", "model_zoo.cswin_transformer", 224,
                  {"image_size": 224, "embed_dim": 64, "depths": [1, 2, 2, 1], "splits": [1, 2, 7, 7],
                   "num_heads": [2, 4, 8, 16]}),
        "rednet": ("RedNet26", "model_zoo.rednet", 64, {}),
        "fasternet": ("FasterNet_T0", "model_zoo.fasternet", 64, {}),
        "mobilenet_v4": ("MobileNetV4_conv_small", "legendary_models.mobilenet_v4", 64, {}),
        "twins": ("pcpvt_small", "model_zoo.twins", 96, {"img_size": 96}),
        "uniformer": ("UniFormer_small", "model_zoo.uniformer", 96, {"img_size": 96}),
        "cvt": ("CvT_13_224", "model_zoo.cvt", 96, {}),
        "nextvit": ("NextViT_small_224", "model_zoo.nextvit", 96, {}),
        "efficientnet_v2": ("EfficientNetV2_S", "model_zoo.efficientnet_v2", 96, {}),
    }
    arch_name, module, size, kwargs = table[name]
    return _classifier(arch_name, module, size, **kwargs)


def _paddleseg(module: str):
    root = _site_dir()
    return import_architecture(root, f"paddleseg.models.{module}", (
        "paddleseg", "paddleseg.models", "paddleseg.models.backbones", "paddleseg.models.losses"))


def segmentation_export(net):
    """paddleseg's SavedSegmentationNet without the output op: the architecture's eval output is [logits]."""
    import paddle

    class SegmentationExport(paddle.nn.Layer):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net(x)[0]  # the logits at the input's resolution (eval mode returns [logits])

    return SegmentationExport(net)


def _paddleseg_point_head_for_paddle3(point_head_class):
    """paddleseg 2.8's PointHead.get_points_test caps the point count with `paddle.concat([height * width,
    num_points])`: in Paddle 2.4 both were int32 [1] tensors (the shape's elements and a to_tensor scalar), in Paddle 3
    the shape's product is an int64 0-D tensor and the cap an int32 0-D one, which concat refuses. The same method
    with both taken as int32 [1] tensors, as Paddle 2 gave them; everything else is paddleseg's code unchanged."""
    import paddle

    class PointHead(point_head_class):
        def get_points_test(self, seg_logits, uncertainty_func):
            num_points = self.subdivision_num_points
            uncertainty_map = uncertainty_func(seg_logits)
            batch_size = paddle.shape(uncertainty_map)[0]
            height = paddle.shape(uncertainty_map)[2]
            width = paddle.shape(uncertainty_map)[3]
            h_step = 1.0 / height
            w_step = 1.0 / width

            uncertainty_map = uncertainty_map.reshape([batch_size, height * width])
            num_points = paddle.min(paddle.concat([(height * width).astype("int32").reshape([1]),
                                                   num_points.reshape([1])]))
            point_indices = paddle.topk(uncertainty_map, num_points, axis=1)[1]
            point_coords = paddle.zeros([batch_size, num_points, 2], dtype="float32")
            point_coords[:, :, 0] = w_step / 2.0 + (point_indices % width).astype("float32") * w_step
            point_coords[:, :, 1] = h_step / 2.0 + (point_indices // width).astype("float32") * h_step
            return point_indices, point_coords

    return PointHead


def build_segmenter(name: str):
    """paddleseg's export (tools/export.py) declares the image [-1, 3, -1, -1]; `--output_op none` keeps the
    logits (the default argmax would turn float ties into label differences)."""
    num_classes = 19  # Cityscapes, the classes of these models' reference configs
    if name == "pp_liteseg":  # pp_liteseg_stdc1_cityscapes_1024x512_scale0.5_160k.yml
        backbone = _paddleseg("backbones.stdcnet").STDC1()
        net = _paddleseg("pp_liteseg").PPLiteSeg(num_classes, backbone, arm_out_chs=[32, 64, 128],
                                                  seg_head_inter_chs=[32, 64, 64])
        size = 256
    elif name == "deeplabv3p":  # deeplabv3p_resnet50_os8_cityscapes_1024x512_80k.yml
        backbone = _paddleseg("backbones.resnet_vd").ResNet50_vd(output_stride=8, multi_grid=[1, 2, 4])
        net = _paddleseg("deeplab").DeepLabV3P(num_classes, backbone, backbone_indices=[0, 3],
                                               aspp_ratios=[1, 12, 24, 36], aspp_out_channels=256,
                                               align_corners=False)
        size = 128
    elif name == "segformer":  # segformer_b0_cityscapes_1024x1024_160k.yml
        backbone = _paddleseg("backbones.mix_transformer").MixVisionTransformer_B0()
        net = _paddleseg("segformer").SegFormer(num_classes, backbone, embedding_dim=256)
        size = 256
    elif name == "bisenetv2":  # bisenet_cityscapes_1024x1024_160k.yml
        net = _paddleseg("bisenet").BiSeNetV2(num_classes)
        size = 256
    elif name == "unet":  # unet_cityscapes_1024x512_160k.yml
        net = _paddleseg("unet").UNet(num_classes, use_deconv=False)
        size = 128
    elif name == "ocrnet":  # ocrnet_hrnetw18_cityscapes_1024x512_160k.yml with HRNet-W18-Small-V1
        backbone = _paddleseg("backbones.hrnet").HRNet_W18_Small_V1()
        net = _paddleseg("ocrnet").OCRNet(num_classes, backbone, backbone_indices=[0])
        size = 128
    elif name == "pspnet":  # pspnet_resnet50_os8_cityscapes_1024x512_80k.yml with ResNet18-vd
        backbone = _paddleseg("backbones.resnet_vd").ResNet18_vd(output_stride=8)
        net = _paddleseg("pspnet").PSPNet(num_classes, backbone, backbone_indices=[2, 3], pp_out_channels=256,
                                          bin_sizes=[1, 2, 3, 6], enable_auxiliary_loss=False)
        size = 128
    elif name == "stdcseg":  # stdc1_seg_cityscapes_1024x512_80k.yml
        backbone = _paddleseg("backbones.stdcnet").STDC1()
        net = _paddleseg("stdcseg").STDCSeg(num_classes, backbone)
        size = 256
    elif name == "fast_scnn":  # fastscnn_cityscapes_1024x1024_160k.yml
        net = _paddleseg("fast_scnn").FastSCNN(num_classes, enable_auxiliary_loss=False)
        size = 256
    elif name == "enet":  # enet_cityscapes_1024x512_80k.yml (max pooling with indices, max unpooling)
        net = _paddleseg("enet").ENet(num_classes)
        size = 128
    elif name == "espnetv2":  # espnet_cityscapes_1024x512_120k.yml
        net = _paddleseg("espnet").ESPNetV2(num_classes, scale=1.0)
        size = 128
    elif name == "upernet":  # upernet_resnet18_os8 style: UPerNet head on ResNet18-vd
        backbone = _paddleseg("backbones.resnet_vd").ResNet18_vd(output_stride=8)
        net = _paddleseg("upernet").UPerNet(num_classes, backbone, backbone_indices=[0, 1, 2, 3], channels=128)
        size = 128
    elif name == "segmenter":  # segmenter_vit_small_mask_ade20k_512x512_160k.yml with a tiny ViT body
        vit = _paddleseg("backbones.vision_transformer")

        class RandomVisionTransformer(vit.VisionTransformer):
            def init_weight(self):
                pass  # paddleseg 2.8's ViT reads its `pretrained` file unconditionally; the zoo's weights are random

        backbone = RandomVisionTransformer(
            img_size=128, patch_size=16, embed_dim=192, depth=4, num_heads=3, mlp_ratio=4, qkv_bias=True,
            final_norm=True)
        net = _paddleseg("segmenter").MaskSegmenter(num_classes, backbone, h_embed_dim=192, h_depth=2,
                                                    h_num_heads=3)
        size = 128
    elif name == "pp_mobileseg":  # pp_mobileseg_tiny_ade20k_512x512_80k.yml
        backbone = _paddleseg("backbones.strideformer").MobileSeg_Tiny(inj_type="AAMSx8",
                                                                       out_feat_chs=[32, 64, 128])
        net = _paddleseg("pp_mobileseg").PPMobileSeg(num_classes, backbone, upsample="intepolate")
        size = 256
    elif name == "pphumanseg_lite":  # pphumanseg_lite_mini_supervisely.yml (2 classes)
        net = _paddleseg("pphumanseg_lite").PPHumanSegLite(2)
        size = 128
    elif name in ("danet", "gcnet", "ann"):  # {danet,gcnet,ann}_resnet50_os8_cityscapes configs with ResNet18-vd
        backbone = _paddleseg("backbones.resnet_vd").ResNet18_vd(output_stride=8)
        if name == "danet":
            net = _paddleseg("danet").DANet(num_classes, backbone, backbone_indices=[2, 3])
        elif name == "gcnet":
            net = _paddleseg("gcnet").GCNet(num_classes, backbone, backbone_indices=[2, 3], gc_channels=128,
                                            enable_auxiliary_loss=False)
        else:
            net = _paddleseg("ann").ANN(num_classes, backbone, backbone_indices=[2, 3], key_value_channels=64,
                                        inter_channels=128, enable_auxiliary_loss=False)
        size = 128
    elif name == "pointrend":  # pointrend_resnet50_os32_cityscapes_1024x512_80k.yml with ResNet18-vd
        backbone = _paddleseg("backbones.resnet_vd").ResNet18_vd(output_stride=32)
        pointrend = _paddleseg("pointrend")
        net = pointrend.PointRend(num_classes, backbone, backbone_indices=[0, 1, 2, 3],
                                  fpn_inplanes=backbone.feat_channels)
        net.pointhead.__class__ = _paddleseg_point_head_for_paddle3(pointrend.PointHead)
        size = 128
    elif name == "segnext":  # segnext_mscan_t_cityscapes_1024x1024_160k.yml
        # The Hamburger's NMF draws its bases with paddle.rand at every forward by default (RAND_INIT): an
        # exported uniform_random that no other runtime reproduces (Paddle's own generator). RAND_INIT False keeps
        # the same decomposition with bases drawn once at build time (a buffer of the export).
        net = _paddleseg("segnext").SegNeXt(
            _paddleseg("backbones.mscan").MSCAN_T(), num_classes=num_classes,
            decoder_cfg={"channels": 256, "ham_channels": 256, "ham_kwargs": {"MD_R": 16, "RAND_INIT": False}})
        size = 256
        # NMF2D reshapes by the static `x.shape` (B * S, C, H * W): paddleseg exports SegNeXt with a fixed
        # --input_shape.
        declared = [1, 3, size, size]
    elif name == "rtformer":  # rtformer_slim_cityscapes_1024x512_120k.yml
        net = _paddleseg("rtformer").RTFormer(num_classes, base_channels=32, head_channels=64,
                                              use_injection=[True, True])
        size = 256
        # The cross-resolution attention convolves with the batch as the group count (`groups=x.shape[0]`):
        # paddleseg exports RTFormer with a fixed --input_shape ("please set input_shape for export.py").
        declared = [1, 3, size, size]
    elif name == "topformer":  # topformer_tiny_ade20k_512x512_160k.yml
        backbone = _paddleseg("backbones.top_transformer").TopTransformer_Tiny()
        net = _paddleseg("topformer").TopFormer(150, backbone)
        size = 256
    elif name in ("ccnet", "emanet"):  # {ccnet_resnet101,emanet_resnet101}_os8_cityscapes configs with ResNet18-vd
        backbone = _paddleseg("backbones.resnet_vd").ResNet18_vd(output_stride=8)
        if name == "ccnet":
            net = _paddleseg("ccnet").CCNet(num_classes, backbone, backbone_indices=[2, 3],
                                            enable_auxiliary_loss=False, dropout_prob=0.1, recurrence=2,
                                            align_corners=True)
        else:
            net = _paddleseg("emanet").EMANet(num_classes, backbone, backbone_indices=[2, 3], ema_channels=512,
                                              gc_channels=256, num_bases=64, stage_num=3, momentum=0.1,
                                              concat_input=True, enable_auxiliary_loss=False)
        size = 128
    elif name == "u2netp":  # U^2-Netp, the small configuration of u2net (its side outputs fused: d0 is exported)
        net = _paddleseg("u2net").U2Netp(num_classes)
        size = 128
    elif name == "ddrnet_slim":  # DDRNet-23-slim's widths (planes 32, head 64) on paddleseg's DualResNet
        net = _paddleseg("ddrnet").DualResNet(num_classes, block_layers=[2, 2, 2, 2], planes=32, spp_planes=128,
                                              head_planes=64, enable_auxiliary_loss=False)
        size = 256
    elif name == "sinet":  # sinet_portrait config: 2 classes
        net = _paddleseg("sinet").SINet(num_classes=2)
        size = 256
    else:
        raise AssertionError(name)
    model = segmentation_export(net)
    if name not in ("segnext", "rtformer"):
        declared = [-1, 3, -1, -1]
    return model, [Spec("x", declared, [1, 3, size, size])]


def _ppdet(module: str):
    root = _site_dir()
    shells = ("ppdet", "ppdet.modeling", "ppdet.modeling.heads", "ppdet.modeling.backbones", "ppdet.modeling.necks",
              "ppdet.modeling.architectures", "ppdet.modeling.assigners", "ppdet.data", "ppdet.data.transform")
    # ppdet.modeling's own import order: losses before transformers (they import each other).
    import_architecture(root, "ppdet.modeling.losses", shells)
    return import_architecture(root, f"ppdet.modeling.{module}", shells)


def _ppdet_nms_for_pir() -> None:
    """ppdet 2.6's ops.multiclass_nms builds the op with the legacy static-graph LayerHelper unless in dynamic
    mode, which fails under `paddle.jit.to_static` with PIR (the Paddle 3 default: "The type of '%BBoxes' in
    operator multiclass_nms3 should be one of [str, bytes, Variable]"). Later PaddleDetection releases call the
    C++ op in PIR too; do the same: in PIR, `paddle._C_ops.multiclass_nms3` with the same attributes (the
    dynamic-mode path of ppdet's own function is kept as it is)."""
    import paddle

    ops = _ppdet("ops")
    legacy = ops.multiclass_nms
    if getattr(legacy, "_real_zoo_pir", False):
        return

    def multiclass_nms(bboxes, scores, score_threshold, nms_top_k, keep_top_k, nms_threshold=0.3,
                       normalized=True, nms_eta=1., background_label=-1, return_index=False,
                       return_rois_num=True, rois_num=None, name=None):
        if not paddle.framework.in_pir_mode():
            return legacy(bboxes, scores, score_threshold, nms_top_k, keep_top_k, nms_threshold, normalized,
                          nms_eta, background_label, return_index, return_rois_num, rois_num, name)
        output, index, nms_rois_num = paddle._C_ops.multiclass_nms3(
            bboxes, scores, rois_num, score_threshold, nms_top_k, keep_top_k, nms_threshold, normalized, nms_eta,
            background_label)
        return output, nms_rois_num if return_rois_num else None, index if return_index else None

    multiclass_nms._real_zoo_pir = True
    ops.multiclass_nms = multiclass_nms


def detection_export(net):
    """ppdet's export (tools/export_model.py): the architecture takes a dict of inputs and its eval output
    {bbox, bbox_num} is fetched in that order."""
    import paddle

    class DetectionExport(paddle.nn.Layer):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, image, scale_factor):
            out = self.net({"image": image, "scale_factor": scale_factor})  # these read no im_shape
            return out["bbox"], out["bbox_num"]

    return DetectionExport(net)


def rescale_to_he_init(layer) -> None:
    """Draw the convolutions of `layer` at He initialisation's scale (std sqrt(2 / fan-in)). PicoDet's head
    initialises them with std 0.01 (ppdet's choice for training stability): in a random network their outputs
    then stay below the batch norms' epsilon, the head's features are the same at every position and every anchor
    gets the same score and box shape, a tie that any NMS may break its own way."""
    import paddle

    for conv in layer.sublayers(include_self=True):
        if isinstance(conv, paddle.nn.Conv2D):
            weight = conv.weight.numpy()
            fan_in = int(np.prod(weight.shape[1:]))
            scale = np.sqrt(2.0 / fan_in) / max(float(weight.std()), 1e-12)
            conv.weight.set_value(paddle.to_tensor((weight * scale).astype(weight.dtype)))


def spread_class_logits(layers, num_classes: int, probe, mean: float, std: float) -> None:
    """Rescale the last classification layers (their first `num_classes` output channels) so that their logits
    on the probe input have `mean` and `std`: random weights from a prior-probability initialisation give every
    candidate a score near the prior, below the NMS score threshold; spread scores make NMS keep, suppress and
    order many boxes."""
    spread_score_channels(layers, slice(0, num_classes), probe, mean, std)


def _detection_specs(size: int) -> list:
    # ppdet exports a fixed eval size with a free batch, and prunes the inputs the model does not read (these
    # read no im_shape: tools/export_model.py's _prune_input_spec). scale_factor 1: the image is the original.
    return [Spec("image", [-1, 3, size, size], [1, 3, size, size]),
            Spec("scale_factor", [-1, 2], [1, 2], low=1.0, high=1.0)]


def build_detector(name: str):
    import paddle

    size = 320
    specs = _detection_specs(size)
    nms_module = _ppdet("layers")
    _ppdet_nms_for_pir()
    if name == "picodet":  # picodet_s_320_coco_lcnet.yml
        backbone = _ppdet("backbones.lcnet").LCNet(scale=0.75, feature_maps=[3, 4, 5])
        neck = _ppdet("necks.lc_pan").LCPAN(in_channels=[i.channels for i in backbone.out_shape],
                                            out_channels=96, use_depthwise=True, num_features=4)
        pico = _ppdet("heads.pico_head")
        losses = _ppdet("losses")
        feat = pico.PicoFeat(feat_in=96, feat_out=96, num_convs=2, num_fpn_stride=4, norm_type="bn",
                             share_cls_reg=True, use_se=True)
        head = pico.PicoHeadV2(conv_feat=feat, num_classes=80, fpn_stride=[8, 16, 32, 64], prior_prob=0.01,
                               reg_max=7, cell_offset=0.5, grid_cell_scale=5.0, use_align_head=True,
                               feat_in_chan=96, eval_size=[size, size],
                               loss_class=_ppdet("losses.varifocal_loss").VarifocalLoss(use_sigmoid=False,
                                                                                          iou_weighted=True),
                               loss_dfl=losses.DistributionFocalLoss(loss_weight=0.5),
                               loss_bbox=losses.GIoULoss(loss_weight=2.5),
                               nms=nms_module.MultiClassNMS(nms_top_k=1000, keep_top_k=100, score_threshold=0.025,
                                                            nms_threshold=0.6))
        net = _ppdet("architectures.picodet").PicoDet(backbone, neck, head)
        rescale_to_he_init(head.conv_feat)
        class_layers, num_classes = list(head.head_cls_list), 80
    elif name == "ppyoloe_plus":  # ppyoloe_plus_crn_s_80e_coco.yml
        width, depth = 0.50, 0.33
        backbone = _ppdet("backbones.cspresnet").CSPResNet(
            layers=[3, 6, 6, 3], channels=[64, 128, 256, 512, 1024], return_idx=[1, 2, 3], use_large_stem=True,
            use_alpha=True, width_mult=width, depth_mult=depth)
        neck = _ppdet("necks.custom_pan").CustomCSPPAN(
            in_channels=[i.channels for i in backbone.out_shape], out_channels=[768, 384, 192], stage_num=1,
            block_num=3, act="swish", spp=True, use_alpha=True, width_mult=width, depth_mult=depth)
        head = _ppdet("heads.ppyoloe_head").PPYOLOEHead(
            in_channels=[i.channels for i in neck.out_shape], fpn_strides=[32, 16, 8], grid_cell_scale=5.0,
            grid_cell_offset=0.5, static_assigner_epoch=30, use_varifocal_loss=True, eval_size=[size, size],
            nms=nms_module.MultiClassNMS(nms_top_k=1000, keep_top_k=300, score_threshold=0.01,
                                         nms_threshold=0.7))
        net = _ppdet("architectures.ppyoloe").PPYOLOE(backbone, neck, head, post_process=None)
        class_layers, num_classes = list(head.pred_cls), 80
    else:
        raise AssertionError(name)
    model = detection_export(net)

    def calibrate(rng):
        def batch():
            return [paddle.to_tensor(s.sample(rng, batch=2)) for s in specs]

        calibrate_batch_norms(model, batch, lambda inputs: model(*inputs))
        probe = [paddle.to_tensor(s.sample(rng)) for s in specs]
        # Logits around -4.5 (std 1.5): after the sigmoid (and PicoDet's alignment factor) a few percent of the
        # candidates of every class pass the score threshold, hundreds of boxes per image for NMS.
        spread_class_logits(class_layers, num_classes, lambda: model(*probe), mean=-4.5, std=1.5)
        bbox, bbox_num = model(*probe)
        print(f"{name}: {int(bbox_num.numpy().sum())} boxes kept by NMS on a random image", file=sys.stderr)

    model._real_zoo_calibrate = calibrate
    return model, specs


def _paddlex(task: str, module: str):
    root = _site_dir()
    models = "paddlex.inference.models"
    return import_architecture(root, f"{models}.{task}.modeling.{module}", (
        "paddlex", "paddlex.inference", models, f"{models}.{task}", f"{models}.image_classification"))


def architecture_export(model):
    """PaddleX's modeling classes wrap the architecture for dygraph inference (`forward([array]) -> [array]`);
    export `head(model(x))`, what PaddleOCR's own export of the same architecture computes."""
    import paddle

    class ArchitectureExport(paddle.nn.Layer):
        def __init__(self, wrapped):
            super().__init__()
            self.model, self.head = wrapped.model, wrapped.head

        def forward(self, x):
            return self.head(self.model(x))

    return ArchitectureExport(model)


def _paddlex_released_configs():
    """PaddleX's table of the released models' configurations (the values of their published config.json)."""
    root = _site_dir()
    return import_architecture(root, "paddlex.modules.base.utils.pdparams2safetensors.model_config", (
        "paddlex", "paddlex.modules", "paddlex.modules.base", "paddlex.modules.base.utils",
        "paddlex.modules.base.utils.pdparams2safetensors"))


def build_ocr(name: str):
    """PP-OCRv5 mobile: PaddleX's port of PaddleOCR's architecture with the released configuration.
    PaddleOCR exports det with [-1, 3, -1, -1] and rec with [-1, 3, 48, -1]."""
    released = _paddlex_released_configs().MODEL_CONFIGS
    if name == "ppocrv5_det":
        arch = _paddlex("text_detection", "pp_ocrv5_mobile_det")
        config = arch.PPOCRV5MobileDetConfig(**released["PP-OCRv5_mobile_det"])
        return architecture_export(arch.PPOCRV5MobileDet(config)), [Spec("x", [-1, 3, -1, -1], [1, 3, 256, 256])]
    arch = _paddlex("text_recognition", "pp_ocrv5_mobile_rec")
    config = arch.PPOCRV5MobileRecConfig(**released["PP-OCRv5_mobile_rec"])
    return architecture_export(arch.PPOCRV5MobileRec(config)), [Spec("x", [-1, 3, 48, -1], [1, 3, 48, 160])]


def _static_transpose_pads_like_dygraph() -> None:
    """Paddle's dygraph `Tensor.transpose(perm)` accepts a perm shorter than the rank (the trailing axes stay), and
    PaddleX's RT-DETR relies on it (MultiScaleDeformableAttention: a rank-5 grid transposed with [0, 2, 1, 3]);
    `paddle.jit.to_static` records that perm unchanged and Paddle Inference then refuses the program ("Input
    dimension size should be equal to 5, but received dimension size is 4"). While exporting, complete such a perm
    the way dygraph does, so the exported program computes what the dygraph model computes."""
    import paddle

    value_type = paddle.pir.Value
    original = value_type.transpose
    if getattr(original, "_real_zoo_padded", False):
        return

    def transpose(x, perm, name=None):
        perm = list(perm)
        if len(x.shape) > len(perm):
            perm += list(range(len(perm), len(x.shape)))
        return original(x, perm, name=name)

    transpose._real_zoo_padded = True
    value_type.transpose = transpose


def build_rtdetr(name: str):
    """RT-DETR-L (PaddleX's port: HGNetV2 backbone, hybrid encoder, deformable decoder, DETRPostProcess with
    focal-loss top-k) with PaddleX's standard RT-DETR configuration for COCO's 80 classes, at a 320 px eval size.
    PaddleDetection exports it with inputs im_shape, image, scale_factor and a fixed image size."""
    import paddle

    arch = _paddlex("object_detection", "rt_detr")
    _static_transpose_pads_like_dygraph()
    size = 320
    labels = {str(k): str(k) for k in range(80)}
    released = _paddlex_released_configs()._rtdetr_config(labels, {v: int(k) for k, v in labels.items()})
    # The backbone's batch norms are frozen in the release (freeze_backbone_batch_norms: constant statistics, the
    # `(var + 1e-5).rsqrt()` of RTDETRFrozenBatchNorm2d): built unfrozen, calibrated, then frozen by the package's
    # own replace_batch_norm (which copies the statistics), so the frozen ones hold realistic values.
    net = arch.RTDETR(arch.RTDETRConfig(**dict(released, eval_size=[size, size],
                                               freeze_backbone_batch_norms=False)))

    class RTDETRExport(paddle.nn.Layer):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, im_shape, image, scale_factor):
            # RTDETR.forward without its dygraph-only pad_shape (`paddle.to_tensor` of Python ints, read only by
            # the "pad" box decoding; the model decodes "origin").
            outputs = self.net.model(image)
            head_out = (outputs["intermediate_reference_points"][:, -1], outputs["intermediate_logits"][:, -1])
            return tuple(self.net.post_process(head_out, im_shape, scale_factor, None))

    model = RTDETRExport(net)
    specs = [Spec("im_shape", [-1, 2], [1, 2], low=size, high=size),
             Spec("image", [-1, 3, size, size], [1, 3, size, size]),
             Spec("scale_factor", [-1, 2], [1, 2], low=1.0, high=1.0)]

    def calibrate(rng):
        def batch():
            return [paddle.to_tensor(s.sample(rng, batch=2)) for s in specs]

        calibrate_batch_norms(model, batch, lambda inputs: model(*inputs))
        with paddle.no_grad():
            arch.replace_batch_norm(net.model.backbone.model)

    model._real_zoo_calibrate = calibrate
    return model, specs


# ERNIE-3.0's released configuration (ernie-3.0-medium-zh: vocabulary 40000, 2048 positions, task ids) with a
# tiny body: 2 layers of width 128.
ERNIE_CONFIG = {"vocab_size": 40000, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                "intermediate_size": 512, "max_position_embeddings": 2048, "type_vocab_size": 4,
                "task_type_vocab_size": 16, "use_task_id": True, "hidden_act": "gelu", "layer_norm_eps": 1e-5,
                "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}
ERNIE_SEQ_LEN = 32


def build_ernie(name: str):
    """paddlenlp's ErnieFor{Sequence,Token}Classification; paddlenlp exports input_ids and token_type_ids as
    int64 [-1, -1]."""
    import paddle

    root = _site_dir()
    shells = ("paddlenlp",)
    # paddlenlp.data first: the order paddlenlp/__init__ imports them in (data and transformers import each other).
    import_architecture(root, "paddlenlp.data", shells)
    modeling = import_architecture(root, "paddlenlp.transformers.ernie.modeling", shells)
    config = import_architecture(root, "paddlenlp.transformers.ernie.configuration", shells).ErnieConfig(
        num_labels=2 if name == "ernie_seq_cls" else 7, **ERNIE_CONFIG)
    cls = modeling.ErnieForSequenceClassification if name == "ernie_seq_cls" else modeling.ErnieForTokenClassification
    net = cls(config)

    class ErnieExport(paddle.nn.Layer):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, input_ids, token_type_ids):
            return self.net(input_ids, token_type_ids=token_type_ids, return_dict=False)

    specs = [Spec("input_ids", [-1, -1], [1, ERNIE_SEQ_LEN], "int64", 1, ERNIE_CONFIG["vocab_size"]),
             Spec("token_type_ids", [-1, -1], [1, ERNIE_SEQ_LEN], "int64", 0, 2)]
    return ErnieExport(net), specs


# ------------------------------------------------------------------------------------------------------------
# Wider detection, OCR, keypoint and NLP architectures (issue 24 item 7's "more is better").

def spread_score_channels(layers, channels, probe, mean: float, std: float) -> None:
    """Rescale the output channels `channels` (a slice or index list) of each conv in `layers` so that their outputs
    on the probe input have `mean` and `std` (spread_class_logits for the first channels; YOLOv3 interleaves, per
    anchor, 4 box channels, an objectness and the class logits). A conv shared by the pyramid levels (FCOS's,
    RetinaNet's and SOLOv2's heads) is called once per level: its statistics are those of all its outputs."""
    import paddle

    seen = collections.defaultdict(list)

    def record(k):
        def hook(layer, inputs, output):
            seen[k].append(output.numpy()[:, channels])
        return hook

    hooks = [layer.register_forward_post_hook(record(k)) for k, layer in enumerate(layers)]
    with paddle.no_grad():
        probe()
    for hook in hooks:
        hook.remove()
    for k, layer in enumerate(layers):
        calls = seen[k]
        logits = calls[0] if len(calls) == 1 else np.concatenate([c.ravel() for c in calls])
        factor = std / max(float(logits.std()), 1e-6)
        weight, bias = layer.weight.numpy().copy(), layer.bias.numpy().copy()
        weight[channels] *= factor
        bias[channels] = (bias[channels] - float(logits.mean())) * factor + mean
        layer.weight.set_value(paddle.to_tensor(weight))
        layer.bias.set_value(paddle.to_tensor(bias))


def _ppdet_prior_box_for_pir() -> None:
    """ppdet 2.6's ops.prior_box, like its multiclass_nms (see _ppdet_nms_for_pir), builds the op with the legacy
    LayerHelper outside dynamic mode and fails under to_static with PIR; in PIR call Paddle's own
    paddle.vision.ops.prior_box, the same op with the same arguments."""
    import paddle

    ops = _ppdet("ops")
    legacy = ops.prior_box
    if getattr(legacy, "_real_zoo_pir", False):
        return

    def prior_box(*args, **kwargs):
        if paddle.framework.in_pir_mode():
            return paddle.vision.ops.prior_box(*args, **kwargs)
        return legacy(*args, **kwargs)

    prior_box._real_zoo_pir = True
    ops.prior_box = prior_box


def _ppdet_matrix_nms_for_paddle3() -> None:
    """ppdet 2.6's ops.matrix_nms builds the op with the legacy LayerHelper outside dynamic mode (failing under
    to_static with PIR) and calls the legacy attribute-tuple form of C_ops.matrix_nms in dynamic mode (which Paddle
    3 no longer takes); in both modes call Paddle's own paddle.vision.ops.matrix_nms, the same op with the same
    arguments and the same (out, rois_num, index) result."""
    import paddle

    ops = _ppdet("ops")
    if getattr(ops.matrix_nms, "_real_zoo_pir", False):
        return

    def matrix_nms(bboxes, scores, score_threshold, post_threshold, nms_top_k, keep_top_k, use_gaussian=False,
                   gaussian_sigma=2., background_label=0, normalized=True, return_index=False,
                   return_rois_num=True, name=None):
        return paddle.vision.ops.matrix_nms(bboxes, scores, score_threshold, post_threshold, nms_top_k,
                                            keep_top_k, use_gaussian, gaussian_sigma, background_label,
                                            normalized, return_index, return_rois_num)

    matrix_nms._real_zoo_pir = True
    ops.matrix_nms = matrix_nms


def _ppdet_export_with_im_shape(net):
    """ppdet's export of the architectures that read im_shape too (YOLOv3, SSD): inputs im_shape, image,
    scale_factor (tools/export_model.py's order), outputs {bbox, bbox_num}."""
    import paddle

    class DetectionExport(paddle.nn.Layer):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, im_shape, image, scale_factor):
            out = self.net({"im_shape": im_shape, "image": image, "scale_factor": scale_factor})
            return out["bbox"], out["bbox_num"]

    return DetectionExport(net)


def _detection_specs_with_im_shape(size: int) -> list:
    return [Spec("im_shape", [-1, 2], [1, 2], low=size, high=size)] + _detection_specs(size)[:1] + [
        Spec("scale_factor", [-1, 2], [1, 2], low=1.0, high=1.0)]


def build_detector_more(name: str):
    """ppdet's detectors that read im_shape too, each with its reference config: YOLOv3 (MobileNetV1, yolo_box +
    multiclass_nms3; yolov3_mobilenet_v1_270e_coco.yml), SSD (MobileNetV1 with extra blocks, prior_box + softmax +
    multiclass_nms3; ssd_mobilenet_v1_300_120e_voc.yml, 300 px), PP-YOLOv2 (ResNet50-vd with DCNv2, IoU-aware head,
    yolo_box + matrix_nms; ppyolov2_r50vd_dcn_365e_coco.yml) and CenterNet (DLA34, max-pool peaks + top-k;
    centernet_dla34_140e_coco.yml); the others at 320 px."""
    import paddle

    nms_module = _ppdet("layers")
    _ppdet_nms_for_pir()
    _ppdet_prior_box_for_pir()
    mobilenet = _ppdet("backbones.mobilenet_v1").MobileNet
    post_process = _ppdet("post_process").BBoxPostProcess
    if name == "yolov3":
        size = 320
        backbone = mobilenet(scale=1, feature_maps=[4, 6, 13], with_extra_blocks=False)
        neck = _ppdet("necks.yolo_fpn").YOLOv3FPN(in_channels=[i.channels for i in backbone.out_shape])
        head = _ppdet("heads.yolo_head").YOLOv3Head(in_channels=[i.channels for i in neck.out_shape],
                                                    num_classes=80)
        decode = nms_module.YOLOBox(num_classes=80, conf_thresh=0.005, downsample_ratio=32, clip_bbox=True)
        nms = nms_module.MultiClassNMS(keep_top_k=100, nms_threshold=0.45, nms_top_k=1000, score_threshold=0.01)
        net = _ppdet("architectures.yolo").YOLOv3(backbone, neck, head, post_process(80, decode, nms))
        # Per anchor: x, y, w, h, objectness, 80 class logits.
        per_anchor = 5 + 80
        score_channels = [a * per_anchor + c for a in range(3) for c in range(4, per_anchor)]
        score_layers = list(head.yolo_outputs)
    elif name == "ssd":
        size = 300
        num_classes = 20  # VOC
        backbone = mobilenet(norm_decay=0.0, conv_decay=0.00004, scale=1, conv_learning_rate=0.1,
                             extra_block_filters=[[256, 512], [128, 256], [128, 256], [64, 128]],
                             with_extra_blocks=True, feature_maps=[11, 13, 14, 15, 16, 17])
        anchors = nms_module.AnchorGeneratorSSD(
            steps=[0, 0, 0, 0, 0, 0], aspect_ratios=[[2.0], [2.0, 3.0], [2.0, 3.0], [2.0, 3.0], [2.0, 3.0],
                                                     [2.0, 3.0]],
            min_ratio=20, max_ratio=90, base_size=300, min_sizes=[60.0, 105.0, 150.0, 195.0, 240.0, 285.0],
            max_sizes=[[], 150.0, 195.0, 240.0, 285.0, 300.0],
            offset=0.5, flip=True, min_max_aspect_ratios_order=False)
        head = _ppdet("heads.ssd_head").SSDHead(num_classes=num_classes, in_channels=[512, 1024, 512, 256, 256, 128],
                                                anchor_generator=anchors, kernel_size=1, padding=0)
        decode = nms_module.SSDBox()
        nms = nms_module.MultiClassNMS(keep_top_k=200, score_threshold=0.01, nms_threshold=0.45, nms_top_k=400)
        net = _ppdet("architectures.ssd").SSD(backbone, head, post_process(num_classes, decode, nms))
        score_channels, score_layers = None, list(head.score_convs)
    elif name == "centernet":  # centernet_dla34_140e_coco.yml: max-pool peak picking and top-k, no NMS
        size = 320
        backbone = _ppdet("backbones.dla").DLA(depth=34)
        neck = _ppdet("necks.centernet_fpn").CenterNetDLAFPN(in_channels=[i.channels for i in backbone.out_shape],
                                                             down_ratio=4)
        head = _ppdet("heads.centernet_head").CenterNetHead(in_channels=neck.out_shape[0].channels,
                                                            head_planes=256, regress_ltrb=False)
        post = _ppdet("post_process").CenterNetPostProcess(max_per_img=100, down_ratio=4, regress_ltrb=False)
        net = _ppdet("architectures.centernet").CenterNet(backbone, neck, head, post)
        score_channels, score_layers = None, []
    elif name == "ppyolov2":  # ppyolov2_r50vd_dcn_365e_coco.yml
        size = 320
        _ppdet_matrix_nms_for_paddle3()
        backbone = _ppdet("backbones.resnet").ResNet(depth=50, variant="d", return_idx=[1, 2, 3],
                                                     dcn_v2_stages=[3], freeze_at=-1, freeze_norm=False,
                                                     norm_decay=0.0)
        neck = _ppdet("necks.yolo_fpn").PPYOLOPAN(in_channels=[i.channels for i in backbone.out_shape],
                                                  drop_block=True, block_size=3, keep_prob=0.9, spp=True)
        head = _ppdet("heads.yolo_head").YOLOv3Head(
            in_channels=[i.channels for i in neck.out_shape], num_classes=80,
            anchors=[[10, 13], [16, 30], [33, 23], [30, 61], [62, 45], [59, 119], [116, 90], [156, 198],
                     [373, 326]], anchor_masks=[[6, 7, 8], [3, 4, 5], [0, 1, 2]], iou_aware=True,
            iou_aware_factor=0.5)
        decode = nms_module.YOLOBox(num_classes=80, conf_thresh=0.01, downsample_ratio=32, clip_bbox=True,
                                    scale_x_y=1.05)
        nms = nms_module.MatrixNMS(keep_top_k=100, score_threshold=0.01, post_threshold=0.01, nms_top_k=-1,
                                   background_label=-1)
        net = _ppdet("architectures.yolo").YOLOv3(backbone, neck, head, post_process(80, decode, nms))
        # Per anchor after the 3 IoU predictions: x, y, w, h, objectness, 80 class logits.
        per_anchor = 5 + 80
        score_channels = [3 + a * per_anchor + c for a in range(3) for c in range(4, per_anchor)]
        score_layers = list(head.yolo_outputs)
    else:
        raise AssertionError(name)
    model = _ppdet_export_with_im_shape(net)
    specs = _detection_specs_with_im_shape(size)

    def calibrate(rng):
        # CenterNetPostProcess decodes one image only ("only support batch_size=1 now"): calibrate on single images.
        calibration_batch = 1 if name == "centernet" else 2

        def batch():
            return [paddle.to_tensor(s.sample(rng, batch=calibration_batch)) for s in specs]

        calibrate_batch_norms(model, batch, lambda inputs: model(*inputs))
        probe = [paddle.to_tensor(s.sample(rng)) for s in specs]
        if score_channels is not None:
            # sigmoid(objectness) * sigmoid(class) past the 0.01 threshold for a part of the candidates: YOLOv3's
            # NMS takes the best 1000 of each class, PP-YOLOv2's Matrix NMS all of them (an IoU matrix of the
            # candidates squared per class), so fewer pass there.
            mean = -4.0 if name == "ppyolov2" else -2.5
            spread_score_channels(score_layers, score_channels, lambda: model(*probe), mean=mean, std=1.5)
        elif score_layers:
            # A softmax over the background and 20 classes: spread logits so a few classes beat 0.01 per prior.
            for layer in score_layers:
                weight = layer.weight.numpy()
                layer.weight.set_value(paddle.to_tensor((weight * 8.0).astype(weight.dtype)))
        _, bbox_num = model(*probe)
        print(f"{name}: {int(bbox_num.numpy().sum())} boxes kept by NMS on a random image", file=sys.stderr)

    model._real_zoo_calibrate = calibrate
    return model, specs


def spread_linear_outputs(layer, columns, probe, std: float) -> None:
    """Rescale the output columns `columns` of a Linear layer (Paddle stores its weight [in, out]) so that their
    outputs on the probe input have standard deviation `std` around their own mean (a softmax reads differences)."""
    import paddle

    seen = {}
    hook = layer.register_forward_post_hook(lambda _, inputs, output: seen.update(out=output.numpy()[:, columns]))
    with paddle.no_grad():
        probe()
    hook.remove()
    factor = std / max(float(seen["out"].std()), 1e-6)
    weight, bias = layer.weight.numpy().copy(), layer.bias.numpy().copy()
    weight[:, columns] *= factor
    bias[columns] *= factor
    layer.weight.set_value(paddle.to_tensor(weight))
    layer.bias.set_value(paddle.to_tensor(bias))


def _ppdet_rpn_head_for_paddle3(rpn_head_class):
    """ppdet 2.6's RPNHead._gen_proposal collects each image's proposal count as `paddle.shape(rois)[0]` and
    concatenates them: a 1-D tensor in Paddle 2, a 0-D one in Paddle 3, which concat refuses ("The axis is expected
    to be in range of [0, 0)"). The same method with the counts taken as `paddle.shape(rois)[0:1]` (1-D, as Paddle 2
    gave them); everything else is ppdet's non-ONNX path unchanged."""
    import paddle

    class RPNHead(rpn_head_class):
        def _gen_proposal(self, scores, bbox_deltas, anchors, inputs):
            prop_gen = self.train_proposal if self.training else self.test_proposal
            im_shape = inputs["im_shape"]
            bs_rois_collect = []
            bs_rois_num_collect = []
            batch_size = paddle.slice(paddle.shape(im_shape), [0], [0], [1])
            for i in range(batch_size):
                rpn_rois_list, rpn_prob_list = [], []
                for rpn_score, rpn_delta, anchor in zip(scores, bbox_deltas, anchors):
                    rpn_rois, rpn_rois_prob, _, post_nms_top_n = prop_gen(
                        scores=rpn_score[i:i + 1], bbox_deltas=rpn_delta[i:i + 1], anchors=anchor,
                        im_shape=im_shape[i:i + 1])
                    rpn_rois_list.append(rpn_rois)
                    rpn_prob_list.append(rpn_rois_prob)
                if len(scores) > 1:
                    rpn_rois = paddle.concat(rpn_rois_list)
                    rpn_prob = paddle.concat(rpn_prob_list).flatten()
                    num_rois = paddle.shape(rpn_prob)[0].cast("int32")
                    if num_rois > post_nms_top_n:
                        _, topk_inds = paddle.topk(rpn_prob, post_nms_top_n)
                        topk_rois = paddle.gather(rpn_rois, topk_inds)
                    else:
                        topk_rois = rpn_rois
                else:
                    topk_rois = rpn_rois_list[0]
                bs_rois_collect.append(topk_rois)
                bs_rois_num_collect.append(paddle.shape(topk_rois)[0:1])
            return bs_rois_collect, paddle.concat(bs_rois_num_collect)

    return RPNHead


def _ppdet_bbox_post_process_for_paddle3(post_process_class):
    """ppdet 2.6's BBoxPostProcess.get_pred indexes per-image scalars as `bbox_num[i]` and `scale_factor[i][0]`
    and concatenates them: 1-D in Paddle 2, 0-D in Paddle 3, which concat refuses. The same method with those taken
    as one-element slices (what later PaddleDetection releases do); everything else is ppdet's non-ONNX path."""
    import paddle

    nonempty_bbox = _ppdet("bbox_utils").nonempty_bbox

    class BBoxPostProcess(post_process_class):
        def get_pred(self, bboxes, bbox_num, im_shape, scale_factor):
            bboxes_list, bbox_num_list = [], []
            id_start = 0
            fake_bboxes = paddle.to_tensor(np.array([[0., 0.0, 0.0, 0.0, 1.0, 1.0]], dtype="float32"))
            fake_bbox_num = paddle.to_tensor(np.array([1], dtype="int32"))
            for i in range(bbox_num.shape[0]):
                if bbox_num[i] == 0:
                    bboxes_i = fake_bboxes
                    bbox_num_i = fake_bbox_num
                else:
                    bboxes_i = bboxes[id_start:id_start + bbox_num[i], :]
                    bbox_num_i = bbox_num[i:i + 1]
                    id_start += bbox_num[i]
                bboxes_list.append(bboxes_i)
                bbox_num_list.append(bbox_num_i)
            bboxes = paddle.concat(bboxes_list)
            bbox_num = paddle.concat(bbox_num_list)
            origin_shape = paddle.floor(im_shape / scale_factor + 0.5)
            origin_shape_list, scale_factor_list = [], []
            for i in range(bbox_num.shape[0]):
                expand_shape = paddle.expand(origin_shape[i:i + 1, :], [bbox_num[i], 2])
                scale_y, scale_x = scale_factor[i][0:1], scale_factor[i][1:2]
                scale = paddle.concat([scale_x, scale_y, scale_x, scale_y])
                expand_scale = paddle.expand(scale, [bbox_num[i], 4])
                origin_shape_list.append(expand_shape)
                scale_factor_list.append(expand_scale)
            self.origin_shape_list = paddle.concat(origin_shape_list)
            scale_factor_list = paddle.concat(scale_factor_list)
            pred_label = bboxes[:, 0:1]
            pred_score = bboxes[:, 1:2]
            pred_bbox = bboxes[:, 2:]
            scaled_bbox = pred_bbox / scale_factor_list
            origin_h = self.origin_shape_list[:, 0]
            origin_w = self.origin_shape_list[:, 1]
            zeros = paddle.zeros_like(origin_h)
            x1 = paddle.maximum(paddle.minimum(scaled_bbox[:, 0], origin_w), zeros)
            y1 = paddle.maximum(paddle.minimum(scaled_bbox[:, 1], origin_h), zeros)
            x2 = paddle.maximum(paddle.minimum(scaled_bbox[:, 2], origin_w), zeros)
            y2 = paddle.maximum(paddle.minimum(scaled_bbox[:, 3], origin_h), zeros)
            pred_bbox = paddle.stack([x1, y1, x2, y2], axis=-1)
            keep_mask = paddle.unsqueeze(nonempty_bbox(pred_bbox, return_mask=True), [1])
            pred_label = paddle.where(keep_mask, pred_label, paddle.ones_like(pred_label) * -1)
            pred_result = paddle.concat([pred_label, pred_score, pred_bbox], axis=1)
            return bboxes, pred_result, bbox_num

    return BBoxPostProcess


def _ppdet_cascade_head_for_paddle3(cascade_head_class):
    """ppdet 2.6's CascadeHead._get_rois_from_boxes concatenates `paddle.shape(rois)[0]` per image, 0-D in Paddle 3
    (see _ppdet_rpn_head_for_paddle3): the same method with one-element slices, its eval path unchanged."""
    import paddle

    clip_bbox = _ppdet("bbox_utils").clip_bbox

    class CascadeHead(cascade_head_class):
        def _get_rois_from_boxes(self, boxes, im_shape):
            rois = [clip_bbox(boxes_per_image, im_shape[i]) for i, boxes_per_image in enumerate(boxes)]
            return rois, paddle.concat([paddle.shape(r)[0:1] for r in rois])

    return CascadeHead


def build_two_stage(name: str):
    """ppdet's two-stage detectors with their reference configs: Faster R-CNN (faster_rcnn_r50_fpn_1x_coco.yml:
    ResNet50 + FPN, RPNHead with AnchorGenerator and generate_proposals, RoIAlign BBoxHead with TwoFCHead,
    BBoxPostProcess with RCNNBox and MultiClassNMS) and Mask R-CNN (mask_rcnn_r50_fpn_1x_coco.yml: the same plus
    MaskHead with MaskFeat and MaskPostProcess, whose paste_mask grid-samples each 28x28 mask onto the image) and
    Cascade R-CNN (cascade_rcnn_r50_fpn_1x_coco.yml: Faster R-CNN's body with CascadeHead's three stages, each
    re-pooling the last stage's boxes, and RCNNBox with variances 30, 30, 15, 15), at a 320 px eval size;
    exported with im_shape, image, scale_factor (outputs bbox, bbox_num and, for Mask R-CNN, the [N, 320, 320]
    int32 masks). The backbone's batch norms are built unfrozen (freeze_norm=False) so the calibration
    can move their statistics; exported, they are the same batch_norm ops."""
    import paddle

    size = 320
    nms_module = _ppdet("layers")
    _ppdet_nms_for_pir()
    backbone = _ppdet("backbones.resnet").ResNet(depth=50, norm_type="bn", freeze_at=0, return_idx=[0, 1, 2, 3],
                                                 num_stages=4, freeze_norm=False)
    neck = _ppdet("necks.fpn").FPN(in_channels=[i.channels for i in backbone.out_shape], out_channel=256,
                                   spatial_scales=[1.0 / i.stride for i in backbone.out_shape])
    levels = neck.out_shape
    rpn = _ppdet("proposal_generator.rpn_head")
    anchors = _ppdet("proposal_generator.anchor_generator").AnchorGenerator(
        aspect_ratios=[0.5, 1.0, 2.0], anchor_sizes=[[32], [64], [128], [256], [512]], strides=[4, 8, 16, 32, 64])
    proposals = _ppdet("proposal_generator.proposal_generator").ProposalGenerator
    rpn_head = _ppdet_rpn_head_for_paddle3(rpn.RPNHead)(anchor_generator=anchors, test_proposal=proposals(
        min_size=0.0, nms_thresh=0.7, pre_nms_top_n=1000, post_nms_top_n=1000, topk_after_collect=False),
        in_channel=levels[0].channels)
    heads = _ppdet("heads.bbox_head")
    roi = _ppdet("heads.roi_extractor").RoIAlign
    spatial_scale = [1.0 / i.stride for i in levels]
    box_roi = roi(resolution=7, sampling_ratio=0, aligned=True, spatial_scale=spatial_scale)
    if name == "cascade_rcnn":  # CascadeHead: three stages of CascadeTwoFCHead, class-agnostic box deltas
        cascade = _ppdet("heads.cascade_head")
        bbox_head = _ppdet_cascade_head_for_paddle3(cascade.CascadeHead)(
            cascade.CascadeTwoFCHead(in_channel=levels[0].channels, out_channel=1024, resolution=7),
            in_channel=1024, num_classes=80, roi_extractor=box_roi)
        score_layers, box_variance = list(bbox_head.bbox_score_list), [30.0, 30.0, 15.0, 15.0]
    else:
        two_fc = heads.TwoFCHead(in_channel=levels[0].channels, out_channel=1024, resolution=7)
        bbox_head = heads.BBoxHead(two_fc, in_channel=1024, num_classes=80, roi_extractor=box_roi)
        score_layers, box_variance = [bbox_head.bbox_score], [10.0, 10.0, 5.0, 5.0]
    post_process = _ppdet("post_process")
    bbox_post = _ppdet_bbox_post_process_for_paddle3(post_process.BBoxPostProcess)(
        num_classes=80, decode=nms_module.RCNNBox(prior_box_var=box_variance, num_classes=80),
        nms=nms_module.MultiClassNMS(keep_top_k=100, score_threshold=0.05, nms_threshold=0.5))
    if name == "cascade_rcnn":
        net = _ppdet("architectures.cascade_rcnn").CascadeRCNN(backbone, rpn_head, bbox_head, bbox_post, neck=neck)
        model = _ppdet_export_with_im_shape(net)
    elif name == "faster_rcnn":
        net = _ppdet("architectures.faster_rcnn").FasterRCNN(backbone, rpn_head, bbox_head, bbox_post, neck=neck)
        model = _ppdet_export_with_im_shape(net)
    elif name == "mask_rcnn":
        masks = _ppdet("heads.mask_head")
        mask_head = masks.MaskHead(masks.MaskFeat(in_channel=levels[0].channels, out_channel=256, num_convs=4),
                                   roi_extractor=roi(resolution=14, sampling_ratio=0, aligned=True,
                                                     spatial_scale=spatial_scale),
                                   num_classes=80, share_bbox_feat=False)
        net = _ppdet("architectures.mask_rcnn").MaskRCNN(backbone, rpn_head, bbox_head, mask_head, bbox_post,
                                                         post_process.MaskPostProcess(binary_thresh=0.5), neck=neck)

        class MaskExport(paddle.nn.Layer):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, im_shape, image, scale_factor):
                out = self.net({"im_shape": im_shape, "image": image, "scale_factor": scale_factor})
                return out["bbox"], out["bbox_num"], out["mask"]

        model = MaskExport(net)
    else:
        raise AssertionError(name)
    # ppdet's export declares image [-1, 3, -1, -1] when the TestReader has no inputs_def (faster_fpn_reader.yml and
    # mask_fpn_reader.yml have none: the images are resized keeping their ratio and padded to a multiple of 32).
    specs = [Spec("im_shape", [-1, 2], [1, 2], low=size, high=size),
             Spec("image", [-1, 3, -1, -1], [1, 3, size, size]),
             Spec("scale_factor", [-1, 2], [1, 2], low=1.0, high=1.0)]

    def calibrate(rng):
        def batch():
            return [paddle.to_tensor(s.sample(rng, batch=2)) for s in specs]

        calibrate_batch_norms(model, batch, lambda inputs: model(*inputs))
        probe = [paddle.to_tensor(s.sample(rng)) for s in specs]
        # The RPN's objectness (std 0.01 at initialisation: every anchor ties) spread to std 2, so the proposals'
        # order and their NMS are decided by clear differences; the 81 class logits spread to std 3, so a few classes
        # per RoI pass the 0.05 softmax threshold and MultiClassNMS keeps and suppresses many boxes.
        spread_score_channels([rpn_head.rpn_rois_score], slice(None), lambda: model(*probe), mean=0.0, std=2.0)
        for layer in score_layers:
            spread_linear_outputs(layer, slice(None), lambda: model(*probe), std=3.0)
        if name == "mask_rcnn":
            # Mask logits spread to std 4: few pasted pixels sit near the 0.5 threshold.
            spread_score_channels([mask_head.mask_fcn_logits], slice(None), lambda: model(*probe), mean=0.0,
                                  std=4.0)
        out = model(*probe)
        print(f"{name}: {int(out[1].numpy().sum())} boxes kept by NMS on a random image", file=sys.stderr)

    model._real_zoo_calibrate = calibrate
    return model, specs


def spread_linear_logits(layers, probe, mean: float, std: float) -> None:
    """spread_score_channels for Linear score heads (Paddle's Linear weight is [in, out]: the output channels are its
    columns): every output of each layer gets `mean` and `std` on the probe input."""
    import paddle

    seen = {}

    def record(k):
        def hook(layer, inputs, output):
            seen[k] = output.numpy()
        return hook

    hooks = [layer.register_forward_post_hook(record(k)) for k, layer in enumerate(layers)]
    with paddle.no_grad():
        probe()
    for hook in hooks:
        hook.remove()
    for k, layer in enumerate(layers):
        logits = seen[k]
        factor = std / max(float(logits.std()), 1e-6)
        weight, bias = layer.weight.numpy(), layer.bias.numpy()
        layer.weight.set_value(paddle.to_tensor((weight * factor).astype(weight.dtype)))
        layer.bias.set_value(paddle.to_tensor(((bias - float(logits.mean())) * factor + mean).astype(bias.dtype)))


def calibrate_frozen_batch_norms(model, make_batch, forward) -> None:
    """calibrate_batch_norms for batch norms built frozen (ppdet's ResNet with freeze_norm: use_global_stats=True,
    which reads the running statistics even in train mode): unfrozen for the calibration forwards, frozen again
    after, so the export keeps the configuration's frozen norms with realistic statistics."""
    frozen = [layer for layer in model.sublayers() if _is_batch_norm(layer) and layer._use_global_stats]
    for layer in frozen:
        layer._use_global_stats = None
    calibrate_batch_norms(model, make_batch, forward)
    for layer in frozen:
        layer._use_global_stats = True



def _ppdet_transformers_for_paddle3(modules=("transformers.deformable_transformer",
                                              "transformers.dino_transformer")):
    """ppdet 2.6's deformable and DINO transformers build each level's spatial shape as
    `paddle.concat([h, w])` of `bs, _, h, w = paddle.shape(src)`: in Paddle 2.4 the elements of a 1-D tensor were
    1-D, in Paddle 3 they are 0-D and concat refuses them ("The axis is expected to be in range of [0, 0)").
    Later PaddleDetection releases build the same [2] tensor; here the modules named see a `paddle` whose concat
    takes 0-D parts as 1-element ones (everything else is Paddle's own)."""
    import paddle

    class PaddleWithShapeElements(types.ModuleType):
        def __getattr__(self, attribute):
            return getattr(paddle, attribute)

        @staticmethod
        def concat(x, axis=0, name=None):
            return paddle.concat([part.reshape([1]) if len(part.shape) == 0 else part for part in x], axis, name)

    shim = PaddleWithShapeElements("paddle")
    for module in modules:
        _ppdet(module).paddle = shim


def _paddle2_mixed_arithmetic() -> None:
    """Paddle 2.4's operators took a float tensor and an integer one and cast the other operand (math_op_patch's
    binary operators); Paddle 3 refuses them ("Type promotion only support calculations between floating-point
    numbers"). ppdet 2.6's transformers rely on it: they divide sampling offsets by the int64 spatial shapes and
    scale reference points by them. While building, the arithmetic operators of tensors (dygraph) and values
    (to_static) cast the integer operand to the float operand's dtype, which the exported program then records
    as a cast."""
    import paddle

    names = ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__", "__rtruediv__")
    for kind in (paddle.Tensor, paddle.pir.Value):
        for method in names:
            original = getattr(kind, method)
            if getattr(original, "_real_zoo_mixed", False):
                continue

            def operator(x, y, _original=original):
                if isinstance(y, (paddle.Tensor, paddle.pir.Value)) and x.dtype != y.dtype:
                    if x.is_floating_point() and not y.is_floating_point():
                        y = y.astype(x.dtype)
                    elif y.is_floating_point() and not x.is_floating_point():
                        x = x.astype(y.dtype)
                return _original(x, y)

            operator._real_zoo_mixed = True
            setattr(kind, method, operator)

def build_detr(name: str):
    """ppdet 2.6's DETR architecture with its transformers, each with its reference config at a 320 px eval size:
    Deformable DETR (deformable_detr_r50_1x_coco.yml: ResNet50 returning C3-C5, DeformableTransformer with 4
    levels, 6 + 6 layers, 300 queries, DeformableDETRHead, DETRBBoxPostProcess with focal-loss top-100) and DINO
    (dino_r50_4scale_1x_coco.yml: the same backbone, DINOTransformer with 4 levels, 6 + 6 layers, 900 queries
    picked by the encoder's top-k, DINOHead, DETRBBoxPostProcess top-300). Exported as ppdet exports DETRs:
    im_shape, image, scale_factor with a fixed image size (tools/export_model.py)."""
    import paddle

    _static_transpose_pads_like_dygraph()
    _ppdet_transformers_for_paddle3()
    _paddle2_mixed_arithmetic()
    size = 320
    backbone = _ppdet("backbones.resnet").ResNet(depth=50, norm_type="bn", freeze_at=0, return_idx=[1, 2, 3],
                                                 lr_mult_list=[0.0, 0.1, 0.1, 0.1], num_stages=4)
    channels = [i.channels for i in backbone.out_shape]
    head_module = _ppdet("heads.detr_head")
    post_process = _ppdet("post_process").DETRBBoxPostProcess
    if name == "deformable_detr":
        transformer = _ppdet("transformers.deformable_transformer").DeformableTransformer(
            num_queries=300, position_embed_type="sine", backbone_num_channels=channels, num_feature_levels=4,
            num_encoder_points=4, num_decoder_points=4, hidden_dim=256, nhead=8, num_encoder_layers=6,
            num_decoder_layers=6, dim_feedforward=1024, dropout=0.1, activation="relu")
        head = head_module.DeformableDETRHead(num_classes=80, hidden_dim=256, nhead=8, num_mlp_layers=3, loss=None)
        post = post_process(num_classes=80, num_top_queries=100, use_focal_loss=True)
        score_layers = [head.score_head]
    elif name == "dino":
        transformer = _ppdet("transformers.dino_transformer").DINOTransformer(
            num_classes=80, hidden_dim=256, num_queries=900, position_embed_type="sine",
            backbone_feat_channels=channels, num_levels=4, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
            dim_feedforward=2048, dropout=0.0, activation="relu", pe_temperature=20, pe_offset=0.0,
            num_denoising=100, label_noise_ratio=0.5, box_noise_scale=1.0, learnt_init_query=True)
        head = head_module.DINOHead(loss=None)
        post = post_process(num_classes=80, num_top_queries=300, use_focal_loss=True)
        # The encoder's score head picks the 900 queries (a top-k), the last decoder layer's scores the output.
        score_layers = [transformer.enc_score_head, transformer.dec_score_head[-1]]
    else:
        raise AssertionError(name)
    net = _ppdet("architectures.detr").DETR(backbone, transformer, head, post)
    model = _ppdet_export_with_im_shape(net)
    specs = _detection_specs_with_im_shape(size)

    def calibrate(rng):
        def batch():
            return [paddle.to_tensor(s.sample(rng, batch=2)) for s in specs]

        calibrate_frozen_batch_norms(model, batch, lambda inputs: model(*inputs))
        probe = [paddle.to_tensor(s.sample(rng)) for s in specs]
        # Class logits of std 2 around the prior's -4.6: the top-k over queries x 80 classes then picks from a
        # spread tail (distinct scores) rather than from near-equal ones around the prior probability.
        spread_linear_logits(score_layers, lambda: model(*probe), mean=-4.6, std=2.0)
        bbox, _ = model(*probe)
        scores = np.sort(bbox.numpy()[:, 1])[::-1]
        print(f"{name}: top-k scores {scores[0]:.4f} .. {scores[-1]:.4f}, smallest gap "
              f"{float(np.min(-np.diff(scores))):.2e}", file=sys.stderr)

    model._real_zoo_calibrate = calibrate
    return model, specs



def build_yolox(name: str):
    """YOLOX-s (yolox_s_300e_coco.yml: CSPDarkNet arch X with depth 0.33 and width 0.50, YOLOCSPPAN, YOLOXHead with
    sqrt(class x objectness) scores and multiclass_nms3 at threshold 0.001, top 10000, keep 1000, IoU 0.65) at a
    320 px eval size instead of 640. Exported with image and scale_factor: YOLOX hands im_shape to its
    post-processing, which reads no im_shape, so ppdet's export prunes it (tools/export_model.py's
    _prune_input_spec)."""
    import paddle

    size = 320
    _ppdet_nms_for_pir()
    width, depth = 0.50, 0.33
    backbone = _ppdet("backbones.csp_darknet").CSPDarkNet(arch="X", depth_mult=depth, width_mult=width,
                                                          depthwise=False, act="silu", return_idx=[2, 3, 4])
    neck = _ppdet("necks.yolo_fpn").YOLOCSPPAN(depth_mult=depth, in_channels=[i.channels for i in backbone.out_shape],
                                               depthwise=False, act="silu")
    nms = _ppdet("layers").MultiClassNMS(nms_top_k=10000, keep_top_k=1000, score_threshold=0.001,
                                         nms_threshold=0.65)
    head = _ppdet("heads.yolo_head").YOLOXHead(num_classes=80, width_mult=width, depthwise=False,
                                               in_channels=[i.channels for i in neck.out_shape], l1_epoch=285,
                                               act="silu", nms=nms)
    net = _ppdet("architectures.yolox").YOLOX(backbone, neck, head, input_size=[size, size])

    class DetectionExport(paddle.nn.Layer):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, image, scale_factor):
            out = self.net({"im_shape": None, "image": image, "scale_factor": scale_factor})
            return out["bbox"], out["bbox_num"]

    model = DetectionExport(net)
    specs = _detection_specs(size)

    def calibrate(rng):
        def batch():
            return [paddle.to_tensor(s.sample(rng, batch=2)) for s in specs]

        calibrate_batch_norms(model, batch, lambda inputs: model(*inputs))
        probe = [paddle.to_tensor(s.sample(rng)) for s in specs]
        # Scores are sqrt(sigmoid(class) * sigmoid(objectness)) against a 0.001 threshold: class logits around -13
        # (std 1.5) and objectness around -4 (std 1) let a few percent of the 2100 x 80 candidates through, tens
        # of boxes per class for NMS.
        spread_score_channels([branch[-1] for branch in head.conv_cls], slice(0, 80), lambda: model(*probe),
                              mean=-13.0, std=1.5)
        spread_score_channels([branch[-1] for branch in head.conv_reg], [4], lambda: model(*probe), mean=-4.0,
                              std=1.0)
        _, bbox_num = model(*probe)
        print(f"{name}: {int(bbox_num.numpy().sum())} boxes kept by NMS on a random image", file=sys.stderr)

    model._real_zoo_calibrate = calibrate
    return model, specs

def _ppdet_resnet50_fpn(return_idx, **fpn):
    """ppdet's ResNet50 (variant b) + FPN of the SOLOv2, FCOS and RetinaNet configs. Their `freeze_at: 0` and
    frozen norms only stop gradients; freeze_norm=False keeps the batch norms trainable so that
    calibrate_batch_norms can move their statistics (inference is the same op either way)."""
    backbone = _ppdet("backbones.resnet").ResNet(depth=50, variant="b", norm_type="bn", freeze_at=-1,
                                                 freeze_norm=False, return_idx=return_idx, num_stages=4)
    neck = _ppdet("necks.fpn").FPN(in_channels=[i.channels for i in backbone.out_shape], out_channel=256, **fpn)
    return backbone, neck


def _recompile_method(owner, method: str, replacements: dict) -> None:
    """Replace `owner.method` by its own source with each of `replacements` (old text -> new text, every old text
    required to be there), compiled in the module that defines it (at its original line numbers)."""
    import inspect
    import textwrap

    function = getattr(owner, method)
    if getattr(function, "_real_zoo_patched", False):
        return
    lines, first_line = inspect.getsourcelines(function)
    source = textwrap.dedent("".join(lines))
    for old, new in replacements.items():
        if old not in source:
            raise SystemExit(f"{owner.__name__}.{method} no longer contains {old!r}: revisit this patch")
        source = source.replace(old, new)
    # Compiled under a file name of its own whose text linecache holds: paddle.jit.to_static re-reads a function's
    # source (inspect.getsource), which must give the patched text, not the original file's lines.
    filename = f"<real-zoo patch of {inspect.getsourcefile(function)}>"
    text = "\n" * (first_line - 1) + source
    linecache.cache[filename] = (len(text), None, text.splitlines(keepends=True), filename)
    module = sys.modules[owner.__module__]
    namespace = {}
    exec(compile(text, filename, "exec"), vars(module), namespace)
    namespace[method]._real_zoo_patched = True
    setattr(owner, method, namespace[method])


def _ppdet_solov2_for_paddle3() -> None:
    """ppdet 2.6's SOLOv2 post-processing was written for Paddle 2, where indexing a 1-D tensor with an integer
    kept a [1] tensor; Paddle 3 gives a 0-D one, which cannot be indexed again (`cast(im_shape[0], 'int32')[0]`)
    nor concatenated with 1-D indices (`concat([keep, shape(x)[0] - 1])`). Use the spellings later PaddleDetection
    releases use for Paddle 3: the 0-D height and width as they are, and `shape(x)[0:1]` (a [1] tensor) where a
    count is appended to an index list. Paddle 3 also refuses to compare float32 with int32 (no type promotion
    between them): the mask areas are compared with the int32 strides cast to float32. The rest of the source is
    ppdet's."""
    heads = _ppdet("heads.solov2_head")
    _recompile_method(heads.SOLOv2Head, "get_seg_single", {
        "h = paddle.cast(im_shape[0], 'int32')[0]": "h = paddle.cast(im_shape[0], 'int32')",
        "w = paddle.cast(im_shape[1], 'int32')[0]": "w = paddle.cast(im_shape[1], 'int32')",
        "paddle.shape(kernel_preds)[0]": "paddle.shape(kernel_preds)[0:1]",
        "paddle.shape(sum_masks)[0]": "paddle.shape(sum_masks)[0:1]",
        "sum_masks > strides": "sum_masks > paddle.cast(strides, 'float32')"})
    _recompile_method(_ppdet("layers").MaskMatrixNMS, "__call__", {
        "paddle.shape(cate_scores)[0] - 1": "paddle.shape(cate_scores)[0:1] - 1"})


def build_solov2(name: str):
    """SOLOv2 (solov2_r50_fpn_1x_coco.yml: ResNet50 + FPN P2-P6, SOLOv2Head with 5 grids of 40-12 cells, 512
    feature channels and 4 stacked GN convs, SOLOv2MaskHead P2-P5, and its post-processing in paddle ops: score
    threshold and nonzero, a dynamic 1x1 conv of the mask features by the kept kernels, stride filter, Matrix NMS
    on the masks (MaskMatrixNMS, gaussian), masks resized to the image) at 320 px, batch 1 (get_prediction decodes
    image 0 only). Exported as ppdet exports it: inputs im_shape, image, scale_factor; outputs the masks (uint8
    [N, 320, 320]), their labels, their scores and their count."""
    import paddle

    size = 320
    _ppdet_solov2_for_paddle3()
    backbone, neck = _ppdet_resnet50_fpn([0, 1, 2, 3])
    heads = _ppdet("heads.solov2_head")
    head = heads.SOLOv2Head(num_classes=80, in_channels=256, seg_feat_channels=512, stacked_convs=4,
                            num_grids=[40, 36, 24, 16, 12], kernel_out_channels=256,
                            mask_nms=_ppdet("layers").MaskMatrixNMS(pre_nms_top_n=500, post_nms_top_n=100))
    mask_head = heads.SOLOv2MaskHead(in_channels=256, mid_channels=128, out_channels=256, start_level=0,
                                     end_level=3)
    net = _ppdet("architectures.solov2").SOLOv2(backbone, head, mask_head, neck)

    class SegmentationExport(paddle.nn.Layer):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, im_shape, image, scale_factor):
            out = self.net({"im_shape": im_shape, "image": image, "scale_factor": scale_factor})
            return out["segm"], out["cate_label"], out["cate_score"], out["bbox_num"]

    model = SegmentationExport(net)
    specs = _detection_specs_with_im_shape(size)

    def calibrate(rng):
        def batch():
            return [paddle.to_tensor(s.sample(rng, batch=1)) for s in specs]

        calibrate_batch_norms(model, batch, lambda inputs: model(*inputs))
        probe = [paddle.to_tensor(s.sample(rng)) for s in specs]
        # Category logits: sigmoid past the 0.1 threshold for a few hundred grid cells and classes after the
        # points NMS, so that Matrix NMS decays and drops many of them.
        spread_class_logits([head.solo_cate], 80, lambda: model(*probe), mean=-5.5, std=1.2)
        # Mask kernels: the 0.01-std initialisation gives mask logits near 0, every pixel at the 0.5 threshold;
        # scale them so the mask logits (kernel . mask features) have std 4: masks decided away from the threshold.
        seen = {}
        hooks = [mask_head.register_forward_post_hook(lambda layer, i, o: seen.__setitem__("features", o.numpy())),
                 head.solo_kernel.register_forward_post_hook(
                     lambda layer, i, o: seen.setdefault("kernels", []).append(o.numpy()))]
        with paddle.no_grad():
            model(*probe)
        for hook in hooks:
            hook.remove()
        kernels = np.concatenate([k[0].reshape(k.shape[1], -1) for k in seen["kernels"]], axis=1)
        logits = np.einsum("kn,khw->nhw", kernels, seen["features"][0])
        factor = 4.0 / max(float(logits.std()), 1e-6)
        for param in (head.solo_kernel.weight, head.solo_kernel.bias):
            param.set_value(paddle.to_tensor((param.numpy() * factor).astype("float32")))
        masks, labels, scores, count = model(*probe)
        print(f"{name}: {int(count.numpy())} masks kept by Matrix NMS on a random image (scores "
              f"{float(scores.numpy().min()):.3f}-{float(scores.numpy().max()):.3f})", file=sys.stderr)

    model._real_zoo_calibrate = calibrate
    return model, specs


def build_fcos(name: str):
    """FCOS (fcos_r50_fpn_1x_coco.yml: ResNet50 C3-C5, FPN with two extra convs (P3-P7), FCOSHead with 4 GN convs per
    tower, centerness on the regression branch, normalised regression targets, MultiClassNMS score 0.025, IoU 0.6,
    top 1000 / keep 100) at 320 px, exported as ppdet exports it: it reads no im_shape, so the inputs are image and
    scale_factor."""
    import paddle

    size = 320
    nms_module = _ppdet("layers")
    _ppdet_nms_for_pir()
    backbone, neck = _ppdet_resnet50_fpn([1, 2, 3], spatial_scales=[0.125, 0.0625, 0.03125], extra_stage=2,
                                         has_extra_convs=True, use_c5=False)
    fcos = _ppdet("heads.fcos_head")
    feat = fcos.FCOSFeat(feat_in=256, feat_out=256, num_convs=4, norm_type="gn", use_dcn=False)
    head = fcos.FCOSHead(num_classes=80, fcos_feat=feat, fpn_stride=[8, 16, 32, 64, 128], prior_prob=0.01,
                         norm_reg_targets=True, centerness_on_reg=True, num_shift=0.5, fcos_loss=None,
                         nms=nms_module.MultiClassNMS(nms_top_k=1000, keep_top_k=100, score_threshold=0.025,
                                                      nms_threshold=0.6))
    net = _ppdet("architectures.fcos").FCOS(backbone, neck, head)
    # The centerness conv starts at std 0.01 (every centerness 0.5): at He scale it varies across locations.
    rescale_to_he_init(head.fcos_head_centerness)
    model = detection_export(net)
    specs = _detection_specs(size)

    def calibrate(rng):
        def batch():
            return [paddle.to_tensor(s.sample(rng, batch=2)) for s in specs]

        calibrate_batch_norms(model, batch, lambda inputs: model(*inputs))
        probe = [paddle.to_tensor(s.sample(rng)) for s in specs]
        # sigmoid(class) * sigmoid(centerness) past 0.025 for several percent of the 2134 locations x 80 classes.
        spread_class_logits([head.fcos_head_cls], 80, lambda: model(*probe), mean=-5.0, std=1.5)
        # The 4 distances to the box sides (in strides, before the relu): the 0.01-std initialisation makes every
        # box a point at its location, and a zero-mean spread would clip half of them to 0 (boxes of no area,
        # which a trained FCOS never predicts); around 1.5 strides (std 0.5) the boxes overlap their neighbours'.
        spread_score_channels([head.fcos_head_reg], slice(0, 4), lambda: model(*probe), mean=1.5, std=0.5)
        _, bbox_num = model(*probe)
        print(f"{name}: {int(bbox_num.numpy().sum())} boxes kept by NMS on a random image", file=sys.stderr)

    model._real_zoo_calibrate = calibrate
    return model, specs


def build_retinanet(name: str):
    """RetinaNet (retinanet_r50_fpn_1x_coco.yml: ResNet50 C3-C5, FPN with two extra convs (P3-P7), RetinaHead with
    4-conv towers without norm, 9 anchors per location (RetinaAnchorGenerator), the best 1000 anchors per level,
    delta2bbox, MultiClassNMS score 0.05, IoU 0.5, top 1000 / keep 100) at 320 px, exported with ppdet's inputs
    image and scale_factor (see DetectionExport). Batch 1 declared: RetinaHead.decode loops in Python over
    `cls_logits[0].shape[0]` images, which a free batch (-1) would make no image at all."""
    import paddle

    size = 320
    nms_module = _ppdet("layers")
    _ppdet_nms_for_pir()
    backbone, neck = _ppdet_resnet50_fpn([1, 2, 3], spatial_scales=[0.125, 0.0625, 0.03125], extra_stage=2,
                                         has_extra_convs=True, use_c5=False)
    retina = _ppdet("heads.retina_head")
    feat = retina.RetinaFeat(feat_in=256, feat_out=256, num_convs=4, norm_type=None, use_dcn=False)
    anchors = _ppdet("proposal_generator.anchor_generator").RetinaAnchorGenerator(
        octave_base_scale=4, scales_per_octave=3, aspect_ratios=[0.5, 1.0, 2.0],
        strides=[8.0, 16.0, 32.0, 64.0, 128.0])
    head = retina.RetinaHead(num_classes=80, conv_feat=feat, anchor_generator=anchors, bbox_assigner=None,
                             loss_class=None, loss_bbox=None, prior_prob=0.01, nms_pre=1000,
                             nms=nms_module.MultiClassNMS(nms_top_k=1000, keep_top_k=100, score_threshold=0.05,
                                                          nms_threshold=0.5))
    net = _ppdet("architectures.retinanet").RetinaNet(backbone, neck, head)
    # The towers have no norm and start at std 0.01 (the features would fade to nothing through 4 convs; see
    # rescale_to_he_init): at He scale they keep their magnitude.
    rescale_to_he_init(feat)

    class DetectionExport(paddle.nn.Layer):
        """RetinaNet passes im_shape to its post-processing, which never reads it: ppdet's export prunes that input
        (tools/export_model.py's _prune_input_spec), and so does this one (the image's own size stands in)."""

        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, image, scale_factor):
            im_shape = paddle.cast(paddle.shape(image)[2:], "float32").unsqueeze(0)
            out = self.net({"im_shape": im_shape, "image": image, "scale_factor": scale_factor})
            return out["bbox"], out["bbox_num"]

    model = DetectionExport(net)
    specs = [Spec("image", [1, 3, size, size], [1, 3, size, size]),
             Spec("scale_factor", [1, 2], [1, 2], low=1.0, high=1.0)]

    def calibrate(rng):
        # Nothing to calibrate but the backbone's batch norms, on single images (the declared batch).
        calibrate_batch_norms(model, lambda: [paddle.to_tensor(s.sample(rng)) for s in specs],
                              lambda inputs: model(*inputs))
        probe = [paddle.to_tensor(s.sample(rng)) for s in specs]
        # 80 classes x 9 anchors: sigmoid past 0.05 for several percent of the best anchors' classes.
        spread_class_logits([head.retina_cls], 80 * 9, lambda: model(*probe), mean=-5.0, std=1.5)
        # The box deltas: at std 0.01 every box is its anchor; spread (std 0.5) they move and resize.
        spread_score_channels([head.retina_reg], slice(0, 4 * 9), lambda: model(*probe), mean=0.0, std=0.5)
        _, bbox_num = model(*probe)
        print(f"{name}: {int(bbox_num.numpy().sum())} boxes kept by NMS on a random image", file=sys.stderr)

    model._real_zoo_calibrate = calibrate
    return model, specs


def top_down_keypoint_export(backbone, width: int):
    """ppdet's TopDownHRNet (17 joints, `width` channels into its head) on `backbone`, exported as ppdet exports it:
    the architecture's deploy mode (heatmaps and their argmax) with image [-1, 3, 128, 96]; (model, specs)."""
    import paddle

    net = _ppdet("architectures.keypoint_hrnet").TopDownHRNet(width=width, num_joints=17, backbone=backbone,
                                                              loss=None, use_dark=False)
    net.deploy = True

    class KeypointExport(paddle.nn.Layer):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, image):
            return tuple(self.net({"image": image})["keypoint"])  # (heatmaps, argmax) in deploy mode

    return KeypointExport(net), [Spec("image", [-1, 3, 128, 96], [1, 3, 128, 96])]


def build_tinypose(name: str):
    """PP-TinyPose 128x96 (tinypose_128x96.yml: LiteHRNet wider_naive, TopDownHRNet width 40, 17 joints)."""
    backbone = _ppdet("backbones.lite_hrnet").LiteHRNet(network_type="wider_naive", freeze_at=-1,
                                                        freeze_norm=False, return_idx=[0])
    return top_down_keypoint_export(backbone, 40)


def build_ocr_more(name: str):
    """PaddleX's ports of PP-OCRv5 server det (HGNetV2 large, [-1, 3, -1, -1]) and rec (SVTR on HGNetV2,
    [-1, 3, 48, -1]), PP-LCNet_x0_25_textline_ori ([-1, 3, 80, 160], softmax) and SLANet (PP-LCNet, CSP-PAN, the
    autoregressive attention-GRU head, each step fed the one-hot argmax of the last), each with its released
    configuration; SLANet's max_text_length is cut from 500 to 24 steps (the loop's length, not its body,
    changes)."""
    import paddle

    released = _paddlex_released_configs().MODEL_CONFIGS
    if name == "ppocrv5_server_det":
        arch = _paddlex("text_detection", "pp_ocrv5_server_det")
        config = arch.PPOCRV5ServerDetConfig(**released["PP-OCRv5_server_det"])
        return architecture_export(arch.PPOCRV5ServerDet(config)), [Spec("x", [-1, 3, -1, -1], [1, 3, 256, 256])]
    if name == "ppocrv5_server_rec":
        arch = _paddlex("text_recognition", "pp_ocrv5_server_rec")
        config = arch.PPOCRV5ServerRecConfig(**released["PP-OCRv5_server_rec"])
        return architecture_export(arch.PPOCRV5ServerRec(config)), [Spec("x", [-1, 3, 48, -1], [1, 3, 48, 160])]
    if name == "textline_ori":
        arch = _paddlex("image_classification", "pplcnet")
        config = _paddlex("image_classification", "_config").PPLCNetConfig(
            **released["PP-LCNet_x0_25_textline_ori"])
        net = arch.PPLCNet(config)

        class ClassifierExport(paddle.nn.Layer):
            """PPLCNet.forward without its numpy round trip: the same layers, then the softmax it ends with."""

            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, x):
                n = self.net
                hidden = n.act_fn(n.last_convolution(n.avg_pool(n.encoder(x))))
                hidden = n.flatten(hidden * (1 - n.hidden_dropout_prob))
                return n.head(hidden).softmax()

        return ClassifierExport(net), [Spec("x", [-1, 3, 80, 160], [1, 3, 80, 160])]
    if name == "slanet":
        # slanet.py imports SLANeXt's cells, whose module imports doc_vlm's GOT-OCR encoder: that package's
        # __init__ (training-side dataset checkers) stays a shell too.
        models = "paddlex.inference.models"
        import_architecture(_site_dir(), f"{models}.doc_vlm.modeling.GOT_ocr_2_0", (
            "paddlex", "paddlex.inference", models, f"{models}.doc_vlm", f"{models}.doc_vlm.modeling"))
        arch = _paddlex("table_structure_recognition", "slanet")
        config = _paddlex("table_structure_recognition", "_config_slanet").SLANetConfig(
            **dict(released["SLANet"], max_text_length=24))
        net = arch.SLANet(config)

        class TableExport(paddle.nn.Layer):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, x):
                # SLANetSLAHead.forward without its early exit (a Python `break` on a tensor, which to_static
                # refuses): PaddleOCR's SLAHead, which PaddleOCR exports, runs all max_text_length + 1 steps.
                head, hidden = self.net.head, self.net.backbone(x)
                config = head.config
                features = paddle.zeros([hidden.shape[0], config.hidden_size], dtype="float32")
                predicted = paddle.zeros([hidden.shape[0]], dtype="int64")
                steps = []
                for _ in range(config.max_text_length + 1):
                    embedding = paddle.nn.functional.one_hot(predicted, config.out_channels).astype("float32")
                    features, _ = head.structure_attention_cell(features, hidden, embedding)
                    step = head.structure_generator(features)
                    predicted = step.argmax(axis=1)
                    steps.append(step)
                return paddle.nn.functional.softmax(paddle.stack(steps, axis=1), axis=-1)

        # PaddleOCR exports SLANet at a fixed 488 px; 256 px keeps the test fast (the head reads any grid).
        return TableExport(net), [Spec("x", [-1, 3, 256, 256], [1, 3, 256, 256])]
    raise AssertionError(name)


NLP_SEQ_LEN = 32
# Tiny bodies of the released configurations' families (vocabularies kept: they size the embedding gathers).
BERT_CONFIG = {"vocab_size": 30522, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
               "intermediate_size": 512, "max_position_embeddings": 512, "type_vocab_size": 2}
GPT_CONFIG = {"vocab_size": 1000, "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 512, "max_position_embeddings": 256, "hidden_dropout_prob": 0.0,
              "attention_probs_dropout_prob": 0.0}


def _paddlenlp(module: str):
    root = _site_dir()
    import_architecture(root, "paddlenlp.data", ("paddlenlp",))
    return import_architecture(root, f"paddlenlp.transformers.{module}", ("paddlenlp",))


def build_nlp_more(name: str):
    """paddlenlp: UIE (ERNIE-3.0 with start/end pointer heads; Taskflow exports input_ids, token_type_ids,
    position_ids and attention_mask as int64 [-1, -1]), BertForSequenceClassification (input_ids,
    token_type_ids) and GPTForCausalLM (input_ids; the logits of a fixed-length forward, no cache)."""
    import paddle

    ids = Spec("input_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 1, 1000)
    if name == "uie":
        config = _paddlenlp("ernie.configuration").ErnieConfig(**ERNIE_CONFIG)
        net = _paddlenlp("ernie.modeling").UIE(config)

        class UIEExport(paddle.nn.Layer):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, input_ids, token_type_ids, position_ids, attention_mask):
                return self.net(input_ids, token_type_ids=token_type_ids, position_ids=position_ids,
                                attention_mask=attention_mask, return_dict=False)

        return UIEExport(net), [
            Spec("input_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 1, ERNIE_CONFIG["vocab_size"]),
            Spec("token_type_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 0, 2),
            Spec("position_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 0, NLP_SEQ_LEN),
            # 1 on the tokens, 0 on the padding: a random mask masks some positions.
            Spec("attention_mask", [-1, -1], [1, NLP_SEQ_LEN], "int64", 0, 2)]
    if name == "bert_seq_cls":
        config = _paddlenlp("bert.configuration").BertConfig(num_labels=3, **BERT_CONFIG)
        net = _paddlenlp("bert.modeling").BertForSequenceClassification(config)

        class BertExport(paddle.nn.Layer):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, input_ids, token_type_ids):
                return self.net(input_ids, token_type_ids=token_type_ids, return_dict=False)

        return BertExport(net), [
            Spec("input_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 1, BERT_CONFIG["vocab_size"]),
            Spec("token_type_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 0, 2)]
    if name == "gpt_lm":
        config = _paddlenlp("gpt.configuration").GPTConfig(**GPT_CONFIG)
        net = _paddlenlp("gpt.modeling").GPTForCausalLM(config)

        class GPTExport(paddle.nn.Layer):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, input_ids):
                return self.net(input_ids, use_cache=False, return_dict=False)

        return GPTExport(net), [ids]
    if name == "electra_token_cls":
        config = _paddlenlp("electra.configuration").ElectraConfig(
            num_labels=5, vocab_size=22608, embedding_size=64, **{k: v for k, v in BERT_CONFIG.items()
                                                                  if k != "vocab_size"})
        net = _paddlenlp("electra.modeling").ElectraForTokenClassification(config)

        class ElectraExport(paddle.nn.Layer):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, input_ids, token_type_ids):
                return self.net(input_ids, token_type_ids=token_type_ids, return_dict=False)

        return ElectraExport(net), [
            Spec("input_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 1, 22608),
            Spec("token_type_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 0, 2)]
    if name == "ernie_m":
        config = _paddlenlp("ernie_m.configuration").ErnieMConfig(
            num_labels=3, vocab_size=250002, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=512)
        net = _paddlenlp("ernie_m.modeling").ErnieMForSequenceClassification(config)

        class ErnieMExport(paddle.nn.Layer):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, input_ids):
                return self.net(input_ids, return_dict=False)

        # ERNIE-M's pad id is 1: ids from 2 up, so no position is read as padding.
        return ErnieMExport(net), [Spec("input_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 2, 250002)]
    if name == "bigru_crf":
        # Taskflow's lexical_analysis: BiGruCrf(word_emb_dim 128, hidden 128, LAC's 20940 words, 57 tags),
        # exported with token_ids int64 [-1, -1] and length int64 [-1]; the output is the Viterbi path.
        root = _site_dir()
        import_architecture(root, "paddlenlp.data", ("paddlenlp",))
        lac = import_architecture(root, "paddlenlp.taskflow.models.lexical_analysis_model",
                                  ("paddlenlp", "paddlenlp.taskflow", "paddlenlp.taskflow.models"))
        net = lac.BiGruCrf(128, 128, 20940, 57)

        class LacExport(paddle.nn.Layer):
            def __init__(self, net):
                super().__init__()
                self.net = net

            def forward(self, token_ids, length):
                return self.net(token_ids, length)

        # Every row is NLP_SEQ_LEN tokens long (the test feeds one length: low == high).
        return LacExport(net), [Spec("token_ids", [-1, -1], [2, NLP_SEQ_LEN], "int64", 0, 20940),
                                Spec("length", [-1], [2], "int64", NLP_SEQ_LEN, NLP_SEQ_LEN + 1)]
    raise AssertionError(name)


# ------------------------------------------------------------------------------------------------------------
# NLP families the zoo had not seen: Fourier token mixing, rotary positions, disentangled relative attention.

def _sequence_classifier_export(net, second: str):
    """A paddlenlp sequence classifier called with input_ids and the keyword argument `second` (to_static needs the
    forward's arguments spelled out)."""
    import paddle

    class SequenceClassifierExport(paddle.nn.Layer):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, input_ids, second_input):
            return self.net(input_ids, **{second: second_input}, return_dict=False)

    return SequenceClassifierExport(net)


def build_nlp_wider(name: str):
    """paddlenlp: FNetForSequenceClassification (fnet-base's family: each layer mixes tokens by the real part of
    an n-dimensional FFT), RoFormerForSequenceClassification (roformer-chinese-small's family: rotary position
    embeddings on queries and keys) and DebertaV2ForSequenceClassification (deberta-v3-base's family: disentangled
    content-to-position and position-to-content attention over log-bucketed relative positions, no absolute
    position embedding), tiny bodies of 2 layers of width 128; input_ids and token_type_ids (attention_mask for
    DeBERTa-v3, which has no token types) int64 [-1, -1] as paddlenlp exports them. Also the ConvBERT (span-based
    dynamic convolution), ALBERT (shared layer weights) and MobileBERT (bottlenecks, stacked FFNs) classifiers."""
    if name == "fnet_seq_cls":  # fnet-base: vocabulary 32000, 4 token types, pad id 3
        config = _paddlenlp("fnet.configuration").FNetConfig(
            num_labels=3, vocab_size=32000, hidden_size=128, num_hidden_layers=2, intermediate_size=512,
            max_position_embeddings=512, type_vocab_size=4)
        net = _paddlenlp("fnet.modeling").FNetForSequenceClassification(config)
        return _sequence_classifier_export(net, "token_type_ids"), [
            Spec("input_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 4, 32000),
            Spec("token_type_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 0, 4)]
    if name == "roformer_seq_cls":  # roformer-chinese-small: vocabulary 50000, 2 token types
        config = _paddlenlp("roformer.configuration").RoFormerConfig(
            num_labels=3, vocab_size=50000, embedding_size=128, **{k: v for k, v in BERT_CONFIG.items()
                                                                   if k != "vocab_size"})
        net = _paddlenlp("roformer.modeling").RoFormerForSequenceClassification(config)
        return _sequence_classifier_export(net, "token_type_ids"), [
            Spec("input_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 1, 50000),
            Spec("token_type_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 0, 2)]
    if name == "deberta_v2_seq_cls":  # deberta-v3-base: vocabulary 128100, 256 position buckets, p2c|c2p
        config = _paddlenlp("deberta_v2.configuration").DebertaV2Config(
            num_labels=3, vocab_size=128100, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=512, max_position_embeddings=512, relative_attention=True, position_buckets=256,
            norm_rel_ebd="layer_norm", share_att_key=True, pos_att_type=["p2c", "c2p"], layer_norm_eps=1e-7,
            max_relative_positions=-1, position_biased_input=False, type_vocab_size=0)
        net = _paddlenlp("deberta_v2.modeling").DebertaV2ForSequenceClassification(config)
        return _sequence_classifier_export(net, "attention_mask"), [
            Spec("input_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 1, 128100),
            # 1 on the tokens, 0 on the padding: a random mask masks some positions.
            Spec("attention_mask", [-1, -1], [1, NLP_SEQ_LEN], "int64", 0, 2)]
    if name == "convbert_seq_cls":  # convbert-small: span-based dynamic convolution beside half the heads
        config = _paddlenlp("convbert.configuration").ConvBertConfig(
            num_labels=3, embedding_size=128, conv_kernel_size=9, head_ratio=2, num_groups=1, **BERT_CONFIG)
        net = _paddlenlp("convbert.modeling").ConvBertForSequenceClassification(config)
        return _sequence_classifier_export(net, "token_type_ids"), [
            Spec("input_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 1, BERT_CONFIG["vocab_size"]),
            Spec("token_type_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 0, 2)]
    if name == "albert_seq_cls":  # albert-base-v2: factorised embedding, one layer's weights shared by every layer
        config = _paddlenlp("albert.configuration").AlbertConfig(
            num_labels=3, vocab_size=30000, embedding_size=128, num_hidden_groups=1, inner_group_num=1,
            **{k: v for k, v in BERT_CONFIG.items() if k != "vocab_size"})
        net = _paddlenlp("albert.modeling").AlbertForSequenceClassification(config)
        return _sequence_classifier_export(net, "token_type_ids"), [
            Spec("input_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 1, 30000),
            Spec("token_type_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 0, 2)]
    if name == "mobilebert_seq_cls":  # mobilebert-uncased's body (bottlenecks, 4 stacked FFNs, no_norm) in 2 layers
        config = _paddlenlp("mobilebert.configuration").MobileBertConfig(num_labels=3, num_hidden_layers=2)
        net = _paddlenlp("mobilebert.modeling").MobileBertForSequenceClassification(config)
        return _sequence_classifier_export(net, "token_type_ids"), [
            Spec("input_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 1, 30522),
            Spec("token_type_ids", [-1, -1], [1, NLP_SEQ_LEN], "int64", 0, 2)]
    raise AssertionError(name)


def _ppdet_export_pruning_im_shape(net):
    """ppdet's export of an architecture that hands im_shape to a post-processing that never reads it (GFL, TTFNet):
    ppdet prunes that input (tools/export_model.py's _prune_input_spec), so the inputs are image and scale_factor and
    the image's own size stands in for im_shape (as RetinaNet's export)."""
    import paddle

    class DetectionExport(paddle.nn.Layer):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, image, scale_factor):
            im_shape = paddle.cast(paddle.shape(image)[2:], "float32").unsqueeze(0)
            out = self.net({"im_shape": im_shape, "image": image, "scale_factor": scale_factor})
            return out["bbox"], out["bbox_num"]

    return DetectionExport(net)


def build_dense_detector(name: str):
    """ppdet's ResNet50-FPN dense detectors with their reference configs at 320 px: GFL (gfl_r50_fpn_1x_coco.yml:
    FPN P3-P7 with extra convs, GFLHead on FCOSFeat with 4 GN convs per tower, each box side a distribution over 17
    bins whose expectation (Integral: softmax, then a matmul with [0..16]) is the distance, MultiClassNMS score 0.025,
    IoU 0.6, top 1000 / keep 100) and TOOD (tood_r50_fpn_1x_coco.yml: the same body, TOODHead's 6 shared GN convs,
    task decomposition by layer attention, the class probability map and the box offsets sampled by grid_sample,
    MultiClassNMS score 0.05, IoU 0.6, top 1000 / keep 100). GFL passes im_shape to a post-processing that never reads
    it (_ppdet_export_pruning_im_shape); TOOD clips its boxes to im_shape and
    loops over the batch in Python (`for i in range(len(pred_bboxes))`): exported with im_shape, image, scale_factor
    and batch 1."""
    import paddle

    size = 320
    nms_module = _ppdet("layers")
    _ppdet_nms_for_pir()
    backbone, neck = _ppdet_resnet50_fpn([1, 2, 3], spatial_scales=[0.125, 0.0625, 0.03125], extra_stage=2,
                                         has_extra_convs=True, use_c5=False)
    if name == "gfl":
        gfl = _ppdet("heads.gfl_head")
        losses = _ppdet("losses")
        feat = _ppdet("heads.fcos_head").FCOSFeat(feat_in=256, feat_out=256, num_convs=4, norm_type="gn",
                                                  use_dcn=False)
        head = gfl.GFLHead(conv_feat=feat, num_classes=80, fpn_stride=[8, 16, 32, 64, 128], prior_prob=0.01,
                           reg_max=16, loss_class=losses.QualityFocalLoss(use_sigmoid=True, beta=2.0,
                                                                          loss_weight=1.0),
                           loss_dfl=losses.DistributionFocalLoss(loss_weight=0.25),
                           loss_bbox=losses.GIoULoss(loss_weight=2.0),
                           nms=nms_module.MultiClassNMS(nms_top_k=1000, keep_top_k=100, score_threshold=0.025,
                                                        nms_threshold=0.6))
        net = _ppdet("architectures.gfl").GFL(backbone, neck, head)
        model = _ppdet_export_pruning_im_shape(net)
        specs = _detection_specs(size)
    elif name == "tood":
        # TOODHead._reg_grid_sample builds the grid's size as `paddle.concat([w, h])` of paddle.shape's elements:
        # the same Paddle 3 fix as the DETR transformers'.
        _ppdet_transformers_for_paddle3(("heads.tood_head",))
        head = _ppdet("heads.tood_head").TOODHead(
            num_classes=80, feat_channels=256, stacked_convs=6, fpn_strides=[8, 16, 32, 64, 128],
            grid_cell_scale=8, static_assigner_epoch=4, static_assigner=None, assigner=None,
            nms=nms_module.MultiClassNMS(nms_top_k=1000, keep_top_k=100, score_threshold=0.05, nms_threshold=0.6))
        net = _ppdet("architectures.tood").TOOD(backbone, neck, head)
        model = _ppdet_export_with_im_shape(net)
        specs = [Spec("im_shape", [1, 2], [1, 2], low=size, high=size),
                 Spec("image", [1, 3, size, size], [1, 3, size, size]),
                 Spec("scale_factor", [1, 2], [1, 2], low=1.0, high=1.0)]
    else:
        raise AssertionError(name)

    def calibrate(rng):
        def batch():
            return [paddle.to_tensor(s.sample(rng, batch=2 if name == "gfl" else 1)) for s in specs]

        calibrate_batch_norms(model, batch, lambda inputs: model(*inputs))
        probe = [paddle.to_tensor(s.sample(rng)) for s in specs]
        if name == "gfl":
            # sigmoid(class) past 0.025 for a few hundred of the 2134 locations x 80 classes: NMS keeps fewer than
            # its 100, so no near-tie decides which box makes the cut.
            spread_class_logits([head.gfl_head_cls], 80, lambda: model(*probe), mean=-7.6, std=1.5)
            # The 4 x 17 bin logits: at the 0.01-std initialisation every distribution is flat (every distance 8
            # strides); at std 1 each side's distribution, and so its expectation, differs by location.
            spread_score_channels([head.gfl_head_reg], slice(None), lambda: model(*probe), mean=0.0, std=1.0)
        else:
            # sqrt(sigmoid(class) * sigmoid(class probability)) past 0.05 for a few hundred candidates (NMS keeps
            # fewer than its 100, as GFL's).
            spread_class_logits([head.tood_cls], 80, lambda: model(*probe), mean=-9.0, std=1.5)
            spread_score_channels([head.cls_prob_conv2], slice(None), lambda: model(*probe), mean=-1.0, std=1.0)
            # exp() of the distances: around e^0.5 strides per side (std 0.5) instead of every box one stride wide.
            spread_score_channels([head.tood_reg], slice(None), lambda: model(*probe), mean=0.5, std=0.5)
        _, bbox_num = model(*probe)
        print(f"{name}: {int(bbox_num.numpy().sum())} boxes kept by NMS on a random image", file=sys.stderr)

    model._real_zoo_calibrate = calibrate
    return model, specs


def build_hrnet_pose(name: str):
    """Top-down HRNet-W32 (hrnet_w32_256x192.yml: HRNet width 32, TopDownHRNet with 17 joints) at 128x96 instead of
    256x192."""
    backbone = _ppdet("backbones.hrnet").HRNet(width=32, freeze_at=-1, freeze_norm=False, return_idx=[0])
    return top_down_keypoint_export(backbone, 32)


def build_higherhrnet(name: str):
    """HigherHRNet-W32 (higherhrnet_hrnet_w32_512.yml: HRNet width 32, HrHRNetHead with 17 joints and the 1/2-scale
    deconvolution branch, 30 people) at 256 px instead of 512, exported in ppdet's deploy mode: the heatmaps and
    tag maps upsampled to the image, and each joint's top 30 peaks (a position kept where the heatmap equals its
    5x5 max pool) with their indices; image [1, 3, 256, 256] (get_topk reshapes with N = 1)."""
    import paddle

    _paddle2_mixed_arithmetic()  # get_topk multiplies the heatmap by a bool mask (`heatmap == heatmap_maxpool`)
    backbone = _ppdet("backbones.hrnet").HRNet(width=32, freeze_at=-1, freeze_norm=False, return_idx=[0])
    head = _ppdet("heads.keypoint_hrhrnet_head").HrHRNetHead(num_joints=17, loss=None, swahr=False, width=32)
    net = _ppdet("architectures.keypoint_hrhrnet").HigherHRNet(
        backbone=backbone, hrhrnet_head=head, post_process=None, eval_flip=True,
        flip_perm=[0, 2, 1, 4, 3, 6, 5, 8, 7, 10, 9, 12, 11, 14, 13, 16, 15], max_num_people=30)
    net.deploy = True

    class KeypointExport(paddle.nn.Layer):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, image):
            return tuple(self.net({"image": image})["keypoint"])  # heatmap, tagmap, heat_k, inds_k

    return KeypointExport(net), [Spec("image", [1, 3, 256, 256], [1, 3, 256, 256])]


def build_ttfnet(name: str):
    """TTFNet (ttfnet_darknet53_1x_coco.yml: DarkNet53 C2-C5, TTFFPN planes 256/128/64 with 3/2/1 shortcuts,
    TTFHead's heatmap and box-size heads, TTFBox: a 3x3 max pool keeps the heatmap's peaks, top 100 of all classes,
    boxes from the sizes gathered at the peaks, a nonzero of the scores past 0.01) at 320 px, exported with image
    and scale_factor (TTFBox reads no im_shape) and batch 1: TTFBox loops in Python over `scale_factor.shape[0]`
    images, which a free batch (-1) would make no image at all."""
    import paddle

    size = 320
    backbone = _ppdet("backbones.darknet").DarkNet(depth=53, freeze_at=-1, return_idx=[1, 2, 3, 4],
                                                   norm_type="bn", norm_decay=0.0004)
    neck = _ppdet("necks.ttf_fpn").TTFFPN(in_channels=[i.channels for i in backbone.out_shape],
                                          planes=[256, 128, 64], shortcut_num=[3, 2, 1])
    head = _ppdet("heads.ttf_head").TTFHead(in_channels=neck.out_shape[0].channels, hm_loss=None, wh_loss=None)
    post = _ppdet("post_process").BBoxPostProcess(
        decode=_ppdet("layers").TTFBox(max_per_img=100, score_thresh=0.01, down_ratio=4))
    net = _ppdet("architectures.ttfnet").TTFNet(backbone, neck, head, post)
    # The heads' convs have no norm and start at std 0.01: at He scale their features keep their magnitude.
    rescale_to_he_init(head.hm_head.feat)
    rescale_to_he_init(head.wh_head.feat)
    model = _ppdet_export_pruning_im_shape(net)  # TTFBox reads no im_shape
    specs = [Spec("image", [1, 3, size, size], [1, 3, size, size]),
             Spec("scale_factor", [1, 2], [1, 2], low=1.0, high=1.0)]

    def calibrate(rng):
        calibrate_batch_norms(model, lambda: [paddle.to_tensor(s.sample(rng)) for s in specs],
                              lambda inputs: model(*inputs))
        probe = [paddle.to_tensor(s.sample(rng)) for s in specs]
        # Heatmap logits of std 2 around -5: the top 100 peaks of 80 x 80 x 80 scores are spread (distinct values)
        # and part of them pass 0.01.
        spread_score_channels([head.hm_head.head], slice(None), lambda: model(*probe), mean=-5.0, std=2.0)
        # The box sizes (in units of wh_offset_base 16 px, before the relu): around 1 (std 0.5).
        spread_score_channels([head.wh_head.head], slice(None), lambda: model(*probe), mean=1.0, std=0.5)
        _, bbox_num = model(*probe)
        print(f"{name}: {int(bbox_num.numpy().sum())} boxes past the threshold on a random image", file=sys.stderr)

    model._real_zoo_calibrate = calibrate
    return model, specs


def build_yolof(name: str):
    """YOLOF (yolof_r50_c5_1x_coco.yml: ResNet50's C5 alone, DilatedEncoder with 4 dilated residual blocks, YOLOFHead
    with implicit objectness (class and objectness logits combined in log space), 5 anchors at stride 32,
    delta2bbox_v2 with the centre shift clipped at 32 and the boxes clipped to im_shape, MultiClassNMS score 0.05, IoU
    0.6, top 1000 / keep 100) at 320 px, exported with im_shape, image, scale_factor and batch 1: the decoding loops in
    Python over `cls_scores[0].shape[0]` images."""
    import paddle

    size = 320
    nms_module = _ppdet("layers")
    _ppdet_nms_for_pir()
    backbone = _ppdet("backbones.resnet").ResNet(depth=50, variant="b", norm_type="bn", freeze_at=-1,
                                                 freeze_norm=False, return_idx=[3], num_stages=4)
    neck = _ppdet("necks.dilated_encoder").DilatedEncoder(in_channels=[2048], out_channels=[512],
                                                          block_mid_channels=128, num_residual_blocks=4,
                                                          block_dilations=[2, 4, 6, 8])
    yolof = _ppdet("heads.yolof_head")
    anchors = _ppdet("proposal_generator.anchor_generator").AnchorGenerator(
        anchor_sizes=[[32, 64, 128, 256, 512]], aspect_ratios=[1.0], strides=[32])
    head = yolof.YOLOFHead(num_classes=80, conv_feat=yolof.YOLOFFeat(feat_in=512, feat_out=512, num_cls_convs=2,
                                                                     num_reg_convs=4, norm_type="bn"),
                           anchor_generator=anchors, bbox_assigner=None, loss_class=None, loss_bbox=None,
                           ctr_clip=32.0, nms=nms_module.MultiClassNMS(nms_top_k=1000, keep_top_k=100,
                                                                      score_threshold=0.05, nms_threshold=0.6))
    net = _ppdet("architectures.yolof").YOLOF(backbone, neck, head)
    model = _ppdet_export_with_im_shape(net)
    specs = [Spec("im_shape", [1, 2], [1, 2], low=size, high=size),
             Spec("image", [1, 3, size, size], [1, 3, size, size]),
             Spec("scale_factor", [1, 2], [1, 2], low=1.0, high=1.0)]

    def calibrate(rng):
        calibrate_batch_norms(model, lambda: [paddle.to_tensor(s.sample(rng)) for s in specs],
                              lambda inputs: model(*inputs))
        probe = [paddle.to_tensor(s.sample(rng)) for s in specs]
        # sigmoid of the combined logit past 0.05 for about a percent of the 500 anchors x 80 classes (NMS keeps
        # fewer than its 100): class logits around -6 (std 1.5), objectness around 0 (std 1); the box deltas at std
        # 0.3 move and resize the anchors.
        spread_score_channels([head.cls_score], slice(None), lambda: model(*probe), mean=-6.0, std=1.5)
        spread_score_channels([head.object_pred], slice(None), lambda: model(*probe), mean=0.0, std=1.0)
        spread_score_channels([head.bbox_pred], slice(None), lambda: model(*probe), mean=0.0, std=0.3)
        _, bbox_num = model(*probe)
        print(f"{name}: {int(bbox_num.numpy().sum())} boxes kept by NMS on a random image", file=sys.stderr)

    model._real_zoo_calibrate = calibrate
    return model, specs


def build_blazeface(name: str):
    """BlazeFace (blazeface_1000e.yml: BlazeNet with 5x5 blaze and double-blaze blocks, no FPN, FaceHead with two
    SSD anchor levels (steps 8 and 16, 2 and 6 square priors), SSDBox, MultiClassNMS score 0.01, IoU 0.3, top 5000 /
    keep 750; one class, WIDER FACE) at 320 px instead of 640, exported with im_shape, image, scale_factor as ppdet
    exports SSDs."""
    import paddle

    size = 320
    nms_module = _ppdet("layers")
    _ppdet_nms_for_pir()
    _ppdet_prior_box_for_pir()
    backbone = _ppdet("backbones.blazenet").BlazeNet(
        blaze_filters=[[24, 24], [24, 24], [24, 48, 2], [48, 48], [48, 48]],
        double_blaze_filters=[[48, 24, 96, 2], [96, 24, 96], [96, 24, 96], [96, 24, 96, 2], [96, 24, 96],
                              [96, 24, 96]], act="relu")
    neck = _ppdet("necks.blazeface_fpn").BlazeNeck(in_channel=[96, 96], neck_type="None")
    anchors = nms_module.AnchorGeneratorSSD(
        steps=[8.0, 16.0], aspect_ratios=[[1.0], [1.0]], min_sizes=[[16.0, 24.0], [32.0, 48.0, 64.0, 80.0, 96.0,
                                                                                    128.0]],
        max_sizes=[[], []], offset=0.5, flip=False, min_max_aspect_ratios_order=False)
    head = _ppdet("heads.face_head").FaceHead(num_classes=1, in_channels=[96, 96], anchor_generator=anchors,
                                              kernel_size=3, padding=1, loss=None)
    post = _ppdet("post_process").BBoxPostProcess(
        num_classes=1, decode=nms_module.SSDBox(),
        nms=nms_module.MultiClassNMS(keep_top_k=750, score_threshold=0.01, nms_threshold=0.3, nms_top_k=5000,
                                     nms_eta=1.0))
    net = _ppdet("architectures.blazeface").BlazeFace(backbone, head, neck, post)
    net.use_extra_data = False
    model = _ppdet_export_with_im_shape(net)
    specs = _detection_specs_with_im_shape(size)

    def calibrate(rng):
        def batch():
            return [paddle.to_tensor(s.sample(rng, batch=2)) for s in specs]

        calibrate_batch_norms(model, batch, lambda inputs: model(*inputs))
        probe = [paddle.to_tensor(s.sample(rng)) for s in specs]
        # A softmax over (face, background) per prior (BBoxPostProcess gives MultiClassNMS background_label 1, the
        # last class): the face logits around -7 (std 1.5) and the background's near 0 (std 0.3) put a few percent
        # of the 5600 priors past 0.01, a few hundred candidates for NMS (under its top 5000 and keep 750, so no
        # near-tie decides a cut).
        for conv, priors in zip(head.score_convs, head.num_priors):
            spread_score_channels([conv], [2 * p for p in range(priors)], lambda: model(*probe), mean=-7.0, std=1.5)
            spread_score_channels([conv], [2 * p + 1 for p in range(priors)], lambda: model(*probe), mean=0.0,
                                  std=0.3)
        _, bbox_num = model(*probe)
        print(f"{name}: {int(bbox_num.numpy().sum())} boxes kept by NMS on a random image", file=sys.stderr)

    model._real_zoo_calibrate = calibrate
    return model, specs

MORE_BUILDERS = {"yolov3": build_detector_more, "ssd": build_detector_more, "ppyolov2": build_detector_more,
                 "centernet": build_detector_more, "tinypose": build_tinypose,
                 "ppocrv5_server_det": build_ocr_more, "ppocrv5_server_rec": build_ocr_more,
                 "textline_ori": build_ocr_more, "slanet": build_ocr_more, "uie": build_nlp_more,
                 "bert_seq_cls": build_nlp_more, "gpt_lm": build_nlp_more, "electra_token_cls": build_nlp_more,
                 "ernie_m": build_nlp_more, "bigru_crf": build_nlp_more,
                 "faster_rcnn": build_two_stage, "mask_rcnn": build_two_stage, "cascade_rcnn": build_two_stage,
                 "deformable_detr": build_detr, "dino": build_detr, "yolox": build_yolox, "solov2": build_solov2,
                 "fcos": build_fcos, "retinanet": build_retinanet,
                 "fnet_seq_cls": build_nlp_wider, "roformer_seq_cls": build_nlp_wider,
                 "deberta_v2_seq_cls": build_nlp_wider, "convbert_seq_cls": build_nlp_wider,
                 "albert_seq_cls": build_nlp_wider, "mobilebert_seq_cls": build_nlp_wider,
                 "gfl": build_dense_detector, "tood": build_dense_detector, "hrnet_pose": build_hrnet_pose,
                 "blazeface": build_blazeface, "higherhrnet": build_higherhrnet, "ttfnet": build_ttfnet,
                 "yolof": build_yolof}


BUILDERS = {name: build_classifier for name, (package, _) in MODELS.items() if package == "paddleclas"}
BUILDERS.update({name: build_segmenter for name, (package, _) in MODELS.items() if package == "paddleseg"})
BUILDERS.update({"picodet": build_detector, "ppyoloe_plus": build_detector, "rtdetr": build_rtdetr,
                 "ppocrv5_det": build_ocr, "ppocrv5_rec": build_ocr, "ernie_seq_cls": build_ernie,
                 "ernie_token_cls": build_ernie})
BUILDERS.update(MORE_BUILDERS)


def build(name: str, out_dir: str) -> dict:
    import paddle

    if name not in MODELS:
        raise SystemExit(f"unknown real-zoo model {name!r}; known: {', '.join(MODELS)}")
    if name not in BUILDERS:
        raise SystemExit(f"{name}: no builder yet")
    paddle.seed(SEED)
    rng = np.random.default_rng(SEED)
    model, specs = BUILDERS[name](name)
    model.eval()
    randomise_trivial_tensors(model, rng)
    tune = getattr(model, "_real_zoo_calibrate", None)
    if tune is not None:
        tune(rng)
    else:
        calibrate_batch_norms(model, _image_batch(specs[0], rng), model)
    os.makedirs(out_dir, exist_ok=True)
    export(model, specs, out_dir, name)
    return {"specs": [s.as_json() for s in specs]}


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    build(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
