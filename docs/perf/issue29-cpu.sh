#!/usr/bin/env bash
# The CPU engine at the sizes people run (issue 29), one run on the dev VM: `llama-bench -t 2
# -p 64 -n 64` and `rayo bench --model --threads 2` (llama-bench's rows pp64 and tg64), the two
# engines alternating, REPS times, on Qwen2.5-Coder-0.5B-Instruct (scripts/fetch-qwen2.sh),
# Llama-3.2-1B's shape in Q4_K (`rayo synth`, random weights: speed does not depend on them) and
# Gemma 3 270M Q4_K_M (scripts/fetch-gemma3.sh); then the medians and rayo / llama.cpp, against
# llama-bench's default (`--repack 1`: Q4_K weights interleaved at load) and `--repack 0` (where
# its prompt products take the original layout; it is the faster prefill on some files). The load
# of the machine is printed before (the VM's 2 cores are shared: nothing else should run).
# usage: docs/perf/issue29-cpu.sh [RAYO] [REPS]
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
QWEN=$(scripts/fetch-qwen2.sh)
GEMMA=$(scripts/fetch-gemma3.sh)
L1B=.cache/models/synth-llama-3.2-1b-Q4_K.gguf
[ -f "$L1B" ] || "$RAYO" synth "$L1B" --shape llama-3.2-1b --type Q4_K --tokenizer "$(scripts/fetch-smollm2.sh)" >&2
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
log=$(mktemp)
for rep in $(seq "$REPS"); do
  for m in "$QWEN" "$L1B" "$GEMMA"; do
    tag=$(basename "$m" .gguf | cut -c1-12)
    echo "## $(basename "$m"), repetition $rep"
    {
      "$BIN/llama-bench" -m "$m" -t 2 -p 64 -n 64 --repack 1,0 -o csv 2>/dev/null |
        awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
          { gsub(/"/, ""); op = ($col["n_prompt"] > 0) ? "pp" $col["n_prompt"] : "tg" $col["n_gen"]
            who = ($col["repack"] == 0) ? "llama.cpp-norepack" : "llama.cpp"
            printf "%s %s threads %s %.1f tokens/s\n", who, op, $col["n_threads"], $col["avg_ts"] }'
      "$RAYO" bench --model "$m" --threads 2 --json 2>/dev/null |
        sed -E 's/.*"op":"([a-z0-9]+)".*"threads":([0-9]+).*"tokens_per_s":([0-9.]+).*/rayo      \1 threads \2 \3 tokens\/s/'
    } | sed "s|^|$tag |" | tee -a "$log" | cut -d' ' -f2-
  done
done
echo "## medians over $REPS repetitions (tokens/s)"
python3 - "$log" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault((f[0], f[2], f[4]), {}).setdefault(f[1], []).append(float(f[5]))
print(f"{'model':12} {'row':5} {'threads':>7} {'llama.cpp':>10} {'rayo':>8} {'ratio':>6} {'no repack':>10} {'ratio':>6}")
for (model, op, t), v in sorted(rows.items()):
    l, r, n = (statistics.median(v[k]) for k in ("llama.cpp", "rayo", "llama.cpp-norepack"))
    print(f"{model:12} {op:5} {t:>7} {l:10.1f} {r:8.1f} {r / l:6.2f} {n:10.1f} {r / n:6.2f}")
PY
