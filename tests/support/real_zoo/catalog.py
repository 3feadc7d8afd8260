"""The real-architecture zoo's model list: names, what each is built from, and the CI subset.

Plain data, imported both by the builder (tests/support/real_zoo/build_model.py, run in the side venv that holds
the model-zoo packages) and by the fixtures and tests in the project's venv: it must import nothing but the
standard library.
"""
from __future__ import annotations

# name -> (package the architecture code comes from, the zoo's own name of the architecture)
MODELS = {
    "pp_lcnet": ("paddleclas", "PPLCNet_x0_25"),
    "pp_hgnetv2": ("paddleclas", "PPHGNetV2_B0"),
    "mobilenet_v3": ("paddleclas", "MobileNetV3_small_x0_35"),
    "resnet50_vd": ("paddleclas", "ResNet50_vd"),
    "deit": ("paddleclas", "DeiT_tiny_distilled_patch16_224"),
    "swin": ("paddleclas", "SwinTransformer tiny (Swin-T configuration, window 4 at 128 px)"),
    "ghostnet": ("paddleclas", "GhostNet_x0_5"),
    "efficientnet": ("paddleclas", "EfficientNetB0"),
    "convnext": ("paddleclas", "ConvNeXt_tiny"),
    "repvgg": ("paddleclas", "RepVGG_A0 (re-parameterised for deployment)"),
    "dla": ("paddleclas", "DLA34"),
    "res2net": ("paddleclas", "Res2Net50_26w_4s"),
    "densenet": ("paddleclas", "DenseNet121"),
    "inception_v3": ("paddleclas", "InceptionV3"),
    "shufflenet_v2": ("paddleclas", "ShuffleNetV2_x0_25"),
    "pvt_v2": ("paddleclas", "PVT_V2_B0"),
    "levit": ("paddleclas", "LeViT_128S"),
    "mobilevit": ("paddleclas", "MobileViT_XXS"),
    "resnest": ("paddleclas", "ResNeSt50_fast_1s1x64d"),
    "mixnet": ("paddleclas", "MixNet_S"),
    "pp_hgnet": ("paddleclas", "PPHGNet_tiny"),
    "pp_liteseg": ("paddleseg", "PPLiteSeg (STDC1)"),
    "deeplabv3p": ("paddleseg", "DeepLabV3P (ResNet50_vd, output stride 8)"),
    "segformer": ("paddleseg", "SegFormer_B0"),
    "bisenetv2": ("paddleseg", "BiSeNetV2"),
    "unet": ("paddleseg", "UNet"),
    "ocrnet": ("paddleseg", "OCRNet (HRNet_W18_Small_V1)"),
    "pspnet": ("paddleseg", "PSPNet (ResNet18_vd)"),
    "stdcseg": ("paddleseg", "STDCSeg (STDC1)"),
    "fast_scnn": ("paddleseg", "FastSCNN"),
    "enet": ("paddleseg", "ENet"),
    "espnetv2": ("paddleseg", "ESPNetV2"),
    "upernet": ("paddleseg", "UPerNet (ResNet18_vd)"),
    "segmenter": ("paddleseg", "Segmenter (ViT-tiny, mask transformer head)"),
    "pp_mobileseg": ("paddleseg", "PP-MobileSeg tiny (StrideFormer)"),
    "pphumanseg_lite": ("paddleseg", "PPHumanSegLite"),
    "picodet": ("paddledet", "PicoDet-S (LCNet, LCPAN, PicoHeadV2, multiclass_nms3)"),
    "ppyoloe_plus": ("paddledet", "PP-YOLOE+ s (CSPResNet, CustomCSPPAN, PPYOLOEHead, multiclass_nms3)"),
    "rtdetr": ("paddlex", "RT-DETR-L (HGNetV2, hybrid encoder, deformable decoder, DETRPostProcess top-k)"),
    "ppocrv5_det": ("paddlex", "PP-OCRv5_mobile_det"),
    "ppocrv5_rec": ("paddlex", "PP-OCRv5_mobile_rec"),
    "ernie_seq_cls": ("paddlenlp", "ErnieForSequenceClassification (ERNIE-3.0, tiny config)"),
    "ernie_token_cls": ("paddlenlp", "ErnieForTokenClassification (ERNIE-3.0, tiny config)"),
}
