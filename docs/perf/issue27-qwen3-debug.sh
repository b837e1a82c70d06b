#!/usr/bin/env bash
# Issue 27: qwen3 and llama-3.2-3b (heads of 128 values) on CUDA against the CPU engine, which
# llama.cpp's llama-simple matches on the qwen3 file (greedy text on the dev VM). Carried:
# dev-bin/b1/rayo and dev-bin/b1/tok.gguf (`rayo synth --shape tiny --tokenizer SmolLM2`: a small
# file whose tokenizer the synthetic models copy).
set -u
mkdir -p /tmp/b; M=dev-bin/b1/tok.gguf
cp dev-bin/b1/rayo /tmp/b/rayo
R=/tmp/b/rayo
for s in "llama-3.2-3b Q8_0" "qwen3-0.6b Q8_0" "llama-3.2-1b Q8_0"; do set -- $s; [ -f /tmp/$1-$2.gguf ] || $R synth /tmp/$1-$2.gguf --shape $1 --type $2 --tokenizer $M >/dev/null; done
g() { timeout 60 $R generate --model $1 --temperature 0 --prompt "${P:-Hello there, how are}" --max-tokens 12 "${@:2}" 2>&1 | head -c 300 | tr '\n' ' '; echo; }
for f in /tmp/llama-3.2-1b-Q8_0.gguf /tmp/llama-3.2-3b-Q8_0.gguf /tmp/qwen3-0.6b-Q8_0.gguf; do
  echo "== $f"
  echo "cpu: $(g $f --backend cpu)"
  echo "cuda: $(g $f --backend cuda)"
  echo "cuda ctx 64: $(g $f --backend cuda --ctx 64)"
  echo "cpu ctx 64: $(g $f --backend cpu --ctx 64)"
  echo "cuda matvec block: $(RAYO_CUDA_MATVEC=block g $f --backend cuda)"
  echo "cuda matvec warp: $(RAYO_CUDA_MATVEC=warp g $f --backend cuda)"
  echo "one-token prompt cpu: $(P=Hello g $f --backend cpu)"
  echo "one-token prompt cuda: $(P=Hello g $f --backend cuda)"
  echo "one-token prompt cuda f32 decode: $(P=Hello RAYO_CUDA_DECODE=f32 g $f --backend cuda)"
done
