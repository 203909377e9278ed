#!/usr/bin/env bash
# The main job, end to end: export example models with PyTorch, import them
# into cleave IR and summarize them, compile one into a plan and run it against
# PyTorch's own outputs; compile it for 4 devices, inspect the plan, run it on 4
# local ranks and compare with one device and PyTorch; train it for 20 steps
# against PyTorch's training, with a checkpoint and a resume, on 2
# data-parallel ranks, on 2 pipeline stages and on 2 tensor-parallel ranks against one device; import a
# 145.6B-parameter GPT exported on the meta device (shapes only).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/build.sh" --target cleave cleave-opt cleave-runtime
cleave="$root/build/bin/cleave"
out="$root/build/demo"
mkdir -p "$out"
export OMP_NUM_THREADS=2

step() { printf '\n== %s\n' "$*"; }

step "Export a small GPT (4 layers, d_model 128) with PyTorch"
/usr/bin/python3 "$root/examples/export.py" gpt -o "$out/gpt.pt"

step "Import it: cleave import $out/gpt.pt -o $out/gpt.mlir"
"$cleave" import "$out/gpt.pt" -o "$out/gpt.mlir"
echo "wrote $out/gpt.mlir ($(grep -c 'cleave\.' "$out/gpt.mlir") cleave ops); the first block:"
grep -m 12 -E 'cleave\.(embedding|layer_norm|linear|slice|matmul|softmax|gelu)' "$out/gpt.mlir" | cut -c1-150

step "Summary per module: cleave import $out/gpt.pt --summary"
"$cleave" import "$out/gpt.pt" --summary

step "The IR round-trips through cleave-opt"
"$root/build/bin/cleave-opt" "$out/gpt.mlir" --mlir-print-debuginfo -o "$out/gpt.roundtrip.mlir"
echo "ok: $out/gpt.roundtrip.mlir"

step "Compile it into a plan and run it: cleave compile / cleave run"
/usr/bin/python3 "$root/examples/export.py" gpt -o "$out/gpt.pt" --io "$out/gpt-io" >/dev/null
"$cleave" compile "$out/gpt.pt" -o "$out/gpt.plan"
ls -R "$out/gpt.plan" | sed 's/^/  /'
"$cleave" run "$out/gpt.plan" --inputs "$out/gpt-io/inputs.safetensors" \
  --outputs "$out/gpt.outputs.safetensors" --timing
echo "cleave's outputs against PyTorch's:"
/usr/bin/python3 "$root/test/e2e/compare_outputs.py" "$out/gpt-io/outputs.safetensors" \
  "$out/gpt.outputs.safetensors"

step "Compile it for 4 devices of this machine's spec: pipeline 2 x tensor parallel 2"
/usr/bin/python3 "$root/examples/export.py" gpt --batch 4 -o "$out/gpt4.pt" --io "$out/gpt4-io" >/dev/null
"$cleave" compile "$out/gpt4.pt" --cluster "$root/examples/clusters/cpu-2core.json" --devices 4 \
  --global-batch 4 --mode infer --pp 2 --tp 2 -o "$out/gpt.plan4"

step "What the plan does: cleave inspect $out/gpt.plan4"
"$cleave" inspect "$out/gpt.plan4"

step "Run it on 4 local ranks (mpirun): cleave run --local 4 ... --report"
"$cleave" run --local 4 "$out/gpt.plan4" --inputs "$out/gpt4-io/inputs.safetensors" \
  --outputs "$out/gpt4.outputs.safetensors" --repeat 20 --report
"$cleave" compile "$out/gpt4.pt" -o "$out/gpt4.plan1" >/dev/null
"$cleave" run "$out/gpt4.plan1" --inputs "$out/gpt4-io/inputs.safetensors" \
  --outputs "$out/gpt4.single.safetensors"
echo "4 ranks against one device:"
/usr/bin/python3 "$root/test/e2e/compare_outputs.py" "$out/gpt4.single.safetensors" \
  "$out/gpt4.outputs.safetensors"
echo "4 ranks against PyTorch:"
/usr/bin/python3 "$root/test/e2e/compare_outputs.py" "$out/gpt4-io/outputs.safetensors" \
  "$out/gpt4.outputs.safetensors"

step "Train it: cleave compile --mode train (loss, gradients, AdamW in the IR), cleave train"
/usr/bin/python3 "$root/examples/export.py" gpt --config tiny --dropout 0 --train -o "$out/gpt-train.pt" \
  --data "$out/gpt-train.data.safetensors" --samples 64 --labels cross_entropy
"$cleave" compile "$out/gpt-train.pt" --mode train --loss cross_entropy --optimizer adamw --lr 3e-3 \
  -o "$out/gpt.train"
"$cleave" inspect "$out/gpt.train" | sed -n '/^training/,/total/p'
rm -rf "$out/gpt.ckpt"
"$cleave" train "$out/gpt.train" --data "$out/gpt-train.data.safetensors" --steps 20 \
  --log "$out/gpt.train.jsonl" --checkpoint "$out/gpt.ckpt" --checkpoint-every 10 \
  --save-weights "$out/gpt.trained.safetensors"
echo "PyTorch training the same TorchScript file on the same data, step by step:"
/usr/bin/python3 "$root/test/train/reference.py" "$out/gpt-train.pt" --data "$out/gpt-train.data.safetensors" \
  --steps 20 --loss cross_entropy --lr 3e-3 --losses "$out/gpt.train.ref.jsonl"
/usr/bin/python3 "$root/test/train/compare_training.py" "$out/gpt.train.ref.jsonl" "$out/gpt.train.jsonl" | tail -3
echo "Resumed from the step-10 checkpoint: steps 11..20 again, bit-identical:"
"$cleave" train "$out/gpt.train" --data "$out/gpt-train.data.safetensors" --steps 20 -q \
  --resume "$out/gpt.ckpt/ckpt-10" --log "$out/gpt.resumed.jsonl"
/usr/bin/python3 "$root/test/train/training_files.py" same-losses "$out/gpt.train.jsonl" "$out/gpt.resumed.jsonl"

step "Train it on 2 data-parallel ranks with ZeRO: each takes half of every batch and keeps half of the optimizer state"
"$cleave" compile "$out/gpt-train.pt" --cluster "$root/examples/clusters/cpu-2core.json" --devices 2 \
  --global-batch 2 --dp 2 --zero optimizer --mode train --loss cross_entropy --optimizer adamw --lr 3e-3 \
  -o "$out/gpt.train.dp2"
"$cleave" train --local 2 "$out/gpt.train.dp2" --data "$out/gpt-train.data.safetensors" --steps 20 -q \
  --log "$out/gpt.train.dp2.jsonl" --report "$out/gpt.train.dp2.report.json"
echo "2 ranks against one device:"
/usr/bin/python3 "$root/test/train/compare_training.py" "$out/gpt.train.jsonl" "$out/gpt.train.dp2.jsonl" \
  --names "1-device,2-ranks" | tail -3
/usr/bin/python3 "$root/test/train/training_files.py" memory "$out/gpt.train.dp2.report.json" "$out/gpt.train.dp2"

step "Train it on 2 pipeline stages under 1F1B: each stage runs its own forward and backward slots"
"$cleave" compile "$out/gpt-train.pt" --cluster "$root/examples/clusters/cpu-2core.json" --devices 2 \
  --global-batch 2 --pp 2 --microbatch 1 --schedule 1f1b --mode train --loss cross_entropy \
  --optimizer adamw --lr 3e-3 -o "$out/gpt.train.pp2"
"$cleave" train --local 2 "$out/gpt.train.pp2" --data "$out/gpt-train.data.safetensors" --steps 20 -q \
  --log "$out/gpt.train.pp2.jsonl" --report "$out/gpt.train.pp2.report.json"
echo "2 stages against one device (the tied embedding's gradient summed across the stages):"
/usr/bin/python3 "$root/test/train/compare_training.py" "$out/gpt.train.jsonl" "$out/gpt.train.pp2.jsonl" \
  --names "1-device,2-stages" | tail -3
/usr/bin/python3 "$root/test/train/training_files.py" pipeline "$out/gpt.train.pp2"
/usr/bin/python3 "$root/test/train/training_files.py" memory "$out/gpt.train.pp2.report.json" "$out/gpt.train.pp2"

step "Train it on 2 tensor-parallel ranks, resuming the pipeline's checkpoint: each rank holds its part of the split layers"
"$cleave" compile "$out/gpt-train.pt" --cluster "$root/examples/clusters/cpu-2core.json" --devices 2 \
  --global-batch 2 --tp 2 --microbatch 2 --mode train --loss cross_entropy \
  --optimizer adamw --lr 3e-3 -o "$out/gpt.train.tp2"
"$cleave" train --local 2 "$out/gpt.train.pp2" --data "$out/gpt-train.data.safetensors" --steps 10 -q \
  --checkpoint "$out/gpt.ckpt.pp2"
"$cleave" train --local 2 "$out/gpt.train.tp2" --data "$out/gpt-train.data.safetensors" --steps 20 -q \
  --resume "$out/gpt.ckpt.pp2" --log "$out/gpt.train.tp2.jsonl" --report "$out/gpt.train.tp2.report.json"
echo "2 tp ranks (from the 2 stages' step-10 checkpoint) against one device:"
/usr/bin/python3 "$root/test/train/compare_training.py" "$out/gpt.train.jsonl" "$out/gpt.train.tp2.jsonl" \
  --names "1-device,2-tp-ranks" --from-step 11 | tail -3
/usr/bin/python3 "$root/test/train/training_files.py" tp-split "$out/gpt.train.tp2"
/usr/bin/python3 "$root/test/train/training_files.py" memory "$out/gpt.train.tp2.report.json" "$out/gpt.train.tp2"

step "A 145.6B-parameter GPT (80 layers, hidden 12288) exported on the meta device"
/usr/bin/python3 "$root/examples/export.py" gpt-145.6b -o "$out/gpt-145.6b.pt"
"$cleave" import "$out/gpt-145.6b.pt" --summary --timing

step "A model with ops cleave does not support: every kind is listed, exit status 2"
/usr/bin/python3 "$root/examples/export.py" unsupported -o "$out/unsupported.pt"
status=0
"$cleave" import "$out/unsupported.pt" -o "$out/unsupported.mlir" || status=$?
echo "exit status: $status"
[ "$status" -eq 2 ]
