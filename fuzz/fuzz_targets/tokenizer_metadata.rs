//! The tokenizer built from a GGUF file's metadata (seed the corpus with a real model's header,
//! e.g. the first megabytes of SmolLM2): `Ok` or `Err`, never a panic or a runaway allocation.
//! A tokenizer that builds must encode text (the input's tail, lossily as UTF-8) and decode
//! the ids it made without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rayo::gguf::GgufFile;
use rayo_llm::Tokenizer;

fuzz_target!(|data: &[u8]| {
    let Ok(f) = GgufFile::from_bytes(data.to_vec()) else { return };
    let Ok(tok) = Tokenizer::from_gguf(f.metadata()) else { return };
    let text = String::from_utf8_lossy(&data[data.len().saturating_sub(256)..]);
    for (special, parse) in [(true, true), (false, false)] {
        if let Ok(ids) = tok.encode(&text, special, parse) {
            for &id in &ids {
                let _ = tok.decode(&[id]);
            }
            let _ = tok.decode(&ids);
        }
    }
});
