"""Models beyond classification for the partitioning and training tests, built by torchaudio's
and torchvision's own builders with random weights:

  wav2vec2_tiny  torchaudio.models.wav2vec2_model, a wav2vec2-style encoder (a convolutional
                 feature extractor with group norm, a convolutional position embedding with
                 groups, 2 post-norm transformer layers of 4 heads, a linear head), small
                 enough for a test: waveforms [B, 1600]
  lraspp         torchvision's lraspp_mobilenet_v3_large (hardswish, squeeze-excitation,
                 bilinear upsampling), its output the segmentation map "out": images
                 [B, 3, 64, 64]

usage: beyond_models.py NAME -o MODEL.pt [--batch B] [--io DIR] [--train]
                        [--data FILE --samples S]
       beyond_models.py --splits PLAN_DIR

--io DIR writes inputs.safetensors and PyTorch's outputs.safetensors; --train traces in training
mode (batch norms use the batch's statistics; every dropout is 0); --data writes S samples of
each input and `labels` of the output's shape for `cleave compile --loss mse`. --splits reads a
tensor-parallel plan's strategy.json and prints how many weights are split and whether a conv2d's
and a linear's are.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from safetensors_io import save_file  # noqa: E402
from zoo import DTYPE_NAMES, _wrap  # noqa: E402

import torch  # noqa: E402


def build(name):
    """(model, name of its input, per-sample input shape, output selection)."""
    if name == "wav2vec2_tiny":
        import torchaudio
        model = torchaudio.models.wav2vec2_model(
            extractor_mode="group_norm",
            extractor_conv_layer_config=[(16, 10, 5), (16, 3, 2), (16, 2, 2)],
            extractor_conv_bias=False, encoder_embed_dim=32, encoder_projection_dropout=0.0,
            encoder_pos_conv_kernel=8, encoder_pos_conv_groups=4, encoder_num_layers=2,
            encoder_num_heads=4, encoder_attention_dropout=0.0, encoder_ff_interm_features=64,
            encoder_ff_interm_dropout=0.0, encoder_dropout=0.0, encoder_layer_norm_first=False,
            encoder_layer_drop=0.0, aux_num_out=8)
        # Weight norm (the position embedding's) folded into the weight, as torchaudio's
        # __prepare_scriptable__ does: torch.jit.trace refuses its pre-hook.
        conv = model.encoder.transformer.pos_conv_embed.conv
        torch.nn.utils.remove_weight_norm(conv)
        return model, "waveforms", (1600,), lambda out: out[0]
    if name == "lraspp":
        import torchvision
        model = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
            weights=None, weights_backbone=None)
        return model, "images", (3, 64, 64), lambda out: out["out"]
    sys.exit(f"beyond_models.py: error: unknown model '{name}'")


def splits(plan):
    with open(os.path.join(plan, "strategy.json")) as f:
        strategy = json.load(f)
    total, split, kinds = 0, 0, set()
    for block in strategy["tensor_parallel"]:
        for op in block["ops"]:
            for layout in op.get("weights", {}).values():
                total += 1
                if layout.startswith("split"):
                    split += 1
                    kinds.add(op["op"].split(" @ ")[0].replace("cleave.", ""))
    print(f"split weights: {split} of {total}; conv2d split: "
          f"{'yes' if 'conv2d' in kinds else 'no'}; linear split: "
          f"{'yes' if 'linear' in kinds else 'no'}")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--splits":
        splits(sys.argv[2])
        return
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("-o", required=True)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--io")
    p.add_argument("--train", action="store_true")
    p.add_argument("--data")
    p.add_argument("--samples", type=int, default=16)
    a = p.parse_args()
    torch.manual_seed(0)
    model, input_name, sample_shape, select = build(a.name)
    model.train(a.train)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn((a.batch,) + sample_shape, generator=gen)
    wrapped = _wrap(model, [input_name], select)
    # A training-mode forward updates the batch norms' running statistics (the traced module
    # shares the model's tensors): they are put back after tracing and after computing the
    # output, so that the file holds the weights as built.
    state = {k: v.clone() for k, v in model.state_dict().items()}
    traced = torch.jit.trace(wrapped, (x,), check_trace=False)
    model.load_state_dict(state)
    with torch.no_grad():
        out = traced(x)
    model.load_state_dict(state)
    assert all(torch.equal(v, state[k.split("model.", 1)[1]])
               for k, v in traced.state_dict().items()), "traced weights differ from the model's"
    meta = {"format": 1, "model": a.name,
            "inputs": [{"name": input_name, "shape": list(x.shape), "dtype": "f32"}]}
    traced.save(a.o, _extra_files={"cleave.json": json.dumps(meta)})
    if a.io:
        os.makedirs(a.io, exist_ok=True)
        save_file({input_name: x}, os.path.join(a.io, "inputs.safetensors"))
        save_file({"output_0": out}, os.path.join(a.io, "outputs.safetensors"))
    if a.data:
        data = {input_name: torch.randn((a.samples,) + sample_shape, generator=gen),
                "labels": torch.randn((a.samples,) + tuple(out.shape[1:]), generator=gen)}
        save_file(data, a.data)


if __name__ == "__main__":
    main()
