//! `rayo serve`: the model behind an OpenAI-compatible HTTP server (crates/rayo-serve). The
//! engine, built on the server's scheduler thread (a CUDA session's graphs stay on the thread
//! that recorded them): on the CPU and CUDA a `BatchSession` of `--parallel` slots (a step's
//! rows of every slot through each weight matrix at once), on wgpu or with `--engine pool` a
//! `SessionPool` of `--parallel` sessions run one after another.

use crate::args::ServeArgs;
use crate::llm::{open_model, Engine};
use rayo_llm::cpu::Cpu;
use rayo_llm::{BatchOptions, BatchSession, KvType, Model, SessionPool};
use rayo_serve::{EngineFactory, ServeOptions};
use std::sync::Arc;
use std::time::Duration;

pub fn run(a: &ServeArgs) -> Result<(), String> {
    if crate::llm::other_rank(&a.model)? {
        return Ok(());
    }
    let ranks = crate::llm::Ranks::of(&a.model.ranks, &a.model.backend)?;
    let model = Arc::new(open_model(&a.model.model)?);
    let ctx = a.model.ctx.unwrap_or(model.config().context_length.min(4096));
    let model_id = a.alias.clone().unwrap_or_else(|| {
        let name = a.model.model.file_name().map_or_else(|| a.model.model.display().to_string(), |n| n.to_string_lossy().into_owned());
        name.strip_suffix(".gguf").map(str::to_string).unwrap_or(name)
    });
    let world = ranks.world();
    if world > 1 && a.engine != "batch" {
        return Err(format!("rayo serve: --tensor-parallel {world} runs with --engine batch (not {})", a.engine));
    }
    let factory: EngineFactory = {
        let (model, backend, threads, parallel) = (Arc::clone(&model), a.model.backend.clone(), a.model.threads, a.parallel);
        let deterministic = a.model.deterministic;
        let kv = if a.model.kv_f32 { KvType::F32 } else { KvType::F16 };
        // A step's chunks may go over --step-tokens (never a prompt chunk of another row class
        // than `rayo generate` runs it in: rayo_serve::chunks), by at most a chunk of 127 rows.
        let rows = a.step_tokens + parallel + 128;
        let batched = a.engine == "batch" && matches!(backend.as_str(), "cpu" | "cuda");
        Box::new(move || {
            if world > 1 {
                let opts = BatchOptions { slots: parallel, context: ctx, kv_type: kv, rows };
                let threads = ranks.threads_each(threads);
                let started = match backend.as_str() {
                    "cpu" => ranks.batch(&model, opts, move |part: &Model, group| Ok(crate::llm::cpu_rank(part, group, threads))),
                    #[cfg(feature = "cuda")]
                    "cuda" => ranks.batch(&model, opts, move |part: &Model, group| crate::llm::cuda_rank(part, group, deterministic)),
                    other => return Err(crate::llm::no_collectives(world, other)),
                };
                return Ok(Box::new(started.map_err(|e| format!("--tensor-parallel {world}: {e}"))?) as Box<dyn rayo_llm::BatchForward>);
            }
            if batched {
                let opts = BatchOptions { slots: parallel, context: ctx, kv_type: kv, rows };
                let engine: Box<dyn rayo_llm::BatchForward> = match backend.as_str() {
                    #[cfg(feature = "cuda")]
                    "cuda" => Box::new(BatchSession::new(&model, crate::llm::cuda_backend(&model, deterministic)?, opts).map_err(|e| e.to_string())?),
                    "cpu" => Box::new(BatchSession::new(&model, Cpu::new(model.file().clone(), threads), opts).map_err(|e| e.to_string())?),
                    other => return Err(format!("backend {other:?} cannot run a model (available: {})", crate::llm::LLM_BACKENDS.join(", "))),
                };
                return Ok(engine);
            }
            let sessions = (0..parallel)
                .map(|_| Engine::with_kv(&model, &backend, threads, ctx, kv, deterministic).map(Engine::into_forward))
                .collect::<Result<Vec<_>, String>>()?;
            let pool = SessionPool::new(sessions).map_err(|e| e.to_string())?;
            Ok(Box::new(pool) as Box<dyn rayo_llm::BatchForward>)
        })
    };
    let opts = ServeOptions {
        host: a.host.clone(),
        port: a.port,
        model_id,
        api_key: a.api_key.clone(),
        queue: a.queue,
        timeout: Duration::from_secs(a.timeout),
        grace: Duration::from_secs(a.grace),
        keep_alive: Duration::from_secs(a.keep_alive as u64),
        step_tokens: a.step_tokens,
        ..ServeOptions::default()
    };
    rayo_serve::serve(opts, model, factory)
}
