//! The chat template of a GGUF file (`tokenizer.chat_template`, a Jinja template written for
//! Hugging Face transformers) rendered with minijinja.
//!
//! The environment is set up as transformers sets up jinja2: `trim_blocks` and `lstrip_blocks`,
//! a `raise_exception(msg)` function, `bos_token`/`eos_token` in the context, and Python's
//! string methods (`.strip()`, `.startswith()`, `.split()`, ...) through minijinja-contrib's
//! pycompat, which many templates call.
//!
//! A template is code from the model file: rendering is bounded by minijinja's fuel
//! ([`RENDER_FUEL`] instructions) and by the length of its output ([`output_cap`]), so a template
//! that loops for ever or writes gigabytes is an error, not a hang.

use crate::{Error, Result};
use minijinja::syntax::SyntaxConfig;
use minijinja::{Environment, ErrorKind, Value};
use rayo::gguf::Metadata;

/// The metadata key of the template.
pub const CHAT_TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// The name the template is registered under (it appears in minijinja's error messages).
const NAME: &str = "chat_template";

/// The instructions (minijinja's fuel) one render may run: real templates take a few dozen
/// per message, so this is tens of thousands of messages; a template with nested loops over
/// `range(...)` runs out in well under a second.
pub const RENDER_FUEL: u64 = 2_000_000;

/// The output a render may write besides twice the messages' text: 1 MiB.
pub const OUTPUT_CAP_BASE: usize = 1 << 20;

/// The most bytes a render of `messages` may write: [`OUTPUT_CAP_BASE`] plus twice their
/// roles' and contents' bytes (a template repeats each message at most a few times).
pub fn output_cap(messages: &[Message]) -> usize {
    let text: usize = messages.iter().map(|m| m.role.len().saturating_add(m.content.len())).fold(0, usize::saturating_add);
    OUTPUT_CAP_BASE.saturating_add(text.saturating_mul(2))
}

/// An `io::Write` into memory that fails past `cap` bytes (`over` records that it did).
struct Capped {
    out: Vec<u8>,
    cap: usize,
    over: bool,
}

impl std::io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.cap - self.out.len() {
            self.over = true;
            return Err(std::io::Error::other("the chat template's output cap"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One turn of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// `system`, `user` or `assistant` (the template decides what it accepts).
    pub role: String,
    /// The turn's text.
    pub content: String,
}

impl Message {
    /// A message from its role and content.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message { role: role.into(), content: content.into() }
    }
}

/// A compiled chat template with the token strings it may refer to.
#[derive(Debug)]
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
}

fn model_err(what: String) -> Error {
    Error::Template { what }
}

impl ChatTemplate {
    /// Compiles `source`; `bos_token`/`eos_token` are the strings the template sees under those
    /// names. A syntax error is an [`Error::Template`] with minijinja's message (and line).
    pub fn new(source: &str, bos_token: &str, eos_token: &str) -> Result<ChatTemplate> {
        let mut env = Environment::new();
        env.set_fuel(Some(RENDER_FUEL));
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .map_err(|e| model_err(format!("chat template: syntax config: {e}")))?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", |msg: String| -> std::result::Result<Value, minijinja::Error> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
        });
        env.add_template_owned(NAME, source.to_string()).map_err(|e| model_err(format!("chat template does not compile: {e}")))?;
        Ok(ChatTemplate { env, bos_token: bos_token.to_string(), eos_token: eos_token.to_string() })
    }

    /// The template of a file's metadata, `None` when it has none. `bos_token`/`eos_token` are
    /// the vocabulary's strings for `tokenizer.ggml.bos_token_id`/`eos_token_id` (empty when
    /// the id is absent). Errors: a template that is not a string or does not compile, an id
    /// that is not an integer or is past `tokenizer.ggml.tokens`, a vocabulary that is not an
    /// array of strings.
    pub fn from_gguf(meta: &Metadata) -> Result<Option<ChatTemplate>> {
        let Some(v) = meta.get(CHAT_TEMPLATE_KEY) else { return Ok(None) };
        let source = v.as_str().ok_or_else(|| model_err(format!("{CHAT_TEMPLATE_KEY} is a {}, not a string", v.ty())))?;
        let bos = token_string(meta, "tokenizer.ggml.bos_token_id")?;
        let eos = token_string(meta, "tokenizer.ggml.eos_token_id")?;
        ChatTemplate::new(source, &bos, &eos).map(Some)
    }

    /// The conversation as the model's prompt text; with `add_generation_prompt` the template
    /// appends the opening of the assistant's turn. A failure while rendering (an undefined
    /// method, `raise_exception`, a type error) is an [`Error::Template`] with minijinja's message;
    /// so are a render past [`RENDER_FUEL`] instructions or [`output_cap`] bytes, and one that
    /// writes nothing but whitespace (no prompt to run).
    pub fn render(&self, messages_in: &[Message], add_generation_prompt: bool) -> Result<String> {
        let messages: Vec<Value> = messages_in
            .iter()
            .map(|m| Value::from_pairs([("role", Value::from(m.role.as_str())), ("content", Value::from(m.content.as_str()))]))
            .collect();
        let ctx = Value::from_pairs([
            ("messages", Value::from(messages)),
            ("add_generation_prompt", Value::from(add_generation_prompt)),
            ("bos_token", Value::from(self.bos_token.as_str())),
            ("eos_token", Value::from(self.eos_token.as_str())),
        ]);
        let cap = output_cap(messages_in);
        let t = self.env.get_template(NAME).map_err(|e| model_err(format!("chat template: {e}")))?;
        let mut w = Capped { out: Vec::new(), cap, over: false };
        match t.render_captured_to(ctx, &mut w) {
            Ok(_) => {}
            Err(_) if w.over => {
                return Err(model_err(format!("chat template: the output passed its cap of {cap} bytes (1 MiB and twice the messages' text)")));
            }
            Err(e) if e.kind() == ErrorKind::OutOfFuel => {
                return Err(model_err(format!(
                    "chat template: rendering {} messages ran past its budget of {RENDER_FUEL} instructions (a template that loops without end?)",
                    messages_in.len()
                )));
            }
            Err(e) => return Err(model_err(format!("chat template failed to render: {e}"))),
        }
        let text = String::from_utf8(w.out).map_err(|e| model_err(format!("chat template: the output is not UTF-8: {e}")))?;
        if text.trim().is_empty() {
            return Err(model_err(format!(
                "chat template: {} messages rendered to {} bytes of whitespace, no prompt",
                messages_in.len(),
                text.len()
            )));
        }
        Ok(text)
    }

    /// The `bos_token` string the template sees.
    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    /// The `eos_token` string the template sees.
    pub fn eos_token(&self) -> &str {
        &self.eos_token
    }
}

/// The vocabulary string of the token id stored under `key`, or "" when the key is absent.
fn token_string(meta: &Metadata, key: &str) -> Result<String> {
    let Some(v) = meta.get(key) else { return Ok(String::new()) };
    let id = v.to_u64().ok_or_else(|| model_err(format!("{key} = {v:?} is not a token id")))?;
    let tokens = meta.get("tokenizer.ggml.tokens").ok_or_else(|| model_err(format!("{key} = {id} but tokenizer.ggml.tokens is absent")))?;
    let strs = tokens
        .as_array()
        .and_then(|a| a.as_strs())
        .ok_or_else(|| model_err(format!("tokenizer.ggml.tokens is a {}, not an array of strings", tokens.ty())))?;
    usize::try_from(id)
        .ok()
        .and_then(|i| strs.get(i))
        .cloned()
        .ok_or_else(|| model_err(format!("{key} = {id} is past the vocabulary of {} tokens", strs.len())))
}

#[cfg(test)]
#[path = "chat_tests.rs"]
mod tests;
