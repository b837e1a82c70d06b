//! Server-sent events as OpenAI streams them: `data: {json}\n\n` chunks with one `id`, a first
//! chat delta `{"role": "assistant", "content": ""}`, content deltas, a last choice chunk with
//! `finish_reason`, with `stream_options.include_usage` a chunk with `choices: []` and `usage`,
//! then `data: [DONE]`. Comments (`: keep-alive`) keep a connection open while a request waits.
//! The non-streamed bodies are built here too, from the same pieces.

use crate::api::Endpoint;
use crate::scheduler::{Finish, TokenLogprob, Usage};
use serde_json::{json, Value};

/// The keep-alive comment.
pub const KEEP_ALIVE: &str = ": keep-alive\n\n";
/// The stream's last event.
pub const DONE: &str = "data: [DONE]\n\n";

/// One SSE event carrying `v`.
pub fn event(v: &Value) -> String {
    format!("data: {v}\n\n")
}

/// What every chunk and body of one response shares.
#[derive(Clone, Debug)]
pub struct Response {
    pub endpoint: Endpoint,
    pub id: String,
    pub created: u64,
    pub model: String,
    pub include_usage: bool,
}

/// `system_fingerprint`: the server and its version.
pub fn fingerprint() -> String {
    format!("rayo-{}", env!("CARGO_PKG_VERSION"))
}

pub fn usage_json(u: &Usage) -> Value {
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.prompt_tokens + u.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
    })
}

fn bytes_json(b: &[u8]) -> Value {
    Value::from(b.iter().map(|&x| x as u64).collect::<Vec<_>>())
}

/// Log-probabilities as a choice's `logprobs`: chat's `{"content": [...]}`, or the legacy
/// completion form `{tokens, token_logprobs, top_logprobs, text_offset}` (offsets from
/// `offset`, the length of the text before these tokens).
pub fn logprobs_json(endpoint: Endpoint, lps: &[TokenLogprob], mut offset: usize) -> Value {
    match endpoint {
        Endpoint::Chat => json!({"content": lps.iter().map(|t| json!({
            "token": t.token,
            "logprob": t.logprob,
            "bytes": bytes_json(&t.bytes),
            "top_logprobs": t.top.iter().map(|(s, b, l)| json!({"token": s, "logprob": l, "bytes": bytes_json(b)})).collect::<Vec<_>>(),
        })).collect::<Vec<_>>()}),
        Endpoint::Completion => {
            let mut offsets = Vec::with_capacity(lps.len());
            for t in lps {
                offsets.push(offset);
                offset += t.token.len();
            }
            json!({
                "tokens": lps.iter().map(|t| t.token.clone()).collect::<Vec<_>>(),
                "token_logprobs": lps.iter().map(|t| t.logprob).collect::<Vec<_>>(),
                // (a prompt's first token has neither: null, as OpenAI's echo gives it)
                "top_logprobs": lps.iter().map(|t| match t.logprob {
                    None => Value::Null,
                    Some(_) => Value::Object(t.top.iter().map(|(s, _, l)| (s.clone(), json!(l))).collect()),
                }).collect::<Vec<_>>(),
                "text_offset": offsets,
            })
        }
    }
}

impl Response {
    fn chunk(&self, choices: Value) -> Value {
        let mut v = match self.endpoint {
            Endpoint::Chat => json!({
                "id": self.id, "object": "chat.completion.chunk", "created": self.created, "model": self.model,
                "system_fingerprint": fingerprint(), "choices": choices,
            }),
            Endpoint::Completion => json!({
                "id": self.id, "object": "text_completion", "created": self.created, "model": self.model,
                "system_fingerprint": fingerprint(), "choices": choices,
            }),
        };
        if self.include_usage {
            v["usage"] = Value::Null;
        }
        v
    }

    /// A choice with `delta` (chat) or `text` (completions).
    fn choice(&self, text: Option<&str>, logprobs: Value, finish: Option<Finish>) -> Value {
        let finish = finish.map(Finish::as_str);
        match self.endpoint {
            Endpoint::Chat => {
                let delta = match text {
                    Some(t) => json!({"content": t}),
                    None => json!({}),
                };
                json!([{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}])
            }
            Endpoint::Completion => json!([{"index": 0, "text": text.unwrap_or(""), "logprobs": logprobs, "finish_reason": finish}]),
        }
    }

    /// The first event: chat's assistant role (completions start with text).
    pub fn start(&self) -> Option<String> {
        (self.endpoint == Endpoint::Chat).then(|| {
            event(&self.chunk(json!([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null, "finish_reason": null}])))
        })
    }

    /// A text delta (`offset`: the text's length before it, for completion logprobs).
    pub fn delta(&self, text: &str, lps: &[TokenLogprob], logprobs_on: bool, offset: usize) -> String {
        let lp = if logprobs_on { logprobs_json(self.endpoint, lps, offset) } else { Value::Null };
        event(&self.chunk(self.choice(Some(text), lp, None)))
    }

    /// The last choice chunk, the usage chunk when asked for, and `[DONE]`.
    pub fn end(&self, finish: Finish, usage: &Usage) -> String {
        let mut out = event(&self.chunk(self.choice(None, Value::Null, Some(finish))));
        if self.include_usage {
            let mut u = self.chunk(json!([]));
            u["usage"] = usage_json(usage);
            out += &event(&u);
        }
        out + DONE
    }

    /// An error inside a stream (after the headers went out), then `[DONE]`.
    pub fn error(&self, message: &str) -> String {
        event(&json!({"error": {"message": message, "type": "server_error", "param": null, "code": null}})) + DONE
    }

    /// The non-streamed body.
    pub fn body(&self, text: &str, lps: Option<&[TokenLogprob]>, finish: Finish, usage: &Usage) -> Value {
        let lp = lps.map_or(Value::Null, |l| logprobs_json(self.endpoint, l, 0));
        let choice = match self.endpoint {
            Endpoint::Chat => {
                json!({"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": lp, "finish_reason": finish.as_str()})
            }
            Endpoint::Completion => json!({"index": 0, "text": text, "logprobs": lp, "finish_reason": finish.as_str()}),
        };
        let object = match self.endpoint {
            Endpoint::Chat => "chat.completion",
            Endpoint::Completion => "text_completion",
        };
        json!({
            "id": self.id, "object": object, "created": self.created, "model": self.model,
            "system_fingerprint": fingerprint(), "choices": [choice], "usage": usage_json(usage),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(events: &str) -> Vec<Value> {
        assert!(events.ends_with("\n\n"), "{events:?}");
        events
            .split_terminator("\n\n")
            .map(|e| {
                let data = e.strip_prefix("data: ").unwrap_or_else(|| panic!("{e:?} is not a data line"));
                assert!(!data.contains('\n'), "one line per event: {data:?}");
                if data == "[DONE]" {
                    Value::String("[DONE]".into())
                } else {
                    serde_json::from_str(data).unwrap()
                }
            })
            .collect()
    }

    fn resp(endpoint: Endpoint, include_usage: bool) -> Response {
        Response { endpoint, id: "chatcmpl-1".into(), created: 5, model: "m".into(), include_usage }
    }

    #[test]
    fn a_chat_stream_is_framed_as_openai_frames_it() {
        let r = resp(Endpoint::Chat, true);
        let usage = Usage { prompt_tokens: 3, completion_tokens: 2, cached_tokens: 1 };
        let s = r.start().unwrap() + &r.delta("Hi\nthere", &[], false, 0) + &r.end(Finish::Length, &usage);
        let ev = parse(&s);
        assert_eq!(ev.len(), 5);
        for e in &ev[..4] {
            assert_eq!(e["id"], "chatcmpl-1");
            assert_eq!(e["object"], "chat.completion.chunk");
        }
        assert_eq!(ev[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
        assert_eq!(ev[1]["choices"][0]["delta"], json!({"content": "Hi\nthere"}));
        assert_eq!(ev[1]["choices"][0]["finish_reason"], Value::Null);
        assert_eq!(ev[2]["choices"][0]["delta"], json!({}));
        assert_eq!(ev[2]["choices"][0]["finish_reason"], "length");
        assert_eq!(ev[3]["choices"], json!([]));
        assert_eq!(
            ev[3]["usage"],
            json!({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5, "prompt_tokens_details": {"cached_tokens": 1}})
        );
        assert_eq!(ev[4], "[DONE]");
    }

    #[test]
    fn a_completion_stream_without_usage() {
        let r = resp(Endpoint::Completion, false);
        assert!(r.start().is_none());
        let lp = TokenLogprob {
            token: "a".into(),
            bytes: vec![97],
            logprob: Some(-0.5),
            top: vec![("a".into(), vec![97], -0.5), ("b".into(), vec![98], -1.0)],
        };
        let ev = parse(&(r.delta("a", &[lp.clone(), lp], true, 4) + &r.end(Finish::Stop, &Usage::default())));
        assert_eq!(ev.len(), 3);
        assert_eq!(ev[0]["object"], "text_completion");
        assert_eq!(ev[0]["choices"][0]["text"], "a");
        assert_eq!(ev[0]["choices"][0]["logprobs"]["text_offset"], json!([4, 5]));
        assert_eq!(ev[0]["choices"][0]["logprobs"]["top_logprobs"][0], json!({"a": -0.5, "b": -1.0}));
        assert!(ev[0].get("usage").is_none());
        assert_eq!(ev[1]["choices"][0]["finish_reason"], "stop");
        assert_eq!(ev[2], "[DONE]");
    }

    #[test]
    fn bodies_and_errors() {
        let r = resp(Endpoint::Chat, false);
        let lp = TokenLogprob { token: "é".into(), bytes: vec![0xc3, 0xa9], logprob: Some(-0.25), top: vec![] };
        let b = r.body("é", Some(&[lp]), Finish::Stop, &Usage { prompt_tokens: 1, completion_tokens: 1, cached_tokens: 0 });
        assert_eq!(b["object"], "chat.completion");
        assert_eq!(b["choices"][0]["message"], json!({"role": "assistant", "content": "é"}));
        assert_eq!(b["choices"][0]["logprobs"]["content"][0]["bytes"], json!([0xc3, 0xa9]));
        assert_eq!(b["usage"]["total_tokens"], 2);
        let ev = parse(&r.error("boom"));
        assert_eq!(ev[0]["error"]["message"], "boom");
        assert_eq!(ev[1], "[DONE]");
    }
}
