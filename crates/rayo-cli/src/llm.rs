//! The LLM commands: `rayo generate`, `rayo chat`, `rayo tokenize` (and the model side of
//! `rayo bench --model`). The backend is chosen at run time (`--backend`); everything after
//! that runs over `rayo_llm::Forward`.

use crate::args::{ChatArgs, GenerateArgs, ModelArgs, RankArgs, SampleArgs, TokenizeArgs};
use crate::out::{errln, outln};
use rayo_llm::chat::{ChatTemplate, Message};
use rayo_llm::collective::Collective;
use rayo_llm::cpu::Cpu;
use rayo_llm::sample::{Sampler, SamplerConfig};
use rayo_llm::{
    Backend, BatchOptions, Forward, KvType, Logits, Model, Rendezvous, Session, SessionOptions, Shard, TensorParallel, TensorParallelBatch,
};
use std::io::{BufRead, Write};
use std::path::Path;
use std::time::Duration;

/// Opens and checks a model file, with a hint when it is absent (errors: [`crate::input`]).
pub fn open_model(path: &Path) -> Result<Model, String> {
    let f = crate::input::open_gguf(path, "model file", crate::input::FETCH_HINT)?;
    Model::from_file(f).map_err(|e| format!("{}: {e}", path.display()))
}

/// The backends `--backend` takes for a model.
pub const LLM_BACKENDS: &[&str] = &[
    "cpu",
    #[cfg(feature = "cuda")]
    "cuda",
    #[cfg(feature = "gpu")]
    "wgpu",
];

/// A session on the named backend, its KV cache holding `context` positions.
pub struct Engine {
    run: Box<dyn Forward>,
}

impl Engine {
    /// `deterministic`: [`cuda_backend`]'s.
    pub fn with_kv(model: &Model, backend: &str, threads: usize, context: usize, kv_type: KvType, deterministic: bool) -> Result<Engine, String> {
        Engine::with_options(
            model,
            backend,
            threads,
            SessionOptions { context, kv_type, ..SessionOptions::default() },
            deterministic,
            &Ranks::Threads(1),
        )
    }

    /// A session sized by `opts`; over more than one rank ([`Ranks`]), the model split over
    /// them, each rank of this process on `threads` threads.
    pub fn with_options(
        model: &Model,
        backend: &str,
        threads: usize,
        opts: SessionOptions,
        deterministic: bool,
        ranks: &Ranks,
    ) -> Result<Engine, String> {
        // (the CPU is deterministic always; wgpu runs each sequence in its own session)
        #[cfg(not(feature = "cuda"))]
        let _ = deterministic;
        let world = ranks.world();
        if world > 1 {
            let started = match backend {
                "cpu" => ranks.forward(model, opts, move |part: &Model, group| Ok(cpu_rank(part, group, threads))),
                #[cfg(feature = "cuda")]
                "cuda" => ranks.forward(model, opts, move |part: &Model, group| cuda_rank(part, group, deterministic)),
                other => return Err(no_collectives(world, other)),
            };
            let run = started.map_err(|e| format!("--tensor-parallel {world}: {e}"))?;
            return Ok(Engine { run: Box::new(run) });
        }
        let run: Box<dyn Forward> = match backend {
            "cpu" => Box::new(Session::new(model, Cpu::new(model.file().clone(), threads), opts).map_err(|e| e.to_string())?),
            #[cfg(feature = "cuda")]
            "cuda" => Box::new(Session::new(model, cuda_backend(model, deterministic)?, opts).map_err(|e| e.to_string())?),
            #[cfg(feature = "gpu")]
            "wgpu" => {
                let wgpu = rayo_llm::wgpu::Wgpu::new(model.file().clone()).map_err(|e| e.to_string())?;
                Box::new(Session::new(model, wgpu, opts).map_err(|e| e.to_string())?)
            }
            other => return Err(format!("backend {other:?} cannot run a model (available: {})", LLM_BACKENDS.join(", "))),
        };
        Ok(Engine { run })
    }

    pub fn rewind(&mut self, pos: usize) {
        self.run.rewind(pos)
    }

    pub fn forward_last(&mut self, tokens: &[u32]) -> Result<Vec<f32>, String> {
        self.run.forward(tokens, Logits::Last).map_err(|e| e.to_string())
    }

    pub fn forward(&mut self) -> &mut dyn Forward {
        &mut *self.run
    }

    /// The session itself (`rayo serve` pools several).
    pub fn into_forward(self) -> Box<dyn Forward> {
        self.run
    }
}

/// The CUDA backend for `model`; `deterministic`: every row through the one-row kernels
/// ([`rayo_llm::cuda::Cuda::with_deterministic`]).
#[cfg(feature = "cuda")]
pub fn cuda_backend(model: &Model, deterministic: bool) -> Result<rayo_llm::cuda::Cuda, String> {
    Ok(rayo_llm::cuda::Cuda::new(model.file().clone()).map_err(|e| e.to_string())?.with_deterministic(deterministic))
}

/// Where a model's tensor-parallel ranks run (`--tensor-parallel`, `--rank`, `--rendezvous`).
pub enum Ranks {
    /// `n` threads of this process (1: the model whole).
    Threads(usize),
    /// Rank 0 of a world of processes: this process hosts it and does the command's work.
    Host(Rendezvous),
    /// Another rank of a world of processes: this process runs its part for rank 0
    /// ([`serve_other_rank`]).
    Join(Rendezvous),
}

/// How long a rank waits at a rendezvous for the others.
const RENDEZVOUS_WAIT: Duration = Duration::from_secs(300);

impl Ranks {
    /// The ranks of a command's flags on `backend`. With `--tensor-parallel N` alone where
    /// ranks are processes (cuda with a GPU for each rank, or `--rank-processes`), this starts
    /// ranks 1 to N-1 ([`crate::local_ranks`]) and is rank 0.
    pub fn of(a: &RankArgs, backend: &str) -> Result<Ranks, String> {
        let world = a.tensor_parallel;
        // (clap makes --rank and --rendezvous come together)
        let (Some(rank), Some(addr)) = (a.rank, &a.rendezvous) else {
            if world > 1 && (a.rank_processes || gpu_each(backend, world)) {
                let addr = crate::local_ranks::start(world)?;
                let rv = Rendezvous { addr, shard: Shard { rank: 0, world }, wait: RENDEZVOUS_WAIT };
                return Ok(Ranks::Host(rv));
            }
            return Ok(Ranks::Threads(world));
        };
        if world < 2 {
            return Err(format!("--rank {rank} --rendezvous {addr}: a world of processes needs --tensor-parallel N of 2 or more (N = {world})"));
        }
        if rank >= world {
            return Err(format!("--rank {rank} is not below --tensor-parallel {world} (ranks are 0 to {})", world - 1));
        }
        let rv = Rendezvous { addr: addr.clone(), shard: Shard { rank, world }, wait: RENDEZVOUS_WAIT };
        Ok(if rank == 0 { Ranks::Host(rv) } else { Ranks::Join(rv) })
    }

    pub fn world(&self) -> usize {
        match self {
            Ranks::Threads(n) => *n,
            Ranks::Host(rv) | Ranks::Join(rv) => rv.shard.world,
        }
    }

    /// The threads each rank of this process gets out of `threads` (its threads share them;
    /// a process's one rank takes them all).
    pub fn threads_each(&self, threads: usize) -> usize {
        match self {
            Ranks::Threads(n) => (threads / n).max(1),
            _ => threads,
        }
    }

    /// The world of one sequence these ranks make, each rank's backend as `backend` makes it.
    fn forward<B, F>(&self, model: &Model, opts: SessionOptions, backend: F) -> rayo_llm::Result<TensorParallel>
    where
        B: Backend + 'static,
        F: Fn(&Model, Box<dyn Collective>) -> rayo_llm::Result<B> + Send + Sync + 'static,
    {
        match self {
            Ranks::Host(rv) => TensorParallel::host(model, rv, opts, backend),
            _ => TensorParallel::start(model, self.world(), opts, backend),
        }
    }

    /// The world of many sequences (`rayo serve`'s) these ranks make, as [`Ranks::forward`].
    pub fn batch<B, F>(&self, model: &Model, opts: BatchOptions, backend: F) -> rayo_llm::Result<TensorParallelBatch>
    where
        B: Backend + 'static,
        F: Fn(&Model, Box<dyn Collective>) -> rayo_llm::Result<B> + Send + Sync + 'static,
    {
        match self {
            Ranks::Host(rv) => TensorParallelBatch::host(model, rv, opts, backend),
            _ => TensorParallelBatch::start(model, self.world(), opts, backend),
        }
    }
}

/// Whether `world` ranks on `backend` each get a GPU of their own: CUDA ranks are then
/// processes, one per GPU, whose sums run through NCCL. Ranks that share a GPU cannot share an
/// NCCL world, and their sums go through the host, faster between threads than over a local
/// socket (an H200, the Llama-3.2-1B shape on 2 ranks: 237 tokens/s as threads, 76 as
/// processes; docs/perf/issue30.md).
fn gpu_each(backend: &str, world: usize) -> bool {
    #[cfg(feature = "cuda")]
    if backend == "cuda" {
        return rayo::cuda::device_count() >= world;
    }
    let _ = (backend, world);
    false
}

/// This process as a rank other than 0 ([`Ranks::Join`]): runs its part of the model at
/// `backend` for rank 0 until rank 0 ends, then `Ok(true)`; for any other ranks `Ok(false)`
/// (the command does its work).
pub fn serve_other_rank(model: &Path, backend: &str, threads: usize, deterministic: bool, ranks: &RankArgs) -> Result<bool, String> {
    if ranks.rank.is_none() {
        return Ok(false);
    }
    let Ranks::Join(rv) = Ranks::of(ranks, backend)? else { return Ok(false) };
    #[cfg(not(feature = "cuda"))]
    let _ = deterministic;
    let m = open_model(model)?;
    let Shard { rank, world } = rv.shard;
    errln!("rayo: rank {rank} of {world} on {backend}, joining rank 0 at {}", rv.addr);
    let served = match backend {
        "cpu" => rayo_llm::serve_rank(&m, &rv, move |part: &Model, group| Ok(cpu_rank(part, group, threads))),
        #[cfg(feature = "cuda")]
        "cuda" => rayo_llm::serve_rank(&m, &rv, move |part: &Model, group| cuda_rank(part, group, deterministic)),
        other => return Err(no_collectives(world, other)),
    };
    served.map_err(|e| format!("rank {rank} of {world}: {e}"))?;
    errln!("rayo: rank {rank} of {world}: rank 0 is done");
    Ok(true)
}

/// The error for `--tensor-parallel` on a backend without collectives.
pub fn no_collectives(world: usize, backend: &str) -> String {
    format!("--tensor-parallel {world}: the {backend} backend has no collectives (cpu and cuda have)")
}

/// A tensor-parallel rank's CPU backend: `group`'s rank of `part` on `threads` threads.
pub fn cpu_rank(part: &Model, group: Box<dyn Collective>, threads: usize) -> Cpu {
    Cpu::new(part.file().clone(), threads).with_group(group)
}

/// A tensor-parallel rank's CUDA backend: rank r on device r (ranks share devices when there
/// are fewer).
#[cfg(feature = "cuda")]
pub fn cuda_rank(part: &Model, group: Box<dyn Collective>, deterministic: bool) -> rayo_llm::Result<rayo_llm::cuda::Cuda> {
    let device = group.shard().rank % rayo::cuda::device_count().max(1);
    Ok(rayo_llm::cuda::Cuda::on_device(part.file().clone(), device)?.with_deterministic(deterministic).with_group(group))
}

/// Resident memory of this process in kB (Linux), for the stats lines.
pub fn resident_kb() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// [`serve_other_rank`] for a command's model flags.
pub fn other_rank(a: &ModelArgs) -> Result<bool, String> {
    serve_other_rank(&a.model, &a.backend, a.threads, a.deterministic, &a.ranks)
}

fn engine(m: &Model, a: &ModelArgs) -> Result<Engine, String> {
    let ctx = a.ctx.unwrap_or(m.config().context_length.min(4096));
    let kv_type = if a.kv_f32 { KvType::F32 } else { KvType::F16 };
    let ranks = Ranks::of(&a.ranks, &a.backend)?;
    Engine::with_options(
        m,
        &a.backend,
        ranks.threads_each(a.threads),
        SessionOptions { context: ctx, kv_type, ..SessionOptions::default() },
        a.deterministic,
        &ranks,
    )
}

fn sampler(s: &SampleArgs) -> Result<Sampler, String> {
    let cfg = SamplerConfig {
        temperature: s.temperature,
        top_k: s.top_k,
        top_p: s.top_p,
        min_p: s.min_p,
        repeat_penalty: s.repeat_penalty,
        seed: s.seed.unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)),
        ..SamplerConfig::default()
    };
    Sampler::new(cfg).map_err(|e| e.to_string())
}

/// Writes text to stdout now (tokens appear as they are made).
fn emit(text: &str) -> rayo_llm::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        // The reader has gone (`rayo generate ... | head -c 20`): stop quietly.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => Err(rayo::Error::Io { path: None, kind: e.kind(), message: e.to_string() }.into()),
    }
}

fn stats_line(s: &rayo_llm::Stats) {
    let stop = match s.stop {
        rayo_llm::Stop::EndOfGeneration(id) => format!("end-of-generation token {id}"),
        rayo_llm::Stop::MaxTokens => "max tokens".into(),
        rayo_llm::Stop::ContextFull => "context full".into(),
    };
    errln!(
        "rayo: prompt {} tokens, prefill {:.1} tokens/s; generated {} tokens, decode {:.1} tokens/s; stop: {stop}{}",
        s.prompt_tokens,
        s.prefill_tokens_per_s(),
        s.tokens.len(),
        s.decode_tokens_per_s(),
        resident_kb().map_or(String::new(), |kb| format!("; resident {:.1} MB", kb as f64 / 1e3))
    );
}

/// `rayo generate`: the prompt as given, then the generated text, on stdout; stats on stderr.
pub fn generate(a: &GenerateArgs) -> Result<(), String> {
    // The sampling values are checked before the model is loaded.
    let mut s = sampler(&a.sample)?;
    if other_rank(&a.model)? {
        return Ok(());
    }
    let m = open_model(&a.model.model)?;
    let mut e = engine(&m, &a.model)?;
    let tok = m.tokenizer();
    let ids = tok.encode(&a.prompt, true, true).map_err(|e| e.to_string())?;
    // Checked before anything is printed.
    let ctx = e.forward().context();
    if ids.len() > ctx {
        return Err(format!(
            "model: the prompt's {} tokens do not fit the context of {ctx} positions (--ctx sets it, up to the model's {})",
            ids.len(),
            m.config().context_length
        ));
    }
    emit(&a.prompt).map_err(|e| e.to_string())?;
    let stats = rayo_llm::generate(e.forward(), tok, &mut s, &ids, a.max_tokens, &mut emit).map_err(|e| e.to_string())?;
    emit("\n").map_err(|e| e.to_string())?;
    stats_line(&stats);
    Ok(())
}

/// `rayo chat`: a conversation on stdin/stdout with the model's chat template.
pub fn chat(a: &ChatArgs) -> Result<(), String> {
    let mut s = sampler(&a.sample)?;
    if other_rank(&a.model)? {
        return Ok(());
    }
    let m = open_model(&a.model.model)?;
    let template = ChatTemplate::from_gguf(m.file().metadata())
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "this model has no chat template (tokenizer.chat_template); use rayo generate".to_string())?;
    let mut e = engine(&m, &a.model)?;
    let tok = m.tokenizer();
    let mut messages: Vec<Message> = a.system.iter().map(|t| Message { role: "system".into(), content: t.clone() }).collect();
    // The ids now in the KV cache: each turn re-renders the conversation and runs only what
    // differs from them.
    let mut cached: Vec<u32> = Vec::new();
    errln!("rayo chat: {} on {}; an empty line or end of input ends the chat", a.model.model.display(), a.model.backend);
    let stdin = std::io::stdin();
    loop {
        {
            let mut out = std::io::stdout().lock();
            let _ = write!(out, "> ").and_then(|()| out.flush());
        }
        let mut line = String::new();
        if stdin.lock().read_line(&mut line).map_err(|e| e.to_string())? == 0 || line.trim().is_empty() {
            break;
        }
        messages.push(Message { role: "user".into(), content: line.trim_end_matches(['\n', '\r']).to_string() });
        let text = template.render(&messages, true).map_err(|e| e.to_string())?;
        let ids = tok.encode(&text, true, true).map_err(|e| e.to_string())?;
        if ids.is_empty() {
            return Err(format!("model: the chat template rendered {} bytes that encode to no tokens", text.len()));
        }
        // At least the last token runs again: its logits start the reply.
        let common = cached.iter().zip(&ids).take_while(|(a, b)| a == b).count().min(ids.len() - 1);
        e.rewind(common);
        let mut reply = String::new();
        let stats = rayo_llm::generate(e.forward(), tok, &mut s, &ids[common..], a.max_tokens, &mut |t| {
            reply.push_str(t);
            emit(t)
        })
        .map_err(|e| e.to_string())?;
        emit("\n").map_err(|e| e.to_string())?;
        cached = ids;
        cached.extend(&stats.tokens);
        messages.push(Message { role: "assistant".into(), content: reply });
        if a.verbose {
            stats_line(&stats);
        }
    }
    Ok(())
}

/// `rayo tokenize`: the ids as one JSON array.
pub fn tokenize(a: &TokenizeArgs) -> Result<(), String> {
    // The tokenizer alone: a vocab-only GGUF works too.
    let f = crate::input::open_gguf(&a.model, "model file", crate::input::FETCH_HINT)?;
    let tok = rayo_llm::Tokenizer::from_gguf(f.metadata()).map_err(|e| format!("{}: {e}", a.model.display()))?;
    let ids = tok.encode(&a.text, !a.no_special, !a.no_parse_special).map_err(|e| e.to_string())?;
    outln!("[{}]", ids.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", "));
    Ok(())
}
