//! A model from a mutated GGUF file (seed the corpus with small model files, e.g. the tiny
//! SmolLM2 of crates/rayo-llm/tests/hostile.rs): `Model::from_file` is `Ok` or `Err`, never a
//! panic, an overflowed size or an allocation sized by an unchecked count; a model that loads
//! runs a session of a few positions on the CPU.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rayo::gguf::GgufFile;
use rayo_llm::cpu::Cpu;
use rayo_llm::{Logits, Model, Session, SessionOptions};
use std::sync::Arc;

fuzz_target!(|data: &[u8]| {
    let Ok(f) = GgufFile::from_bytes(data.to_vec()) else { return };
    let Ok(model) = Model::from_file(f) else { return };
    let opts = SessionOptions { context: 8.min(model.config().context_length), ..SessionOptions::default() };
    let Ok(mut s) = Session::new(&model, Cpu::new(Arc::clone(model.file()), 1), opts) else { return };
    let vocab = model.config().vocab_size as u32;
    let _ = s.forward(&[0, 1 % vocab], Logits::All);
});
