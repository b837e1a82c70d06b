//! `rayo serve`: the model behind an OpenAI-compatible HTTP server (crates/rayo-serve). The
//! engine, built on the server's scheduler thread (a CUDA session's graphs stay on the thread
//! that recorded them): on the CPU and CUDA a `BatchSession` of `--parallel` slots (a step's
//! rows of every slot through each weight matrix at once), on wgpu or with `--engine pool` a
//! `SessionPool` of `--parallel` sessions run one after another.

use crate::args::ServeArgs;
use crate::llm::{open_model, Engine};
use rayo_llm::cpu::Cpu;
use rayo_llm::{BatchOptions, BatchSession, KvType, Model, SessionPool};
use rayo_serve::{EngineFactory, OnEngineError, ServeOptions};
use std::path::Path;
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
    // (tests of the real binary only: every engine step after the first N fails)
    let factory: EngineFactory = match std::env::var(rayo_serve::fault::FAULT_ENV).ok().map(|v| v.parse::<usize>()) {
        None => factory,
        Some(Ok(ok)) => Box::new(move || Ok(Box::new(rayo_serve::fault::FaultAfter::new(factory()?, ok)) as Box<dyn rayo_llm::BatchForward>)),
        Some(Err(e)) => return Err(format!("{}: {e} (a number of good steps is expected)", rayo_serve::fault::FAULT_ENV)),
    };
    let secs = |s: u64| (s > 0).then(|| Duration::from_secs(s));
    let opts = ServeOptions {
        host: a.host.clone(),
        port: a.port,
        model_id,
        strict_model_name: a.strict_model_name,
        api_key: api_key(a.api_key.as_deref(), a.api_key_file.as_deref(), std::env::var("RAYO_API_KEY").ok())?,
        queue: a.queue,
        body_limit: a.body_limit,
        header_timeout: secs(a.header_timeout),
        body_timeout: secs(a.body_timeout),
        idle_timeout: secs(a.idle_timeout),
        max_tokens_limit: a.max_tokens_limit,
        timeout: Duration::from_secs(a.timeout),
        grace: Duration::from_secs(a.grace),
        keep_alive: Duration::from_secs(a.keep_alive as u64),
        step_tokens: a.step_tokens,
        on_engine_error: if a.on_engine_error == "stay" { OnEngineError::Stay } else { OnEngineError::Exit },
    };
    rayo_serve::serve(opts, model, factory)
}

/// The API key: --api-key, else the first line of --api-key-file, else RAYO_API_KEY (`env`; the
/// last two keep it out of the process list). An empty key is an error, not "no key".
fn api_key(flag: Option<&str>, file: Option<&Path>, env: Option<String>) -> Result<Option<String>, String> {
    let (key, from) = match (flag, file, env) {
        (Some(k), _, _) => (k.to_string(), "--api-key".to_string()),
        (None, Some(path), _) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("--api-key-file {}: {e}", path.display()))?;
            (text.lines().next().unwrap_or_default().to_string(), format!("--api-key-file {}", path.display()))
        }
        (None, None, Some(k)) => (k, "RAYO_API_KEY".to_string()),
        (None, None, None) => return Ok(None),
    };
    let key = key.trim().to_string();
    if key.is_empty() {
        return Err(format!("the API key from {from} is empty"));
    }
    Ok(Some(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_key_comes_from_the_flag_a_file_or_the_environment() {
        let env = || Some("from-env".to_string());
        assert_eq!(api_key(Some("k"), None, env()).unwrap().as_deref(), Some("k"));
        assert_eq!(api_key(None, None, env()).unwrap().as_deref(), Some("from-env"));
        assert_eq!(api_key(None, None, None).unwrap(), None);
        let path = std::env::temp_dir().join(format!("rayo-api-key-{}", std::process::id()));
        std::fs::write(&path, "secret\n").unwrap();
        assert_eq!(api_key(None, Some(&path), env()).unwrap().as_deref(), Some("secret"));
        std::fs::write(&path, "\n").unwrap();
        assert!(api_key(None, Some(&path), None).unwrap_err().contains("is empty"));
        std::fs::remove_file(&path).unwrap();
        assert!(api_key(None, Some(&path), None).unwrap_err().contains("--api-key-file"));
        assert!(api_key(None, None, Some(" ".into())).unwrap_err().contains("RAYO_API_KEY"));
    }
}
