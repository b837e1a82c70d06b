//! Greedy tokens of the native CPU engine as JSON, for the browser test's expected output
//! (`web/test/expected.json`): the CPU engine as `rayo generate` runs it (8-bit activations),
//! checked against its f32-activation path (the arithmetic of the GPU engines).
//!
//!     cargo run -p rayo-llm --release --example greedy_ids -- MODEL.gguf "PROMPT" 16

use rayo::quant::Activations;
use rayo_llm::cpu::Cpu;
use rayo_llm::sample::{Sampler, SamplerConfig};
use rayo_llm::{generate, Model, Session, SessionOptions};
use std::sync::Arc;

fn main() -> rayo_llm::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let [_, path, prompt, n] = &args[..] else {
        eprintln!("usage: greedy_ids MODEL.gguf PROMPT N");
        std::process::exit(2);
    };
    let n: usize = n.parse().expect("N: a number of tokens");
    let model = Model::open(path)?;
    let tok = model.tokenizer();
    let ids = tok.encode(prompt, true, true)?;
    let opts = SessionOptions { context: 256, ..SessionOptions::default() };
    let run = |act: Activations| -> rayo_llm::Result<(Vec<u32>, String)> {
        let mut s = Session::new(&model, Cpu::new(Arc::clone(model.file()), 0).with_activations(act), opts)?;
        let mut text = String::new();
        let stats = generate(&mut s, tok, &mut Sampler::new(SamplerConfig::greedy())?, &ids, n, &mut |t| {
            text.push_str(t);
            Ok(())
        })?;
        Ok((stats.tokens, text))
    };
    let (q8, text) = run(Activations::Quantized)?;
    let (f32s, _) = run(Activations::F32)?;
    let json = |s: &str| {
        s.chars()
            .flat_map(|c| {
                if c == '"' || c == '\\' {
                    vec!['\\', c]
                } else if c == '\n' {
                    vec!['\\', 'n']
                } else {
                    vec![c]
                }
            })
            .collect::<String>()
    };
    let list = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    println!("{{");
    println!("  \"command\": \"cargo run -p rayo-llm --release --example greedy_ids -- {} '{}' {n}\",", json(path), json(prompt));
    println!("  \"prompt\": \"{}\",", json(prompt));
    println!("  \"prompt_ids\": [{}],", list(&ids));
    println!("  \"ids\": [{}],", list(&q8));
    println!("  \"text\": \"{}\",", json(&text));
    println!("  \"f32_activations_agree\": {}", q8 == f32s);
    println!("}}");
    Ok(())
}
