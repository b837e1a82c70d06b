#!/usr/bin/env bash
# The LLM engine on the CPU against llama.cpp (issue 11, items 6 and 7), one run on the dev VM:
# llama-bench -t 1,2 -p 64 -n 64 and rayo bench --model --threads 1 --threads 2 on SmolLM2-135M
# Q4_1 and its Q4_K_M mix (written by rayo quantize, byte-identical to llama-quantize's), the
# two engines alternating, REPS times; then the resident memory of rayo generate. The load
# of the machine is printed before and after (the VM's 2 cores are shared).
# usage: docs/perf/issue11-cpu.sh [RAYO] [REPS]
#   RAYO: a rayo binary (default: builds target/release/rayo with --no-default-features)
#   llama.cpp: scripts/ref/llama-cpp.sh builds it (about 8 minutes on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
RAYO=${1:-}
REPS=${2:-2}
if [ -z "$RAYO" ]; then
  cargo build --release -p rayo-cli --no-default-features >&2
  RAYO=${CARGO_TARGET_DIR:-target}/release/rayo
fi
BIN=$(scripts/ref/llama-cpp.sh)
Q41=$(scripts/fetch-smollm2.sh)
QKM=.cache/models/SmolLM2-135M-Instruct.Q4_K_M.gguf
[ -f "$QKM" ] || "$RAYO" quantize "$Q41" "$QKM" Q4_K_M >&2
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
log=$(mktemp)
for rep in $(seq "$REPS"); do
  for m in "$Q41" "$QKM"; do
    tag=$(basename "$m" .gguf | sed 's/.*\.//')
    echo "## $(basename "$m"), repetition $rep"
    {
      "$BIN/llama-bench" -m "$m" -t 1,2 -p 64 -n 64 -o csv 2>/dev/null |
        awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
          { gsub(/"/, ""); op = ($col["n_prompt"] > 0) ? "pp" $col["n_prompt"] : "tg" $col["n_gen"]
            printf "llama.cpp %s threads %s %.1f tokens/s\n", op, $col["n_threads"], $col["avg_ts"] }'
      "$RAYO" bench --model "$m" --threads 1 --threads 2 --json 2>/dev/null |
        sed -E 's/.*"op":"([a-z0-9]+)".*"threads":([0-9]+).*"tokens_per_s":([0-9.]+).*/rayo      \1 threads \2 \3 tokens\/s/'
    } | sed "s|^|$tag |" | tee -a "$log" | cut -d' ' -f2-
  done
done
# The median of the repetitions per model, row and threads, and rayo / llama.cpp.
echo "## medians over $REPS repetitions (tokens/s)"
python3 - "$log" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault((f[0], f[2], f[4]), {}).setdefault(f[1], []).append(float(f[5]))
print(f"{'model':8} {'row':5} {'threads':>7} {'llama.cpp':>10} {'rayo':>8} {'ratio':>6}")
for (model, op, t), v in sorted(rows.items()):
    l, r = statistics.median(v["llama.cpp"]), statistics.median(v["rayo"])
    print(f"{model:8} {op:5} {t:>7} {l:10.1f} {r:8.1f} {r / l:6.2f}")
PY
rm -f "$log"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "## resident memory of rayo generate (stats line), KV cache f16 for the positions used"
"$RAYO" generate --model "$Q41" --prompt "The capital of France is" --max-tokens 64 --temperature 0 --threads 2 2>&1 >/dev/null | tail -1
