//! The request bodies of the OpenAI API, read by hand from JSON: a known field of the wrong type
//! or out of range is a 400 that names it; unknown fields are ignored (as llama-server and vLLM
//! do); `null` is the same as absent.

use crate::error::ApiError;
use rayo_llm::chat::Message;
use serde_json::{Map, Value};

/// Which endpoint a generation request came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /v1/chat/completions`
    Chat,
    /// `POST /v1/completions`
    Completion,
}

impl Endpoint {
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Chat => "/v1/chat/completions",
            Endpoint::Completion => "/v1/completions",
        }
    }
}

/// What the model continues.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// A conversation, rendered with the model's chat template.
    Messages(Vec<Message>),
    /// Text, tokenized as `rayo generate` tokenizes `--prompt`.
    Text(String),
    /// Token ids, run as given.
    Tokens(Vec<u32>),
}

/// How tokens are drawn. Fields left out follow llama-server's defaults (temperature 0.8,
/// top-k 40, top-p 0.95, min-p 0.05), which suit small models better than OpenAI's 1.0.
#[derive(Clone, Debug, PartialEq)]
pub struct Sampling {
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub min_p: f32,
    /// None: a seed from the clock.
    pub seed: Option<u64>,
    /// OpenAI's: subtract `count × frequency_penalty` from the logit of each token generated so
    /// far, and `presence_penalty` once.
    pub frequency_penalty: f32,
    pub presence_penalty: f32,
    /// llama.cpp's: divide a positive logit (multiply a negative one) of each token among the
    /// last 64 of the prompt and completion.
    pub repetition_penalty: f32,
    /// OpenAI's `logit_bias`: (token id, a bias in [-100, 100] added to its logit).
    pub logit_bias: Vec<(u32, f32)>,
}

impl Default for Sampling {
    fn default() -> Sampling {
        Sampling {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            seed: None,
            frequency_penalty: 0.0,
            presence_penalty: 0.0,
            repetition_penalty: 1.0,
            logit_bias: Vec::new(),
        }
    }
}

/// OpenAI's `logit_bias`: an object from token ids (as strings) to biases in [-100, 100]; the
/// ids are checked against the vocabulary where it is known (the router).
fn logit_bias(v: Option<&Value>) -> Result<Vec<(u32, f32)>, ApiError> {
    let obj = match v {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(o)) => o,
        Some(v) => return Err(Fields::wrong("logit_bias", "an object from token ids to biases", v)),
    };
    let mut out = Vec::with_capacity(obj.len());
    for (k, b) in obj {
        let id: u32 = k.trim().parse().map_err(|_| ApiError::field("logit_bias", format!("'logit_bias' key {k:?} is not a token id")))?;
        let bias = b.as_f64().filter(|b| (-100.0..=100.0).contains(b));
        let bias =
            bias.ok_or_else(|| ApiError::field("logit_bias", format!("'logit_bias' of token {id} is {b}; a number in [-100, 100] is expected")))?;
        out.push((id, bias as f32));
    }
    out.sort_by_key(|e| e.0);
    Ok(out)
}

/// A checked `/v1/chat/completions` or `/v1/completions` request.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateRequest {
    pub endpoint: Endpoint,
    pub model: Option<String>,
    pub input: Input,
    /// None: until an end-of-generation token or the context's end.
    pub max_tokens: Option<usize>,
    pub sampling: Sampling,
    /// Strings that end the text where they appear (not included).
    pub stop: Vec<String>,
    /// Some(n): each token's log-probability and the `n` most likely alternatives.
    pub logprobs: Option<usize>,
    pub ignore_eos: bool,
    pub stream: bool,
    /// `stream_options.include_usage`: a last chunk with `usage` and no choices.
    pub include_usage: bool,
    /// `/v1/completions`' `echo`: the prompt's text comes before the completion's (with
    /// `logprobs`, the prompt tokens' log-probabilities before the completion's; the first
    /// token's is null).
    pub echo: bool,
}

/// The most alternatives `top_logprobs` (or a completion's `logprobs`) may ask for (OpenAI's).
pub const MAX_TOP_LOGPROBS: usize = 20;
/// The most stop strings a request may give.
pub const MAX_STOPS: usize = 16;
/// The longest stop string, in bytes (each is matched against the text held back at every token).
pub const MAX_STOP_BYTES: usize = 256;

/// Parses a body as a JSON object.
pub fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the request body is empty; expected a JSON object"));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(ApiError::bad_request(format!("the request body is a JSON {}, expected an object", kind(&other)))),
        Err(e) => Err(ApiError::bad_request(format!("the request body is not valid JSON: {e}"))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Typed getters over a JSON object; each error names the field.
pub struct Fields<'a>(pub &'a Map<String, Value>);

impl<'a> Fields<'a> {
    fn get(&self, name: &str) -> Option<&'a Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    fn wrong(name: &str, want: &str, v: &Value) -> ApiError {
        ApiError::field(name, format!("'{name}' must be {want}, not a {}", kind(v)))
    }

    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(Fields::wrong(name, "a boolean", v)),
        }
    }

    pub fn str(&self, name: &str) -> Result<Option<&'a str>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(Fields::wrong(name, "a string", v)),
        }
    }

    /// A finite number in `lo..=hi`.
    pub fn number(&self, name: &str, lo: f64, hi: f64) -> Result<Option<f64>, ApiError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        let x = v.as_f64().ok_or_else(|| Fields::wrong(name, "a number", v))?;
        if !(lo..=hi).contains(&x) {
            return Err(ApiError::field(name, format!("'{name}' is {x}; it must be between {lo} and {hi}")));
        }
        Ok(Some(x))
    }

    /// A whole number in `lo..=hi` (`2.0` counts as whole, `2.5` does not).
    pub fn int(&self, name: &str, lo: i64, hi: i64) -> Result<Option<i64>, ApiError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        let x = match v {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_u64().map(|u| u.min(i64::MAX as u64) as i64))
                .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15).map(|f| f as i64)),
            _ => None,
        };
        let x = x.ok_or_else(|| match v {
            Value::Number(n) => ApiError::field(name, format!("'{name}' must be a whole number, not {n}")),
            _ => Fields::wrong(name, "an integer", v),
        })?;
        if !(lo..=hi).contains(&x) {
            return Err(ApiError::field(name, format!("'{name}' is {x}; it must be between {lo} and {hi}")));
        }
        Ok(Some(x))
    }
}

/// Reads a generation request for `endpoint` from `body`.
pub fn parse_generate(endpoint: Endpoint, body: &[u8]) -> Result<GenerateRequest, ApiError> {
    generate_request(endpoint, &object(body)?)
}

/// Reads a generation request for `endpoint` from its JSON object.
pub fn generate_request(endpoint: Endpoint, obj: &Map<String, Value>) -> Result<GenerateRequest, ApiError> {
    let f = Fields(obj);
    let model = f.str("model")?.map(str::to_string);
    let input = match endpoint {
        Endpoint::Chat => {
            if f.get("messages").is_none() {
                return Err(ApiError::field("messages", "'messages' is required"));
            }
            Input::Messages(messages(f.get("messages").unwrap_or(&Value::Null))?)
        }
        Endpoint::Completion => prompt(f.get("prompt").ok_or_else(|| ApiError::field("prompt", "'prompt' is required"))?)?,
    };
    if let Some(n) = f.int("n", i64::MIN, i64::MAX)? {
        if n != 1 {
            return Err(ApiError::field("n", format!("'n' is {n}; this server makes one choice per request (n = 1)")));
        }
    }
    // Known features this server does not have: a 400 that says so, not a silent ignore.
    if matches!(f.get("tools"), Some(Value::Array(t)) if !t.is_empty()) {
        return Err(ApiError::field("tools", "this server does not call tools ('tools' must be absent or empty)"));
    }
    if let Some(rf) = f.get("response_format") {
        let ty = rf.get("type").and_then(Value::as_str);
        if ty != Some("text") {
            return Err(ApiError::field("response_format", "only {\"type\": \"text\"} is supported (no JSON mode or schema)"));
        }
    }
    let max = |name| f.int(name, 1, i64::MAX).map(|o| o.map(|n| n as usize));
    // (a 0 is an error unless `echo` asks for the prompt alone: decided below)
    let max_tokens = match endpoint {
        Endpoint::Chat => max("max_completion_tokens").and_then(|m| Ok(m.or(max("max_tokens")?))),
        Endpoint::Completion => max("max_tokens"),
    };
    let d = Sampling::default();
    let top_p = f.number("top_p", 0.0, 1.0)?.map_or(d.top_p, |p| p as f32);
    let sampling = Sampling {
        temperature: f.number("temperature", 0.0, 100.0)?.map_or(d.temperature, |t| t as f32),
        top_k: f.int("top_k", -1, i32::MAX as i64)?.map_or(d.top_k, |k| k.max(0) as usize),
        // top_p 0: the most likely token alone (the sampler's range is (0, 1]).
        top_p: if top_p == 0.0 { f32::MIN_POSITIVE } else { top_p },
        min_p: f.number("min_p", 0.0, 1.0)?.map_or(d.min_p, |p| p as f32),
        seed: f.int("seed", i64::MIN, i64::MAX)?.map(|s| s as u64),
        frequency_penalty: f.number("frequency_penalty", -2.0, 2.0)?.map_or(0.0, |p| p as f32),
        presence_penalty: f.number("presence_penalty", -2.0, 2.0)?.map_or(0.0, |p| p as f32),
        repetition_penalty: match f.number("repetition_penalty", 0.0, 100.0)? {
            Some(r) if r <= 0.0 => return Err(ApiError::field("repetition_penalty", "'repetition_penalty' must be above 0 (1 = off)")),
            Some(r) => r as f32,
            None => 1.0,
        },
        logit_bias: logit_bias(f.get("logit_bias"))?,
    };
    let stop = match f.get("stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => {
            let mut out = Vec::with_capacity(a.len());
            for v in a {
                match v {
                    Value::String(s) => out.push(s.clone()),
                    v => return Err(Fields::wrong("stop", "a string or an array of strings (an element is not a string)", v)),
                }
            }
            out
        }
        Some(v) => return Err(Fields::wrong("stop", "a string or an array of strings", v)),
    };
    if stop.len() > MAX_STOPS {
        return Err(ApiError::field("stop", format!("'stop' has {} strings; at most {MAX_STOPS}", stop.len())));
    }
    if let Some(long) = stop.iter().find(|s| s.len() > MAX_STOP_BYTES) {
        return Err(ApiError::field("stop", format!("a 'stop' string is {} bytes long; at most {MAX_STOP_BYTES}", long.len())));
    }
    if stop.iter().any(String::is_empty) {
        return Err(ApiError::field("stop", "'stop' holds an empty string"));
    }
    let top = MAX_TOP_LOGPROBS as i64;
    let logprobs = match endpoint {
        Endpoint::Chat => {
            let on = f.bool("logprobs")?.unwrap_or(false);
            let n = f.int("top_logprobs", 0, top)?;
            if n.is_some() && !on {
                return Err(ApiError::field("top_logprobs", "'top_logprobs' needs 'logprobs': true"));
            }
            on.then_some(n.unwrap_or(0) as usize)
        }
        Endpoint::Completion => f.int("logprobs", 0, top)?.map(|n| n as usize),
    };
    let echo = match endpoint {
        Endpoint::Completion => f.bool("echo")?.unwrap_or(false),
        Endpoint::Chat => false,
    };
    // `echo` with `max_tokens: 0` scores the prompt alone (what lm-evaluation-harness sends)
    let max_tokens = match (max_tokens, f.get("max_tokens").and_then(Value::as_i64)) {
        (Err(_), Some(0)) if echo => Some(0),
        (m, _) => m?,
    };
    let stream = f.bool("stream")?.unwrap_or(false);
    let include_usage = match f.get("stream_options") {
        None => false,
        Some(Value::Object(o)) => Fields(o)
            .bool("include_usage")
            .map_err(|_| ApiError::field("stream_options", "'stream_options.include_usage' must be a boolean"))?
            .unwrap_or(false),
        Some(v) => return Err(Fields::wrong("stream_options", "an object", v)),
    };
    Ok(GenerateRequest {
        endpoint,
        model,
        input,
        max_tokens,
        sampling,
        stop,
        logprobs,
        ignore_eos: f.bool("ignore_eos")?.unwrap_or(false),
        stream,
        include_usage,
        echo,
    })
}

/// `messages`: a non-empty array of `{role, content}`; content is a string or an array of
/// `{"type": "text", "text": ...}` parts (joined), or null (empty).
fn messages(v: &Value) -> Result<Vec<Message>, ApiError> {
    let Value::Array(a) = v else { return Err(Fields::wrong("messages", "an array", v)) };
    if a.is_empty() {
        return Err(ApiError::field("messages", "'messages' is empty"));
    }
    let mut out = Vec::with_capacity(a.len());
    for (i, m) in a.iter().enumerate() {
        let here = format!("messages[{i}]");
        let Value::Object(o) = m else { return Err(Fields::wrong(&here, "an object", m)) };
        let role = match o.get("role") {
            Some(Value::String(r)) if !r.is_empty() => r.clone(),
            Some(Value::String(_)) | None | Some(Value::Null) => {
                return Err(ApiError::field(&format!("{here}.role"), format!("'{here}.role' is required")))
            }
            Some(v) => return Err(Fields::wrong(&format!("{here}.role"), "a string", v)),
        };
        let content = match o.get("content") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => {
                let mut text = String::new();
                for (j, p) in parts.iter().enumerate() {
                    let at = format!("{here}.content[{j}]");
                    let Some(po) = p.as_object() else { return Err(Fields::wrong(&at, "an object", p)) };
                    match (po.get("type").and_then(Value::as_str), po.get("text")) {
                        (Some("text"), Some(Value::String(t))) => text.push_str(t),
                        (Some("text"), _) => return Err(ApiError::field(&at, format!("'{at}.text' must be a string"))),
                        (Some(other), _) => return Err(ApiError::field(&at, format!("'{at}' is of type {other:?}; this model takes only text"))),
                        (None, _) => return Err(ApiError::field(&at, format!("'{at}.type' is required"))),
                    }
                }
                text
            }
            Some(v) => return Err(Fields::wrong(&format!("{here}.content"), "a string or an array of parts", v)),
        };
        out.push(Message { role, content });
    }
    Ok(out)
}

/// `prompt`: a string, an array of one string, or an array of token ids.
fn prompt(v: &Value) -> Result<Input, ApiError> {
    match v {
        Value::String(s) => Ok(Input::Text(s.clone())),
        Value::Array(a) if a.len() == 1 && a[0].is_string() => Ok(Input::Text(a[0].as_str().unwrap_or_default().to_string())),
        Value::Array(a) if a.iter().all(Value::is_number) => Ok(Input::Tokens(token_ids("prompt", a)?)),
        Value::Array(_) => {
            Err(ApiError::field("prompt", "'prompt' must be a string, an array of one string, or an array of token ids (one prompt per request)"))
        }
        v => Err(Fields::wrong("prompt", "a string or an array of token ids", v)),
    }
}

/// An array of token ids (not checked against the vocabulary here).
pub fn token_ids(name: &str, a: &[Value]) -> Result<Vec<u32>, ApiError> {
    a.iter()
        .map(|t| t.as_u64().filter(|&t| t <= u32::MAX as u64).map(|t| t as u32))
        .collect::<Option<Vec<u32>>>()
        .ok_or_else(|| ApiError::field(name, format!("'{name}' must hold token ids (whole numbers from 0)")))
}

/// `POST /tokenize`: `{"content": text, "add_special": bool, "with_pieces": bool}`.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenizeRequest {
    pub content: String,
    pub add_special: bool,
    pub with_pieces: bool,
}

pub fn parse_tokenize(body: &[u8]) -> Result<TokenizeRequest, ApiError> {
    let obj = object(body)?;
    let f = Fields(&obj);
    let content = f.str("content")?.or(f.str("prompt")?).ok_or_else(|| ApiError::field("content", "'content' is required"))?;
    Ok(TokenizeRequest {
        content: content.to_string(),
        add_special: f.bool("add_special")?.unwrap_or(false),
        with_pieces: f.bool("with_pieces")?.unwrap_or(false),
    })
}

/// `POST /apply-template`: `{"messages": [...]}` (as a chat request's).
pub fn parse_apply_template(body: &[u8]) -> Result<Vec<Message>, ApiError> {
    let obj = object(body)?;
    messages(obj.get("messages").filter(|v| !v.is_null()).ok_or_else(|| ApiError::field("messages", "'messages' is required"))?)
}

/// `POST /detokenize`: `{"tokens": [ids]}`.
pub fn parse_detokenize(body: &[u8]) -> Result<Vec<u32>, ApiError> {
    let obj = object(body)?;
    match obj.get("tokens") {
        Some(Value::Array(a)) => token_ids("tokens", a),
        None | Some(Value::Null) => Err(ApiError::field("tokens", "'tokens' is required")),
        Some(v) => Err(Fields::wrong("tokens", "an array of token ids", v)),
    }
}

#[cfg(test)]
#[path = "api_tests.rs"]
mod tests;
