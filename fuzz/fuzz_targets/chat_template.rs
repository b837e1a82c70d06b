//! The chat template renderer on an arbitrary template and messages: the input is the template,
//! then NUL-separated `role` and `content` fields. Compiling and rendering are `Ok` or `Err`,
//! never a panic, and a render ends (minijinja's fuel and the output cap bound it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rayo_llm::chat::{ChatTemplate, Message};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\0');
    let source = parts.next().unwrap_or_default();
    let fields: Vec<&str> = parts.collect();
    let messages: Vec<Message> = fields.chunks(2).map(|c| Message::new(c[0], c.get(1).copied().unwrap_or_default())).collect();
    let Ok(t) = ChatTemplate::new(source, "<s>", "</s>") else { return };
    for generation_prompt in [false, true] {
        if let Ok(out) = t.render(&messages, generation_prompt) {
            assert!(out.len() <= rayo_llm::chat::output_cap(&messages), "the output cap holds");
        }
    }
});
