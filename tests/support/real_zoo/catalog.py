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
    "se_resnext": ("paddleclas", "SE_ResNeXt50_32x4d"),
    "xception": ("paddleclas", "Xception41"),
    "dpn": ("paddleclas", "DPN68"),
    "rexnet": ("paddleclas", "ReXNet_1_0"),
    "mobilenet_v2": ("paddleclas", "MobileNetV2_x0_25"),
    "regnet": ("paddleclas", "RegNetX_200MF"),
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
    "danet": ("paddleseg", "DANet (ResNet18_vd, output stride 8; position and channel attention)"),
    "gcnet": ("paddleseg", "GCNet (ResNet18_vd, output stride 8; global context block)"),
    "ann": ("paddleseg", "ANN (ResNet18_vd, output stride 8; asymmetric non-local blocks over a pyramid)"),
    "pointrend": ("paddleseg", ("PointRend (ResNet18_vd, SemanticFPN; refines the top-k uncertain points by "
                                "grid_sample and scatter)")),
    "segnext": ("paddleseg", ("SegNeXt (MSCAN-T: multi-scale strip-conv attention; LightHamHead's NMF matrix "
                              "decomposition, 7 steps)")),
    "rtformer": ("paddleseg", "RTFormer-Slim (dual-resolution, GPU-friendly external attention, cross-resolution "
                              "attention, DAPPM)"),
    "topformer": ("paddleseg", "TopFormer (TopTransformer-Tiny: token pyramid, transformer on pooled tokens, "
                               "semantic injection; ADE20K's 150 classes)"),
    "ccnet": ("paddleseg", "CCNet (ResNet18_vd, output stride 8; recurrent criss-cross attention, 2 passes)"),
    "emanet": ("paddleseg", "EMANet (ResNet18_vd, output stride 8; expectation-maximisation attention, 3 steps)"),
    "u2netp": ("paddleseg", "U2Netp (nested residual U-blocks, ceil-mode pools, fused side outputs)"),
    "ddrnet_slim": ("paddleseg", "DDRNet-23-slim (dual-resolution branches with bilateral fusion, DAPPM)"),
    "sinet": ("paddleseg", "SINet (portrait: channel shuffle, squeeze-excite separable convs, information blocking)"),
    "picodet": ("paddledet", "PicoDet-S (LCNet, LCPAN, PicoHeadV2, multiclass_nms3)"),
    "ppyoloe_plus": ("paddledet", "PP-YOLOE+ s (CSPResNet, CustomCSPPAN, PPYOLOEHead, multiclass_nms3)"),
    "rtdetr": ("paddlex", "RT-DETR-L (HGNetV2, hybrid encoder, deformable decoder, DETRPostProcess top-k)"),
    "ppocrv5_det": ("paddlex", "PP-OCRv5_mobile_det"),
    "ppocrv5_rec": ("paddlex", "PP-OCRv5_mobile_rec"),
    "ernie_seq_cls": ("paddlenlp", "ErnieForSequenceClassification (ERNIE-3.0, tiny config)"),
    "ernie_token_cls": ("paddlenlp", "ErnieForTokenClassification (ERNIE-3.0, tiny config)"),
    # Wider detection, OCR, keypoint and NLP architectures.
    "yolov3": ("paddledet", "YOLOv3 (MobileNetV1, YOLOv3FPN, YOLOv3Head, yolo_box, multiclass_nms3)"),
    "ppyolov2": ("paddledet", ("PP-YOLOv2 (ResNet50-vd with DCNv2, PPYOLOPAN with SPP and mish, IoU-aware head, "
                               "yolo_box, matrix_nms)")),
    "ssd": ("paddledet", "SSD (MobileNetV1 with extra blocks, prior_box, multiclass_nms3; VOC at 300 px)"),
    "centernet": ("paddledet", "CenterNet (DLA34, CenterNetDLAFPN with DCNv2, max-pool peaks and top-k)"),
    "tinypose": ("paddledet", "PP-TinyPose 128x96 (LiteHRNet, TopDownHRNet, heatmaps and argmax)"),
    "ppocrv5_server_det": ("paddlex", "PP-OCRv5_server_det"),
    "ppocrv5_server_rec": ("paddlex", "PP-OCRv5_server_rec"),
    "textline_ori": ("paddlex", "PP-LCNet_x0_25_textline_ori"),
    "slanet": ("paddlex", "SLANet (table structure, autoregressive attention-GRU loop, 24 steps)"),
    "uie": ("paddlenlp", "UIE (ERNIE-3.0 tiny config, start/end pointers, 4 inputs with attention mask)"),
    "bert_seq_cls": ("paddlenlp", "BertForSequenceClassification (tiny config)"),
    "gpt_lm": ("paddlenlp", "GPTForCausalLM (tiny config, logits of a fixed-length forward)"),
    "electra_token_cls": ("paddlenlp", "ElectraForTokenClassification (tiny config)"),
    "ernie_m": ("paddlenlp", "ErnieMForSequenceClassification (tiny config, 250002-word vocabulary)"),
    "bigru_crf": ("paddlenlp", "BiGruCrf lexical analysis (two bidirectional GRU layers, viterbi_decode)"),
    # Two-stage detectors.
    "faster_rcnn": ("paddledet", ("Faster R-CNN (ResNet50 + FPN, RPN with generate_proposals, RoIAlign over FPN "
                                  "levels, TwoFCHead, RCNNBox + multiclass_nms3)")),
    "mask_rcnn": ("paddledet", ("Mask R-CNN (Faster R-CNN's body plus MaskHead and MaskPostProcess's paste_mask "
                                "by grid_sample)")),
    "cascade_rcnn": ("paddledet", ("Cascade R-CNN (Faster R-CNN's body with CascadeHead: three RoIAlign + "
                                   "CascadeTwoFCHead stages, RCNNBox + multiclass_nms3)")),
    # Transformer detectors (ppdet's DETR architecture) at their reference configs' full depth, 320 px.
    "deformable_detr": ("paddledet", ("Deformable DETR (ResNet50, 4-level deformable encoder and decoder of 6 layers "
                                      "each, 300 queries, focal-loss top-100)")),
    "dino": ("paddledet", ("DINO 4-scale (ResNet50, deformable encoder and decoder of 6 layers each, 900 queries "
                           "from the encoder's top-k, focal-loss top-300)")),
    "yolox": ("paddledet", "YOLOX-s (CSPDarkNet, YOLOCSPPAN, YOLOXHead, multiclass_nms3; 320 px)"),
    # ResNet50-FPN one-stage and mask detectors.
    "solov2": ("paddledet", ("SOLOv2 (ResNet50, FPN, SOLOv2Head and mask-feature head, dynamic mask kernels, "
                             "MaskMatrixNMS in paddle ops)")),
    "fcos": ("paddledet", "FCOS (ResNet50, FPN P3-P7, FCOSHead with GN towers and centerness, multiclass_nms3)"),
    "retinanet": ("paddledet", "RetinaNet (ResNet50, FPN P3-P7, RetinaHead, 9 anchors, top-1000 per level, "
                               "multiclass_nms3)"),
    # NLP families with op patterns the zoo had not seen (FFT token mixing, rotary and relative positions).
    "fnet_seq_cls": ("paddlenlp", "FNetForSequenceClassification (tiny config, real part of fftn token mixing)"),
    "roformer_seq_cls": ("paddlenlp", "RoFormerForSequenceClassification (tiny config, rotary position embeddings)"),
    "deberta_v2_seq_cls": ("paddlenlp", ("DebertaV2ForSequenceClassification (DeBERTa-v3 tiny config, disentangled "
                                         "relative attention over bucketed positions)")),
    "convbert_seq_cls": ("paddlenlp", "ConvBertForSequenceClassification (tiny config, span-based dynamic conv)"),
    "albert_seq_cls": ("paddlenlp", "AlbertForSequenceClassification (tiny config, layer weights shared)"),
    "mobilebert_seq_cls": ("paddlenlp", ("MobileBertForSequenceClassification (mobilebert-uncased body in 2 layers: "
                                         "bottlenecks, stacked FFNs, no_norm)")),
    # Classification families with op patterns the zoo had not seen.
    "cswin": ("paddleclas", "CSwinTransformer (CSWin-T widths and splits, 1-2 blocks a stage; cross-shaped windows)"),
    "rednet": ("paddleclas", "RedNet26 (involution)"),
    "fasternet": ("paddleclas", "FasterNet_T0 (partial convolution)"),
    "mobilenet_v4": ("paddleclas", "MobileNetV4_conv_small (universal inverted bottlenecks)"),
    "twins": ("paddleclas", "Twins pcpvt_small (conditional position encoding, sub-sampled attention)"),
    "uniformer": ("paddleclas", "UniFormer_small (convolutional and self-attention blocks)"),
    "cvt": ("paddleclas", "CvT_13_224 (convolutional token embedding and projection)"),
    "nextvit": ("paddleclas", "NextViT_small_224 (convolution and efficient multi-head self-attention blocks)"),
    "efficientnet_v2": ("paddleclas", "EfficientNetV2_S (fused MBConv)"),
    "gfl": ("paddledet", "GFL (ResNet50, FPN P3-P7, GFLHead: each box side the expectation of a 17-bin distribution, "
                         "multiclass_nms3)"),
    "tood": ("paddledet", "TOOD (ResNet50, FPN P3-P7, TOODHead: task decomposition, class probability map, box "
                          "offsets by grid_sample, multiclass_nms3)"),
    "hrnet_pose": ("paddledet", "Top-down HRNet-W32 128x96 (TopDownHRNet, heatmaps and argmax)"),
    "higherhrnet": ("paddledet", "HigherHRNet-W32 256 px (bottom-up: heatmaps, tag maps, max-pool peaks and top-k)"),
    "blazeface": ("paddledet", "BlazeFace (BlazeNet, FaceHead with two SSD anchor levels, prior_box, "
                               "multiclass_nms3; 320 px)"),
    "ttfnet": ("paddledet", "TTFNet (DarkNet53, TTFFPN, TTFHead; max-pool peaks, top-k, nonzero; 320 px)"),
    "yolof": ("paddledet", "YOLOF (ResNet50 C5, DilatedEncoder, YOLOFHead with implicit objectness, "
                           "multiclass_nms3; 320 px)"),
}
