#!/bin/bash
# --print-ir-after=NAME prints, for every name of the pipeline (aicfc --list-passes): each name is
# run in a scenario where it does something (graph passes print only when they change the graph:
# the default is a host compile of the MLP; the table below names the others), and its output
# must hold "// -----// IR after NAME". A name of the pipeline that prints nothing fails the test,
# so a pass or stage added to driver/pipeline.cpp needs a scenario here when the default does not
# reach it.
#   print_ir_every_name.sh BIN_DIR TESTDATA WORK
set -u
BIN=$1 T=$2 W=$3
rm -rf "$W" && mkdir -p "$W"
M=$T/models
gpt2_gpu=(aicfc "$M/gpt2_block_op17/model.onnx" --plan-for cuda:sm_90 --chain-slices 4 --emit plan)
scenario() { # the command for name $1, as words
  case $1 in
  detect-layer-norm) echo aicfc "$M/gpt2_block_op13/model.onnx" --emit graph ;;
  detect-gelu | detect-attention | choose-attention | split-chains | split-k)
    echo "${gpt2_gpu[@]}" ;;
  fold-batch-norm | block-channels)
    echo aicfc "$M/cnn_op13/model.onnx" --shape image=2x3x32x32 --emit plan ;;
  detect-rms-norm | detect-silu | merge-siblings)
    echo aicfc "$M/llama_block_op17/model.onnx" $(cat "$M/llama_block_op17/args.txt") --emit plan ;;
  fold-channel-scale | cse | fold-constants | simplify | prune-padding-taps)
    echo aicfc "$T/data_dims/ssdlite_mnv3_160/model.onnx" --emit plan ;;
  assign-precision | io-precision)
    echo aicfc "$M/bert_layer_op13/model.onnx" $(cat "$M/bert_layer_op13/args.txt") \
         --plan-for cuda:sm_90 --precision fp16 --io-precision fp16 --emit plan ;;
  # No testdata ONNX model has these to rewrite (exporters emit Softmax, HardSwish, no dead
  # nodes, no f64 contraction, no conv_transpose, no batch_norm
  # left after its conv, no plain resize over H and W): the pass manager aicfc runs them in, through aicf-opt.
  detect-softmax) echo aicf-opt "$T/ir/passes/detect_softmax.mcir" --split-input-file \
                    --passes=detect-softmax ;;
  dce) echo aicf-opt "$T/ir/passes/dce.mcir" --split-input-file --passes=dce ;;
  fold-pad) echo aicf-opt "$T/ir/passes/fold_pad.mcir" --split-input-file --passes=fold-pad ;;
  detect-hard-swish) echo aicf-opt "$T/ir/passes/detect_activations.mcir" --split-input-file \
                       --passes=detect-hard-swish ;;
  legalize-f64) echo aicf-opt "$T/ir/passes/legalize_f64.mcir" --split-input-file \
                  --passes=legalize-f64 ;;
  batch-norm-as-affine) echo aicf-opt "$T/ir/passes/batch_norm_as_affine.mcir" \
                          --split-input-file --passes=batch-norm-as-affine ;;
  conv-transpose-as-conv) echo aicf-opt "$T/ir/passes/conv_transpose_as_conv.mcir" \
                            --split-input-file --passes=conv-transpose-as-conv ;;
  separable-resize) echo aicf-opt "$T/ir/passes/separable_resize.mcir" --split-input-file \
                      --passes=separable-resize ;;
  *) echo aicfc "$M/mlp_op13/model.onnx" -o "$W/out" ;;
  esac
}
names=$("$BIN/aicfc" --list-passes | awk '/^  [a-z]/ {print $1}' | awk '!seen[$0]++')
[ -n "$names" ] || { echo "aicfc --list-passes listed nothing"; exit 1; }
fail=0 count=0
for n in $names; do
  read -r -a cmd <<<"$(scenario "$n")"
  tool=${cmd[0]}
  out=$("$BIN/$tool" "${cmd[@]:1}" --print-ir-after="$n" 2>&1 >/dev/null)
  count=$((count + 1))
  if ! grep -qF -- "// -----// IR after $n //----- //" <<<"$out"; then
    echo "FAIL: --print-ir-after=$n printed nothing: $tool ${cmd[*]:1}"
    echo "$out" | tail -5
    fail=1
  fi
done
echo "print-ir-after: $count names checked"
exit $fail
