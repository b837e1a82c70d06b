//! Which fields of a generation request this server honours, which it refuses, and which it
//! takes without effect. A field that would change the answer and is not done here is a 400
//! that names it, never silently ignored; a field nobody here knows is logged and ignored, as
//! vLLM does (clients send their own extensions). Also the server's caps on what a request may
//! ask for.

use crate::api::{Endpoint, GenerateRequest};
use crate::error::ApiError;
use serde_json::{Map, Value};

/// Fields [`crate::api::generate_request`] reads, on both endpoints.
const READ: &[&str] = &[
    "model", "n", "tools", "response_format", "max_tokens", "temperature", "top_k", "top_p", "min_p", "seed", "frequency_penalty",
    "presence_penalty", "repetition_penalty", "logit_bias", "stop", "stream", "stream_options", "ignore_eos",
];
const READ_CHAT: &[&str] = &["messages", "max_completion_tokens", "logprobs", "top_logprobs"];
const READ_COMPLETION: &[&str] = &["prompt", "logprobs", "echo"];

/// OpenAI's bookkeeping and hints: accepted, and they change nothing in the answer.
const NO_EFFECT: &[&str] = &["user", "store", "metadata", "service_tier", "parallel_tool_calls", "prediction"];

/// A field this server does not do: refused unless its value is one that asks for nothing.
struct Refused {
    field: &'static str,
    /// The endpoint it belongs to (None: both).
    only: Option<Endpoint>,
    /// Whether a value asks for nothing (`null` always does: it is the same as absent).
    harmless: fn(&Value) -> bool,
    why: &'static str,
}

fn never(_: &Value) -> bool {
    false
}

fn empty(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

fn one(v: &Value) -> bool {
    v.as_f64() == Some(1.0)
}

fn zero_or_false(v: &Value) -> bool {
    v.as_f64() == Some(0.0) || v == &Value::Bool(false)
}

fn no_tool(v: &Value) -> bool {
    matches!(v.as_str(), Some("none" | "auto"))
}

fn text_only(v: &Value) -> bool {
    v.as_array().is_some_and(|a| a.iter().all(|m| m == "text"))
}

const CONSTRAINED: &str = "constrained decoding (a grammar, a regex, a JSON schema or a choice) is not supported";

const REFUSED: &[Refused] = &[
    Refused {
        field: "suffix",
        only: Some(Endpoint::Completion),
        harmless: empty,
        why: "text after the completion (fill-in-the-middle) is not supported",
    },
    Refused { field: "best_of", only: Some(Endpoint::Completion), harmless: one, why: "this server makes one candidate per request (best_of 1)" },
    Refused { field: "echo", only: Some(Endpoint::Chat), harmless: zero_or_false, why: "'echo' is served on /v1/completions only" },
    Refused { field: "tool_choice", only: Some(Endpoint::Chat), harmless: no_tool, why: "this server does not call tools" },
    Refused { field: "functions", only: Some(Endpoint::Chat), harmless: empty, why: "this server does not call functions" },
    Refused { field: "function_call", only: Some(Endpoint::Chat), harmless: no_tool, why: "this server does not call functions" },
    Refused { field: "modalities", only: Some(Endpoint::Chat), harmless: text_only, why: "this server answers in text only" },
    Refused { field: "audio", only: Some(Endpoint::Chat), harmless: never, why: "this server answers in text only" },
    // vLLM's and llama-server's extensions that change the answer
    Refused { field: "prompt_logprobs", only: None, harmless: never, why: "the prompt's log-probabilities are not served yet" },
    Refused { field: "min_tokens", only: None, harmless: zero_or_false, why: "a minimum of tokens is not supported" },
    Refused { field: "use_beam_search", only: None, harmless: zero_or_false, why: "beam search is not supported" },
    Refused { field: "stop_token_ids", only: None, harmless: empty, why: "stop token ids are not supported; 'stop' takes strings" },
    Refused { field: "guided_json", only: None, harmless: never, why: CONSTRAINED },
    Refused { field: "guided_regex", only: None, harmless: never, why: CONSTRAINED },
    Refused { field: "guided_choice", only: None, harmless: never, why: CONSTRAINED },
    Refused { field: "guided_grammar", only: None, harmless: never, why: CONSTRAINED },
    Refused { field: "grammar", only: None, harmless: never, why: CONSTRAINED },
    Refused { field: "json_schema", only: None, harmless: never, why: CONSTRAINED },
];

fn applies(only: Option<Endpoint>, endpoint: Endpoint) -> bool {
    only.is_none_or(|e| e == endpoint)
}

/// A value short enough to quote in a message.
fn quoted(v: &Value) -> Option<String> {
    let s = v.to_string();
    (s.len() <= 40 && !v.is_object() && !v.is_array()).then_some(s)
}

/// 400 for the first field that asks for something this server does not do.
pub fn refuse_unsupported(endpoint: Endpoint, obj: &Map<String, Value>) -> Result<(), ApiError> {
    for r in REFUSED.iter().filter(|r| applies(r.only, endpoint)) {
        let Some(v) = obj.get(r.field).filter(|v| !v.is_null()) else { continue };
        if !(r.harmless)(v) {
            let f = r.field;
            let given = quoted(v).map_or(String::new(), |q| format!(" ({f} = {q})"));
            return Err(ApiError::field(f, format!("'{f}' is not supported{given}: {}", r.why)));
        }
    }
    Ok(())
}

/// The fields of `obj` nobody here knows (they are ignored; the router logs them).
pub fn unknown(endpoint: Endpoint, obj: &Map<String, Value>) -> Vec<String> {
    let own = match endpoint {
        Endpoint::Chat => READ_CHAT,
        Endpoint::Completion => READ_COMPLETION,
    };
    let refused = |k: &str| REFUSED.iter().any(|r| r.field == k && applies(r.only, endpoint));
    obj.keys()
        .filter(|k| !READ.contains(&k.as_str()) && !own.contains(&k.as_str()) && !NO_EFFECT.contains(&k.as_str()) && !refused(k))
        .cloned()
        .collect()
}

/// The server's cap on `max_tokens` (`--max-tokens-limit`): a request over it is a 400 naming
/// both numbers; one without `max_tokens` gets the cap.
pub fn cap_max_tokens(req: &mut GenerateRequest, obj: &Map<String, Value>, limit: Option<usize>) -> Result<(), ApiError> {
    let Some(limit) = limit else { return Ok(()) };
    match req.max_tokens {
        Some(m) if m > limit => {
            let name = if req.endpoint == Endpoint::Chat && obj.get("max_completion_tokens").is_some_and(|v| !v.is_null()) {
                "max_completion_tokens"
            } else {
                "max_tokens"
            };
            Err(ApiError::field(name, format!("'{name}' is {m}; this server allows at most {limit} tokens per request (--max-tokens-limit)")))
        }
        Some(_) => Ok(()),
        None => {
            req.max_tokens = Some(limit);
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{generate_request, object};

    fn obj(s: &str) -> Map<String, Value> {
        object(s.as_bytes()).unwrap()
    }

    /// The request as the router reads it: refusals, then the parser.
    fn read(endpoint: Endpoint, s: &str) -> Result<GenerateRequest, ApiError> {
        let o = obj(s);
        refuse_unsupported(endpoint, &o)?;
        generate_request(endpoint, &o)
    }

    fn refused(endpoint: Endpoint, s: &str, param: &str, says: &str) {
        let e = read(endpoint, s).unwrap_err();
        assert_eq!((e.status.as_u16(), e.param.as_deref()), (400, Some(param)), "{s}: {e}");
        assert!(e.message.contains(says), "{s}: {:?} does not say {says:?}", e.message);
    }

    #[test]
    fn what_is_not_done_is_refused_by_name() {
        use Endpoint::{Chat, Completion};
        refused(Completion, r#"{"prompt": "def f(", "suffix": "return x"}"#, "suffix", "fill-in-the-middle");
        refused(Completion, r#"{"prompt": "x", "best_of": 3}"#, "best_of", "best_of = 3");
        // echo with logprobs scores the prompt; max_tokens 0 only with echo
        let r = read(Completion, r#"{"prompt": "x", "echo": true, "logprobs": 2, "max_tokens": 0}"#).unwrap();
        assert!(r.echo && r.logprobs == Some(2) && r.max_tokens == Some(0));
        refused(Completion, r#"{"prompt": "x", "max_tokens": 0}"#, "max_tokens", "between 1");
        refused(Chat, r#"{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}"#, "max_tokens", "between 1");
        refused(Completion, r#"{"prompt": "x", "prompt_logprobs": 1}"#, "prompt_logprobs", "not served yet");
        refused(Chat, r#"{"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}"#, "tool_choice", "tools");
        refused(Chat, r#"{"messages": [{"role": "user", "content": "x"}], "modalities": ["text", "audio"]}"#, "modalities", "text only");
        refused(Chat, r#"{"messages": [{"role": "user", "content": "x"}], "echo": true}"#, "echo", "/v1/completions only");
        refused(Chat, r#"{"messages": [{"role": "user", "content": "x"}], "guided_json": {"type": "object"}}"#, "guided_json", "JSON schema");
        // values that ask for nothing pass
        let r = read(
            Completion,
            r#"{"prompt": "x", "suffix": "", "best_of": 1, "echo": true, "min_tokens": 0, "stop_token_ids": [], "user": "u", "prompt_logprobs": null}"#,
        )
        .unwrap();
        assert!(r.echo);
        let r = read(Chat, r#"{"messages": [{"role": "user", "content": "x"}], "tool_choice": "none", "modalities": ["text"], "echo": false}"#);
        assert!(!r.unwrap().echo);
        // echo is not a chat field of the parser: off there
        assert!(!read(Completion, r#"{"prompt": "x"}"#).unwrap().echo);
    }

    #[test]
    fn unknown_fields_are_found() {
        let o = obj(r#"{"prompt": "x", "echo": true, "user": "u", "logit_bias": {}, "no_such": 1, "n_predict": 5}"#);
        let mut u = unknown(Endpoint::Completion, &o);
        u.sort();
        assert_eq!(u, ["n_predict", "no_such"]);
        // echo is a completions field: on chat it is a refused one, not unknown
        let o = obj(r#"{"messages": [], "echo": false, "suffix": "s"}"#);
        assert_eq!(unknown(Endpoint::Chat, &o), ["suffix"]);
    }

    /// Every field said to be read is read: a wrong value of it is a 400 naming it.
    #[test]
    fn every_field_read_is_read() {
        let bad = |field: &str| match field {
            "tools" => r#"[{"type": "function"}]"#,
            "response_format" => r#"{"type": "json_object"}"#,
            "n" | "max_tokens" | "max_completion_tokens" | "top_logprobs" => "0.5",
            "stream_options" | "messages" | "prompt" => "7",
            "model" | "seed" | "stop" | "stream" | "ignore_eos" | "echo" | "logprobs" => "{}",
            _ => r#""x""#,
        };
        for (endpoint, own, base) in [
            (Endpoint::Chat, READ_CHAT, r#""messages": [{"role": "user", "content": "x"}], "logprobs": true"#),
            (Endpoint::Completion, READ_COMPLETION, r#""prompt": "x""#),
        ] {
            // (logit_bias is the sampling work's: api_tests.rs covers it)
            for field in READ.iter().chain(own).filter(|&&f| f != "logit_bias") {
                let body = format!("{{{base}, \"{field}\": {}}}", bad(field));
                let o = obj(&body);
                match generate_request(endpoint, &o) {
                    Err(e) => assert_eq!(e.param.as_deref(), Some(*field), "{body}: {e}"),
                    Ok(_) => panic!("{body} was accepted: is '{field}' read?"),
                }
            }
        }
    }

    #[test]
    fn max_tokens_is_capped() {
        let mut r = read(Endpoint::Completion, r#"{"prompt": "x", "max_tokens": 600}"#).unwrap();
        let o = obj("{}");
        let e = cap_max_tokens(&mut r, &o, Some(512)).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("max_tokens"));
        assert!(e.message.contains("600") && e.message.contains("512"), "{}", e.message);
        assert!(cap_max_tokens(&mut r, &o, Some(600)).is_ok() && cap_max_tokens(&mut r, &o, None).is_ok());
        let mut r = read(Endpoint::Completion, r#"{"prompt": "x"}"#).unwrap();
        cap_max_tokens(&mut r, &o, Some(512)).unwrap();
        assert_eq!(r.max_tokens, Some(512));
        let body = r#"{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 900}"#;
        let mut r = read(Endpoint::Chat, body).unwrap();
        assert_eq!(cap_max_tokens(&mut r, &obj(body), Some(512)).unwrap_err().param.as_deref(), Some("max_completion_tokens"));
    }

    #[test]
    fn stop_strings_are_capped() {
        let long = "x".repeat(crate::api::MAX_STOP_BYTES + 1);
        refused(Endpoint::Completion, &format!(r#"{{"prompt": "x", "stop": ["{long}"]}}"#), "stop", "257 bytes long; at most 256");
        let many: Vec<String> = (0..17).map(|i| format!("\"s{i}\"")).collect();
        refused(Endpoint::Completion, &format!(r#"{{"prompt": "x", "stop": [{}]}}"#, many.join(",")), "stop", "17 strings; at most 16");
    }
}
