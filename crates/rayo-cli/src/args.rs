//! The command line (clap, derive): `rayo info`, `rayo bench`, `rayo ptx`, `rayo gguf`. Every value is
//! checked here, so a bad one is a usage error with the flag and the reason, never a panic later.
//! Numeric flags take `allow_negative_numbers`: `--temperature -1` reaches the value's own check
//! ("must be finite and >= 0") instead of clap's "unexpected argument '-1'".

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "rayo",
    version,
    about = "What this machine has, how fast each rayo backend is, and what a GGUF file holds",
    propagate_version = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The CPU, its instruction sets, the one rayo chose, threads, caches, wgpu adapters, CUDA.
    Info,
    /// Median time of each op × size × backend × threads, as a table or JSON lines.
    #[command(after_help = crate::bench::AFTER_HELP)]
    Bench(BenchArgs),
    /// Writes the PTX of every rayo-ptx kernel variant, one checked file per kernel and target.
    Ptx(PtxArgs),
    /// What a GGUF model file holds: metadata, tensors (name, type, shape, bytes), a count per type.
    Gguf(GgufArgs),
    /// Rewrites a GGUF model in another format, each tensor's type chosen as llama-quantize does.
    #[command(after_help = QUANTIZE_AFTER_HELP)]
    Quantize(QuantizeArgs),
    /// Continues a prompt with a GGUF language model: the prompt, then the text as it is made.
    #[command(after_help = GENERATE_AFTER_HELP)]
    Generate(GenerateArgs),
    /// A conversation with a GGUF chat model, using the model's chat template.
    Chat(ChatArgs),
    /// The token ids of a text, as one JSON array (the model's own tokenizer).
    Tokenize(TokenizeArgs),
    /// A model's perplexity over a text file, as llama-perplexity computes it.
    #[command(after_help = PERPLEXITY_AFTER_HELP)]
    Perplexity(PerplexityArgs),
    /// An OpenAI-compatible HTTP server: many requests at once, batched a step at a time.
    #[command(after_help = SERVE_AFTER_HELP)]
    Serve(ServeArgs),
    /// Writes a GGUF of a known model's dimensions with random weights, for speed runs.
    #[command(after_help = SYNTH_AFTER_HELP)]
    Synth(SynthArgs),
}

const SYNTH_AFTER_HELP: &str = "Speed does not depend on the weights' values: a synthetic model measures what the real one
would (its text is noise). Shapes: llama-3.2-1b (16 layers, 2048 wide, 8192 FFN, 32/8 heads,
128256 tokens, tied embeddings, Llama 3's rope_freqs), llama-3.2-3b (heads of 128 values),
llama-3.1-8b, llama-3.1-70b, smollm2-135m, qwen2-0.5b (q/k/v biases), qwen3-0.6b (per-head q/k
norms, heads of 128 values), gemma3-270m and gemma3-1b (262144 tokens, heads of 256, a window of
512 on 5 of 6 layers), phi3-mini (fused q/k/v and gate/up), tiny, and tiny-llama3, tiny-qwen3,
tiny-gemma3, tiny-phi3, tiny-phi3-long (phi3 with LongRoPE) (for tests). The tokenizer's metadata is copied from a real model file
whose vocabulary is no larger than the shape's.

Example:
  rayo synth /tmp/llama1b-q4k.gguf --shape llama-3.2-1b --type Q4_K --tokenizer .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
  rayo bench --model /tmp/llama1b-q4k.gguf --backend cuda";

#[derive(Debug, Args)]
pub struct SynthArgs {
    /// The file to write.
    #[arg(value_name = "OUT")]
    pub output: PathBuf,
    /// The model's dimensions: llama-3.2-1b, llama-3.2-3b, smollm2-135m, qwen2-0.5b, qwen3-0.6b or tiny.
    #[arg(long, value_name = "NAME", default_value = "llama-3.2-1b")]
    pub shape: String,
    /// The type of every weight matrix (ggml's spelling: Q4_K, Q8_0, F16, ...).
    #[arg(long = "type", value_name = "TYPE", default_value = "Q4_K")]
    pub ty: String,
    /// A GGUF model whose tokenizer the file takes.
    #[arg(long, value_name = "FILE")]
    pub tokenizer: PathBuf,
    /// Seed of the random weights.
    #[arg(long, value_name = "S", default_value_t = 0, allow_negative_numbers = true)]
    pub seed: u64,
}

const GENERATE_AFTER_HELP: &str = "stdout is the prompt exactly as given followed by the generated text, streamed token by
token; statistics (prompt tokens, prefill and decode tokens/s, resident memory) go to stderr.
--temperature 0 is greedy (the first maximum of the logits, as llama.cpp's greedy sampler).

Example:
  scripts/fetch-smollm2.sh
  rayo generate --model .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf --prompt 'The capital of France is' --temperature 0";

/// The model and where it runs.
#[derive(Debug, Args)]
pub struct ModelArgs {
    /// The GGUF model file (architectures: llama, qwen2, qwen3, gemma3, phi3).
    #[arg(long, value_name = "FILE")]
    pub model: PathBuf,
    /// Where the model runs: cpu|cuda|wgpu (cuda: an NVIDIA GPU, rayo's PTX; wgpu: any GPU
    /// through wgpu).
    #[arg(long, value_name = "NAME", default_value = "cpu", value_parser = parse_llm_backend)]
    pub backend: String,
    /// CPU threads (default: every core).
    #[arg(long, value_name = "N", value_parser = parse_threads, default_value_t = default_threads(), allow_negative_numbers = true)]
    pub threads: usize,
    /// Positions the KV cache holds (default: the model's context length, at most 4096).
    #[arg(long, value_name = "N", value_parser = parse_ctx, allow_negative_numbers = true)]
    pub ctx: Option<usize>,
    /// Keep the KV cache in f32 instead of f16.
    #[arg(long)]
    pub kv_f32: bool,
    /// CUDA: every row through the one-row kernels (no tensor cores), so a sequence's logits
    /// are the same bits alone or batched with any others (`rayo serve`); slower from 16
    /// rows a step on. The CPU backend always is.
    #[arg(long)]
    pub deterministic: bool,
    #[command(flatten)]
    pub ranks: RankArgs,
}

/// Where a model's tensor-parallel ranks run: threads of this process, or processes that meet
/// at a rendezvous.
#[derive(Debug, Args, Clone)]
pub struct RankArgs {
    /// Split the model over N tensor-parallel ranks (Megatron's split: attention heads, the
    /// MLP's width, the output head's vocabulary). Alone: on cuda with a GPU for each rank,
    /// this process is rank 0 and starts the other ranks as processes (rank r on GPU r, their
    /// sums through NCCL); else each rank a thread of this process (on cpu sharing --threads;
    /// on cuda sharing the GPUs, the sums through the host). --rank-processes: processes
    /// always. With --rank and --rendezvous: the size of a world of processes.
    #[arg(long, visible_alias = "world-size", value_name = "N", default_value_t = 1, value_parser = parse_world, allow_negative_numbers = true)]
    pub tensor_parallel: usize,
    /// This process is rank R (0 to N-1) of a world of N processes, one per GPU or host, each
    /// started with the same model file, backend and flags (by hand, or by any launcher). Rank
    /// 0 does the command's work; every other rank runs its part of the model for rank 0 and
    /// ends when rank 0 does. On cuda, rank R uses GPU R mod the GPUs it sees.
    #[arg(long, value_name = "R", requires = "rendezvous")]
    pub rank: Option<usize>,
    /// HOST:PORT where a world of processes meets: rank 0 listens there (waiting up to 5
    /// minutes for every other rank), the others connect to it (the same minutes for rank 0
    /// to come).
    #[arg(long, value_name = "HOST:PORT", requires = "rank")]
    pub rendezvous: Option<String>,
    /// With --tensor-parallel N alone: this process is rank 0 and starts ranks 1 to N-1 as
    /// processes of this program on this host (each with these flags, meeting at a free local
    /// port) rather than threads. The default on cuda where each rank has a GPU of its own
    /// (one process per GPU, as NCCL expects); this flag asks for it everywhere. (The ranks it
    /// starts get it too, beside their --rank: there it does nothing.)
    #[arg(long)]
    pub rank_processes: bool,
}

/// The most ranks `--tensor-parallel` takes.
pub const MAX_WORLD: usize = 64;

/// A `--tensor-parallel` world size: 1 to [`MAX_WORLD`].
pub fn parse_world(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if (1..=MAX_WORLD).contains(&n) => Ok(n),
        Ok(_) => Err(format!("from 1 to {MAX_WORLD} ranks")),
        Err(_) => Err("not a whole number".into()),
    }
}

/// How the next token is chosen (llama.cpp's sampler chain: penalties, top-k, top-p, min-p,
/// temperature).
#[derive(Debug, Args)]
pub struct SampleArgs {
    /// 0 is greedy.
    #[arg(long, value_name = "T", default_value_t = 0.8, allow_negative_numbers = true)]
    pub temperature: f32,
    /// Keep the K most likely tokens (0: all).
    #[arg(long, value_name = "K", default_value_t = 40, allow_negative_numbers = true)]
    pub top_k: usize,
    /// Keep the most likely tokens whose probabilities sum to P (1: all).
    #[arg(long, value_name = "P", default_value_t = 0.95, allow_negative_numbers = true)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one (0: none).
    #[arg(long, value_name = "P", default_value_t = 0.05, allow_negative_numbers = true)]
    pub min_p: f32,
    /// Divide the logits of recently seen tokens by this (1: off).
    #[arg(long, value_name = "R", default_value_t = 1.0, allow_negative_numbers = true)]
    pub repeat_penalty: f32,
    /// Random seed (default: from the clock). The same seed gives the same text.
    #[arg(long, value_name = "S", allow_negative_numbers = true)]
    pub seed: Option<u64>,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The text to continue (special tokens such as <|im_start|> are recognised).
    #[arg(long, value_name = "TEXT")]
    pub prompt: String,
    /// The most tokens to generate.
    #[arg(long, value_name = "N", default_value_t = 128, allow_negative_numbers = true)]
    pub max_tokens: usize,
    #[command(flatten)]
    pub sample: SampleArgs,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// A system message to start the conversation with.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// The most tokens per reply.
    #[arg(long, value_name = "N", default_value_t = 512, allow_negative_numbers = true)]
    pub max_tokens: usize,
    /// Print statistics after each reply (stderr).
    #[arg(long)]
    pub verbose: bool,
    #[command(flatten)]
    pub sample: SampleArgs,
}

const SERVE_AFTER_HELP: &str = "Endpoints: POST /v1/chat/completions, POST /v1/completions (streamed as server-sent events
with \"stream\": true), GET /v1/models, GET /health (200 ready; 503 loading, draining or after an engine failure, with
the error), GET /metrics (Prometheus text), POST /tokenize, POST /detokenize, POST /apply-template
(the prompt text a chat request's messages render to). With an API key (--api-key,
--api-key-file or RAYO_API_KEY) every route but /health needs `Authorization: Bearer KEY` or
`X-Api-Key: KEY`. The bound address is printed on stderr (--port 0 picks a free port); one log
line per request on stderr (RUST_LOG).
SIGINT/SIGTERM: no new requests, running ones get --grace seconds, then exit 0; a second signal
exits at once (status 1). A failed engine step: /health and new requests answer 503 and, by
default, the server drains and exits 1 (--on-engine-error).
A request naming another model is answered by this one (its `model` says which; --strict-model-name:
404). A field that would change the answer and is not supported is a 400 naming it; unknown
fields are logged and ignored.
Sampling fields left out of a request follow llama-server (temperature 0.8, top_k 40, top_p 0.95,
min_p 0.05); temperature 0 is greedy and gives `rayo generate --temperature 0`'s text.

Example:
  rayo serve --model .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf --parallel 4 --ctx 2048
  curl -s localhost:8080/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"max_tokens\": 32}'";

#[derive(Debug, Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    pub host: String,
    /// The port (0: any free one; the address is printed on stderr).
    #[arg(long, value_name = "N", default_value_t = 8080)]
    pub port: u16,
    /// Requests run at once (slots, each with its own KV cache of --ctx positions).
    #[arg(long, value_name = "N", default_value_t = 4, value_parser = parse_parallel, allow_negative_numbers = true)]
    pub parallel: usize,
    /// Require this key (Authorization: Bearer KEY or X-Api-Key: KEY) on every route but /health.
    /// Visible to other users in the process list: --api-key-file or RAYO_API_KEY are not.
    #[arg(long, value_name = "KEY", conflicts_with = "api_key_file")]
    pub api_key: Option<String>,
    /// Read the API key from this file (its first line). Without either flag, the environment
    /// variable RAYO_API_KEY is the key when set.
    #[arg(long, value_name = "FILE")]
    pub api_key_file: Option<PathBuf>,
    /// The model's name in /v1/models and in every response (default: the file name without .gguf).
    #[arg(long, value_name = "NAME")]
    pub alias: Option<String>,
    /// Answer 404 to a request that names another model (vLLM's way), instead of serving it with
    /// this one (llama-server's and Ollama's way, the default).
    #[arg(long)]
    pub strict_model_name: bool,
    /// Requests that may wait for a slot (queued, or being read and tokenized); more are
    /// answered 429 before any work is done for them.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = parse_parallel, allow_negative_numbers = true)]
    pub queue: usize,
    /// The largest request body in bytes; a larger one is answered 413.
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20, value_parser = parse_count, allow_negative_numbers = true)]
    pub body_limit: usize,
    /// Seconds a client has to send a request's headers, from their first byte; then the
    /// connection is closed (against clients that trickle them). 0: no limit.
    #[arg(long, value_name = "S", default_value_t = 10, allow_negative_numbers = true)]
    pub header_timeout: u64,
    /// Seconds a client has to send a request's body once its headers are in; then 408. 0: no limit.
    #[arg(long, value_name = "S", default_value_t = 30, allow_negative_numbers = true)]
    pub body_timeout: u64,
    /// Seconds a keep-alive connection with no request in flight stays open (longer than a load
    /// balancer's idle timeout, 60 s on many, so it never reuses one closed here). 0: no limit.
    #[arg(long, value_name = "S", default_value_t = 75, allow_negative_numbers = true)]
    pub idle_timeout: u64,
    /// The most tokens a request may ask for (max_tokens); more is a 400 naming both numbers,
    /// and a request without max_tokens gets this many at most. Default: up to the context.
    #[arg(long, value_name = "N", value_parser = parse_count, allow_negative_numbers = true)]
    pub max_tokens_limit: Option<usize>,
    /// After an engine step fails (a CUDA fault is sticky): exit (drain, then exit 1, for an
    /// orchestrator to restart the server) or stay (up but unhealthy until stopped). Either way
    /// /health and new requests answer 503 with the error.
    #[arg(long, value_name = "WHAT", default_value = "exit", value_parser = ["exit", "stay"])]
    pub on_engine_error: String,
    /// A request's time limit in seconds (then it ends with finish_reason "length").
    #[arg(long, value_name = "S", default_value_t = 600, allow_negative_numbers = true)]
    pub timeout: u64,
    /// Seconds running requests get to finish after SIGINT/SIGTERM.
    #[arg(long, value_name = "S", default_value_t = 30, allow_negative_numbers = true)]
    pub grace: u64,
    /// The engine behind the slots: batch (one step's rows of every slot through each weight
    /// matrix at once; the CPU and CUDA backends) or pool (one session per slot, run one after another;
    /// the backend's default where batch is not available).
    #[arg(long, value_name = "NAME", default_value = "batch", value_parser = ["batch", "pool"])]
    pub engine: String,
    /// Seconds between SSE keep-alive comments while a streamed request has nothing to send.
    #[arg(long, value_name = "S", default_value_t = 10, value_parser = parse_parallel, allow_negative_numbers = true)]
    pub keep_alive: usize,
    /// The most tokens one engine step runs: every running request's next token, then chunks
    /// of waiting prompts.
    #[arg(long, value_name = "N", default_value_t = 256, value_parser = parse_parallel, allow_negative_numbers = true)]
    pub step_tokens: usize,
}

/// A whole number from 1 (tokens, bytes).
pub fn parse_count(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("a whole number from 1".into()),
    }
}

/// 1 ..= 1024 (slots, queue places, step tokens).
pub fn parse_parallel(s: &str) -> Result<usize, String> {
    let n: usize = s.trim().parse().map_err(|_| "not a whole number".to_string())?;
    if (1..=1 << 16).contains(&n) {
        Ok(n)
    } else {
        Err("from 1 to 65536".into())
    }
}

#[derive(Debug, Args)]
pub struct TokenizeArgs {
    /// A GGUF file with a tokenizer (a model, or a vocab-only file).
    #[arg(long, value_name = "FILE")]
    pub model: PathBuf,
    /// The text to tokenize.
    #[arg(long, value_name = "TEXT")]
    pub text: String,
    /// Do not add the model's BOS/EOS tokens (llama-tokenize --no-bos).
    #[arg(long)]
    pub no_special: bool,
    /// Treat special-token text such as <|im_start|> as plain text.
    #[arg(long)]
    pub no_parse_special: bool,
}

const PERPLEXITY_AFTER_HELP: &str = "As llama-perplexity: the text (one trailing newline dropped) tokenized with the model's BOS,
cut into chunks of --ctx tokens, each run from an empty cache with its first token replaced by
BOS (where the model adds one) and scored on its second half. Progress ([chunk]PPL so far) and
timing on stderr; `PPL = X +/- Y` on stdout at the end.

Example:
  scripts/fetch-text.sh
  rayo perplexity --model .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf --file .cache/text/debian-policy-4.6.2.0.txt --chunks 100";

#[derive(Debug, Args)]
pub struct PerplexityArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// The text to score (UTF-8).
    #[arg(long, value_name = "FILE")]
    pub file: PathBuf,
    /// Score at most N chunks (default: every whole chunk of the text).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub chunks: Option<u32>,
}

/// A backend that can run a model.
pub fn parse_llm_backend(s: &str) -> Result<String, String> {
    let b = s.trim().to_ascii_lowercase();
    if crate::llm::LLM_BACKENDS.contains(&b.as_str()) {
        Ok(b)
    } else {
        Err(format!("unknown backend for a model; known: {}", crate::llm::LLM_BACKENDS.join(" ")))
    }
}

/// A KV cache size: 1 ..= 2^20 positions.
pub fn parse_ctx(s: &str) -> Result<usize, String> {
    let n: usize = s.trim().parse().map_err(|_| "not a whole number".to_string())?;
    if (1..=1 << 20).contains(&n) {
        Ok(n)
    } else {
        Err("a context of 1 to 1048576 positions".into())
    }
}

const QUANTIZE_AFTER_HELP: &str = "Types: Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K
F16 BF16 F32 (Q3_K, Q4_K and Q5_K are Q3_K_M, Q4_K_M and Q5_K_M, as in llama-quantize).
The mixes follow llama.cpp: Q4_K_M keeps norms in F32, gives some attn_v and ffn_down tensors
Q6_K, and a tensor whose rows are not a multiple of 256 wide falls back to Q5_0, Q5_1 or Q8_0.
Quantized inputs are requantized (dequantized to f32 first), as llama-quantize --allow-requantize.";

#[derive(Debug, Args)]
pub struct QuantizeArgs {
    /// The model to read (GGUF v2 or v3).
    #[arg(value_name = "IN")]
    pub input: PathBuf,
    /// The file to write (written as OUT.part, renamed when complete).
    #[arg(value_name = "OUT")]
    pub output: PathBuf,
    /// The target type or mix (see below).
    #[arg(value_name = "TYPE", value_parser = parse_file_type)]
    pub ty: String,
    /// Threads that convert each tensor's rows (default: every core).
    #[arg(long, value_name = "N", value_parser = parse_threads, default_value_t = default_threads(), allow_negative_numbers = true)]
    pub threads: usize,
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A `rayo quantize` TYPE, as llama-quantize names it.
pub fn parse_file_type(s: &str) -> Result<String, String> {
    match crate::quantize::mix::FileType::from_name(s.trim()) {
        Some(t) => Ok(t.name().to_string()),
        None => Err(format!("unknown type; known: {}", crate::quantize::mix::NAMES.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(" "))),
    }
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// An op to measure (repeatable; default: a headline set). `--op list` prints every op per backend.
    #[arg(long = "op", value_name = "NAME")]
    pub ops: Vec<String>,
    /// Elements of a vector op, or n of an n×n matrix op (repeatable): 1000, 100K, 10M, 1e6.
    #[arg(long = "size", value_name = "N", value_parser = parse_size, allow_negative_numbers = true)]
    pub sizes: Vec<usize>,
    /// A backend (repeatable): scalar sse2 avx2 avx512 neon simd128, cpu (the one rayo selects),
    /// wgpu, cuda, all. Default: all — every backend this machine has, side by side.
    #[arg(long = "backend", value_name = "NAME", value_parser = parse_backend)]
    pub backends: Vec<String>,
    /// CPU threads (repeatable; default 1).
    #[arg(long = "threads", value_name = "N", value_parser = parse_threads, allow_negative_numbers = true)]
    pub threads: Vec<usize>,
    /// One JSON object per line (op, n, backend, ns, gbps or gflops) instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Fewer sizes and short samples: seconds for the whole run, on every backend.
    #[arg(long)]
    pub quick: bool,
    /// A GGUF language model: measure llama-bench's rows pp64 (a 64-token prompt in one batch)
    /// and tg64 (64 tokens one at a time) in tokens/s instead of ops; one --backend cpu|cuda|wgpu
    /// (default cpu; pp512 and tg128 on cuda).
    #[arg(long, value_name = "FILE")]
    pub model: Option<PathBuf>,
    /// With --model: its tensor-parallel ranks (as `rayo generate`'s), each rank with the
    /// --threads given.
    #[command(flatten)]
    pub ranks: RankArgs,
}

#[derive(Debug, Args)]
pub struct PtxArgs {
    /// The directory to write `<kernel>.sm_<N>.ptx` files into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// A target SM, `90` or `sm_90` (repeatable; default: 80 and 90).
    #[arg(long = "sm", value_name = "N", value_parser = parse_sm, allow_negative_numbers = true)]
    pub sms: Vec<u32>,
}

#[derive(Debug, Args)]
pub struct GgufArgs {
    /// The GGUF file (versions 2 and 3).
    pub file: PathBuf,
    /// One JSON object (version, alignment, data_offset, metadata in full, tensors) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The most elements (or n of an n×n matrix) `--size` takes: 2^32 f32s are 16 GiB per buffer.
pub const MAX_SIZE: usize = 1 << 32;
/// The most CPU threads `--threads` takes.
pub const MAX_THREADS: usize = 4096;

/// Every name `--backend` takes.
pub const BACKEND_NAMES: &[&str] = &["scalar", "sse2", "avx2", "avx512", "neon", "simd128", "cpu", "wgpu", "cuda", "all"];

/// `1000`, `100K`, `10M`, `1G`, `1e6`, `2.5M`: at least 1, at most [`MAX_SIZE`].
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim().to_ascii_uppercase();
    let (num, mul) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1e3),
        Some('M') => (&t[..t.len() - 1], 1e6),
        Some('G') => (&t[..t.len() - 1], 1e9),
        _ => (&t[..], 1.0),
    };
    let v: f64 = num.parse().map_err(|_| "not a size (examples: 1000, 100K, 10M, 1e6)".to_string())?;
    let v = (v * mul).round();
    if v.is_nan() || v < 1.0 {
        return Err("a size must be at least 1".into());
    }
    if v > MAX_SIZE as f64 {
        return Err(format!("larger than the most rayo bench takes ({MAX_SIZE} = 2^32)"));
    }
    Ok(v as usize)
}

/// A positive thread count, at most [`MAX_THREADS`].
pub fn parse_threads(s: &str) -> Result<usize, String> {
    let n: usize = s.trim().parse().map_err(|_| "not a whole number".to_string())?;
    match n {
        0 => Err("at least 1 thread".into()),
        n if n > MAX_THREADS => Err(format!("at most {MAX_THREADS} threads")),
        n => Ok(n),
    }
}

/// A backend name from [`BACKEND_NAMES`], lowercased.
pub fn parse_backend(s: &str) -> Result<String, String> {
    let b = s.trim().to_ascii_lowercase();
    if BACKEND_NAMES.contains(&b.as_str()) {
        Ok(b)
    } else {
        Err(format!("unknown backend; known: {}", BACKEND_NAMES.join(" ")))
    }
}

/// `90` or `sm_90`, within 50..=120.
pub fn parse_sm(s: &str) -> Result<u32, String> {
    let sm: u32 = s.trim().trim_start_matches("sm_").parse().map_err(|_| "not a target like 90 or sm_90".to_string())?;
    if (50..=120).contains(&sm) {
        Ok(sm)
    } else {
        Err(format!("sm_{sm} is outside 50..=120"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;
    use clap::CommandFactory;

    fn parse(v: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("rayo").chain(v.iter().copied()))
    }

    fn bench(v: &[&str]) -> BenchArgs {
        match parse(&[&["bench"], v].concat()).unwrap().command {
            Command::Bench(b) => b,
            c => panic!("{c:?}"),
        }
    }

    fn error(v: &[&str]) -> String {
        parse(v).unwrap_err().to_string()
    }

    #[test]
    fn the_command_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn sizes_take_suffixes_and_exponents() {
        assert_eq!(parse_size("1000"), Ok(1000));
        assert_eq!(parse_size("100K"), Ok(100_000));
        assert_eq!(parse_size("10m"), Ok(10_000_000));
        assert_eq!(parse_size("1e6"), Ok(1_000_000));
        assert_eq!(parse_size("2.5M"), Ok(2_500_000));
        assert_eq!(parse_size("4G"), Ok(4_000_000_000));
        assert_eq!(parse_size(&MAX_SIZE.to_string()), Ok(MAX_SIZE));
    }

    #[test]
    fn bad_sizes_are_refused_with_a_reason() {
        for bad in ["0", "0.4", "-5", "abc", "", "K", "nan", "inf", "1e30", "5G", "18446744073709551616"] {
            assert!(parse_size(bad).is_err(), "{bad:?} accepted");
        }
        assert!(error(&["bench", "--size", "0"]).contains("at least 1"));
        assert!(error(&["bench", "--size", "1e30"]).contains("larger than"));
        assert!(error(&["bench", "--size", "abc"]).contains("not a size"));
    }

    #[test]
    fn threads_must_be_positive() {
        assert!(error(&["bench", "--threads", "0"]).contains("at least 1 thread"));
        assert!(error(&["bench", "--threads=-1"]).contains("not a whole number"));
        assert!(error(&["bench", "--threads", "x"]).contains("not a whole number"));
        assert!(error(&["bench", "--threads", "100000"]).contains("at most"));
        assert_eq!(bench(&["--threads", "2", "--threads", "1"]).threads, vec![2, 1]);
    }

    #[test]
    fn backends_are_checked_and_lowercased() {
        assert_eq!(bench(&["--backend", "AVX2", "--backend", "wgpu"]).backends, vec!["avx2", "wgpu"]);
        let e = error(&["bench", "--backend", "metal"]);
        assert!(e.contains("unknown backend") && e.contains("avx512") && e.contains("cuda"), "{e}");
    }

    #[test]
    fn every_existing_flag_keeps_its_spelling() {
        let b =
            bench(&["--op", "add", "--op", "dot", "--size", "100K", "--size", "1e3", "--backend", "scalar", "--threads", "2", "--json", "--quick"]);
        assert_eq!(b.ops, vec!["add", "dot"]);
        assert_eq!(b.sizes, vec![100_000, 1000]);
        assert_eq!(b.backends, vec!["scalar"]);
        assert!(b.json && b.quick);
        let d = bench(&[]);
        assert!(d.ops.is_empty() && d.sizes.is_empty() && d.backends.is_empty() && !d.json && !d.quick);
    }

    #[test]
    fn ptx_flags() {
        let Command::Ptx(p) = parse(&["ptx", "--out", "/tmp/x", "--sm", "sm_80", "--sm", "90"]).unwrap().command else { panic!() };
        assert_eq!(p.sms, vec![80, 90]);
        assert_eq!(p.out, PathBuf::from("/tmp/x"));
        assert!(error(&["ptx"]).contains("--out"));
        assert!(error(&["ptx", "--out"]).contains("--out"));
        assert!(error(&["ptx", "--out", "/tmp/x", "--sm", "abc"]).contains("not a target"));
        assert!(error(&["ptx", "--out", "/tmp/x", "--sm", "20"]).contains("outside"));
        assert!(error(&["ptx", "--out", "/tmp/x", "--bogus"]).contains("--bogus"));
    }

    #[test]
    fn gguf_flags() {
        let Command::Gguf(g) = parse(&["gguf", "m.gguf", "--json"]).unwrap().command else { panic!() };
        assert_eq!((g.file, g.json), (PathBuf::from("m.gguf"), true));
        let Command::Gguf(g) = parse(&["gguf", "m.gguf"]).unwrap().command else { panic!() };
        assert!(!g.json);
        assert!(error(&["gguf"]).contains("<FILE>"));
    }

    #[test]
    fn help_and_version() {
        assert_eq!(parse(&["--version"]).unwrap_err().kind(), ErrorKind::DisplayVersion);
        assert_eq!(parse(&["bench", "--version"]).unwrap_err().kind(), ErrorKind::DisplayVersion);
        for sub in ["info", "bench", "ptx", "gguf"] {
            let e = parse(&[sub, "--help"]).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::DisplayHelp, "{sub}");
        }
        let help = parse(&["bench", "--help"]).unwrap_err().to_string();
        assert!(help.contains("--threads") && help.contains("--quick") && help.contains("100K"), "{help}");
        assert_eq!(parse(&[]).unwrap_err().kind(), ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand);
        assert_eq!(parse(&["frobnicate"]).unwrap_err().kind(), ErrorKind::InvalidSubcommand);
    }
}
