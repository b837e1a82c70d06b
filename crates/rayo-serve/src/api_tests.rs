use super::*;

fn chat(body: &str) -> Result<GenerateRequest, ApiError> {
    parse_generate(Endpoint::Chat, body.as_bytes())
}

fn completion(body: &str) -> Result<GenerateRequest, ApiError> {
    parse_generate(Endpoint::Completion, body.as_bytes())
}

/// The error's field and a piece of its message.
fn fails(r: Result<GenerateRequest, ApiError>, param: Option<&str>, says: &str) {
    let e = r.unwrap_err();
    assert_eq!(e.status.as_u16(), 400, "{e}");
    assert_eq!(e.param.as_deref(), param, "{e}");
    assert!(e.message.contains(says), "{:?} does not say {says:?}", e.message);
}

#[test]
fn a_full_chat_request_is_read() {
    let r = chat(
        r#"{"model": "m", "messages": [{"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi "}, {"type": "text", "text": "there"}]}],
            "max_completion_tokens": 7, "max_tokens": 9, "temperature": 0, "top_p": 0.5, "top_k": 3, "min_p": 0.1,
            "seed": -1, "stop": ["a", "bc"], "frequency_penalty": 0.5, "presence_penalty": -1, "repetition_penalty": 1.1,
            "logit_bias": {"5": -100, " 7": 2.5}, "logprobs": true, "top_logprobs": 2, "ignore_eos": true, "n": 1, "stream": true,
            "stream_options": {"include_usage": true}, "unknown_field": {"x": [1]}, "user": null,
            "tools": [], "response_format": {"type": "text"}}"#,
    )
    .unwrap();
    assert_eq!(r.model.as_deref(), Some("m"));
    assert_eq!(r.input, Input::Messages(vec![Message::new("system", "be brief"), Message::new("user", "hi there")]));
    assert_eq!(r.max_tokens, Some(7));
    assert_eq!(
        r.sampling,
        Sampling {
            temperature: 0.0,
            top_k: 3,
            top_p: 0.5,
            min_p: 0.1,
            seed: Some(u64::MAX),
            frequency_penalty: 0.5,
            presence_penalty: -1.0,
            repetition_penalty: 1.1,
            logit_bias: vec![(5, -100.0), (7, 2.5)],
        }
    );
    assert_eq!(r.stop, ["a", "bc"]);
    assert_eq!(r.logprobs, Some(2));
    assert!(r.ignore_eos && r.stream && r.include_usage);
}

#[test]
fn defaults_and_the_completion_forms() {
    let r = completion(r#"{"prompt": "Once"}"#).unwrap();
    assert_eq!(r.input, Input::Text("Once".into()));
    assert_eq!((r.max_tokens, r.logprobs, r.stream, r.include_usage, r.ignore_eos), (None, None, false, false, false));
    assert_eq!(r.sampling, Sampling::default());
    assert!(r.stop.is_empty());
    assert_eq!(completion(r#"{"prompt": ["Once"], "stop": "x", "logprobs": 3}"#).unwrap().stop, ["x"]);
    assert_eq!(completion(r#"{"prompt": ["Once"], "logprobs": 3}"#).unwrap().logprobs, Some(3));
    assert_eq!(completion(r#"{"prompt": [1, 2, 3]}"#).unwrap().input, Input::Tokens(vec![1, 2, 3]));
    assert_eq!(completion(r#"{"prompt": "a", "max_tokens": 4.0}"#).unwrap().max_tokens, Some(4));
    // top_p 0 means the best token alone; top_k -1 means off (llama.cpp's spelling)
    let r = completion(r#"{"prompt": "a", "top_p": 0, "top_k": -1}"#).unwrap();
    assert_eq!((r.sampling.top_p, r.sampling.top_k), (f32::MIN_POSITIVE, 0));
    // chat: max_tokens alone
    let r = chat(r#"{"messages": [{"role": "user", "content": null}], "max_tokens": 5}"#).unwrap();
    assert_eq!(r.max_tokens, Some(5));
    assert_eq!(r.input, Input::Messages(vec![Message::new("user", "")]));
}

#[test]
fn malformed_bodies_are_400s() {
    fails(chat(""), None, "empty");
    fails(chat("{\"messages\": ["), None, "not valid JSON");
    fails(chat("[1, 2]"), None, "JSON array, expected an object");
    fails(chat("nonsense"), None, "not valid JSON");
}

#[test]
fn wrong_types_and_ranges_name_the_field() {
    fails(chat("{}"), Some("messages"), "required");
    fails(chat(r#"{"messages": "hi"}"#), Some("messages"), "must be an array");
    fails(chat(r#"{"messages": []}"#), Some("messages"), "empty");
    fails(chat(r#"{"messages": [1]}"#), Some("messages[0]"), "an object");
    fails(chat(r#"{"messages": [{"content": "x"}]}"#), Some("messages[0].role"), "required");
    fails(chat(r#"{"messages": [{"role": "user", "content": 5}]}"#), Some("messages[0].content"), "a string or an array");
    fails(
        chat(r#"{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}"#),
        Some("messages[0].content[0]"),
        "only text",
    );
    let m = r#""messages": [{"role": "user", "content": "x"}]"#;
    let bad = [
        (r#""temperature": "hot""#, "temperature", "a number"),
        (r#""temperature": -1"#, "temperature", "between 0"),
        (r#""top_p": 1.5"#, "top_p", "between 0 and 1"),
        (r#""top_k": 2.5"#, "top_k", "whole number"),
        (r#""min_p": -0.1"#, "min_p", "between"),
        (r#""seed": "x""#, "seed", "an integer"),
        (r#""max_tokens": 0"#, "max_tokens", "between 1"),
        (r#""max_tokens": -5"#, "max_tokens", "between 1"),
        (r#""max_tokens": "10""#, "max_tokens", "an integer"),
        (r#""max_completion_tokens": 0"#, "max_completion_tokens", "between 1"),
        (r#""n": 2"#, "n", "one choice per request"),
        (r#""logit_bias": [1]"#, "logit_bias", "an object"),
        (r#""logit_bias": {"x": 1}"#, "logit_bias", "not a token id"),
        (r#""logit_bias": {"3": 101}"#, "logit_bias", "[-100, 100]"),
        (r#""logit_bias": {"3": "1"}"#, "logit_bias", "[-100, 100]"),
        (r#""stop": 3"#, "stop", "a string or an array"),
        (r#""stop": ["a", 3]"#, "stop", "not a string"),
        (r#""stop": [""]"#, "stop", "empty string"),
        (r#""frequency_penalty": 3"#, "frequency_penalty", "between -2 and 2"),
        (r#""presence_penalty": true"#, "presence_penalty", "a number"),
        (r#""repetition_penalty": 0"#, "repetition_penalty", "above 0"),
        (r#""logprobs": 1"#, "logprobs", "a boolean"),
        (r#""top_logprobs": 2"#, "top_logprobs", "needs 'logprobs'"),
        (r#""logprobs": true, "top_logprobs": 21"#, "top_logprobs", "between 0 and 20"),
        (r#""stream": "yes""#, "stream", "a boolean"),
        (r#""stream_options": 1"#, "stream_options", "an object"),
        (r#""stream_options": {"include_usage": 1}"#, "stream_options", "include_usage"),
        (r#""ignore_eos": 1"#, "ignore_eos", "a boolean"),
        (r#""model": 5"#, "model", "a string"),
        (r#""tools": [{"type": "function", "function": {"name": "f"}}]"#, "tools", "does not call tools"),
        (r#""response_format": {"type": "json_object"}"#, "response_format", "only"),
    ];
    for (field, param, says) in bad {
        fails(chat(&format!("{{{m}, {field}}}")), Some(param), says);
    }
    fails(completion("{}"), Some("prompt"), "required");
    fails(completion(r#"{"prompt": 5}"#), Some("prompt"), "a string");
    fails(completion(r#"{"prompt": ["a", "b"]}"#), Some("prompt"), "one prompt per request");
    fails(completion(r#"{"prompt": [1, -2]}"#), Some("prompt"), "token ids");
    fails(completion(r#"{"prompt": "a", "logprobs": true}"#), Some("logprobs"), "an integer");
}

#[test]
fn tokenize_bodies() {
    let t = parse_tokenize(br#"{"content": "hi", "add_special": true}"#).unwrap();
    assert_eq!(t, TokenizeRequest { content: "hi".into(), add_special: true, with_pieces: false });
    assert_eq!(parse_tokenize(b"{}").unwrap_err().param.as_deref(), Some("content"));
    assert_eq!(parse_detokenize(br#"{"tokens": [1, 2]}"#).unwrap(), [1, 2]);
    assert_eq!(parse_detokenize(br#"{"tokens": "x"}"#).unwrap_err().param.as_deref(), Some("tokens"));
}
