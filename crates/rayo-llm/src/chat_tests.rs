use super::*;
use rayo::gguf::{GgufArray, GgufFile, GgufValue};

/// Templates rendered by Python jinja2 as transformers does (scripts/ref/chat-ref.py).
const REFERENCE: &str = include_str!("../tests/data/chat-templates.txt");

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('t') => out.push('\t'),
            Some(c) => out.push(c),
            None => out.push('\\'),
        }
    }
    out
}

struct Case {
    name: String,
    gen: bool,
    messages: Vec<Message>,
    expect: String,
}

struct Reference {
    name: String,
    source: String,
    bos: String,
    eos: String,
    cases: Vec<Case>,
}

fn references() -> Vec<Reference> {
    let mut refs: Vec<Reference> = Vec::new();
    for line in REFERENCE.lines().filter(|l| !l.starts_with('#')) {
        let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
        match key {
            "template" => {
                let (name, src) = rest.split_once(' ').unwrap();
                refs.push(Reference { name: name.into(), source: unescape(src), bos: String::new(), eos: String::new(), cases: vec![] });
            }
            "bos_token" => refs.last_mut().unwrap().bos = unescape(rest),
            "eos_token" => refs.last_mut().unwrap().eos = unescape(rest),
            "case" => {
                let (name, gen) = rest.split_once(' ').unwrap();
                let case = Case { name: name.into(), gen: gen == "1", messages: vec![], expect: String::new() };
                refs.last_mut().unwrap().cases.push(case);
            }
            "message" => {
                let (role, content) = rest.split_once(' ').unwrap();
                refs.last_mut().unwrap().cases.last_mut().unwrap().messages.push(Message::new(role, unescape(content)));
            }
            "expect" => refs.last_mut().unwrap().cases.last_mut().unwrap().expect = unescape(rest),
            _ => panic!("chat-templates.txt: unknown line {line:?}"),
        }
    }
    refs
}

/// Metadata with a template and a three-token vocabulary whose ids 1 and 2 are bos and eos.
fn meta(source: &str, bos: &str, eos: &str) -> Metadata {
    let mut m = Metadata::new();
    m.set(CHAT_TEMPLATE_KEY, source);
    m.set("tokenizer.ggml.tokens", vec!["<unk>".to_string(), bos.to_string(), eos.to_string()]);
    m.set("tokenizer.ggml.bos_token_id", 1u32);
    m.set("tokenizer.ggml.eos_token_id", 2u32);
    m
}

#[test]
fn renders_what_jinja2_renders() {
    let refs = references();
    assert_eq!(refs.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(), ["smollm2", "own"]);
    for r in &refs {
        assert!(!r.cases.is_empty());
        let t = ChatTemplate::from_gguf(&meta(&r.source, &r.bos, &r.eos)).unwrap().unwrap();
        assert_eq!((t.bos_token(), t.eos_token()), (r.bos.as_str(), r.eos.as_str()));
        for c in &r.cases {
            assert_eq!(t.render(&c.messages, c.gen).unwrap(), c.expect, "template {} case {}", r.name, c.name);
        }
    }
}

#[test]
fn smollm2_injects_its_system_prompt() {
    let r = references().into_iter().find(|r| r.name == "smollm2").unwrap();
    let t = ChatTemplate::new(&r.source, &r.bos, &r.eos).unwrap();
    let got = t.render(&[Message::new("user", "Hi")], true).unwrap();
    assert_eq!(
        got,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
         <|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    );
}

#[path = "../tests/llama_ref/mod.rs"]
mod llama_ref;
use llama_ref::smollm2;

#[test]
fn smollm2_file_template_matches_the_reference() {
    let Some(path) = smollm2("smollm2_file_template_matches_the_reference") else { return };
    let file = GgufFile::open(&path).unwrap();
    let t = ChatTemplate::from_gguf(file.metadata()).unwrap().expect("SmolLM2 has a chat template");
    let r = references().into_iter().find(|r| r.name == "smollm2").unwrap();
    assert_eq!((t.bos_token(), t.eos_token()), ("<|im_start|>", "<|im_end|>"));
    for c in &r.cases {
        assert_eq!(t.render(&c.messages, c.gen).unwrap(), c.expect, "case {}", c.name);
    }
}

#[test]
fn no_template_is_none() {
    assert!(ChatTemplate::from_gguf(&Metadata::new()).unwrap().is_none());
}

fn model_error(r: Result<impl std::fmt::Debug>) -> String {
    match r {
        Err(Error::Template { what }) => what,
        other => panic!("expected Error::Template, got {other:?}"),
    }
}

#[test]
fn syntax_error_is_a_model_error_with_minijinja_message() {
    let what = model_error(ChatTemplate::new("{% for m in %}{{ m }}{% endfor %}", "", ""));
    assert!(what.contains("does not compile") && what.contains("syntax error"), "{what}");
    let what = model_error(ChatTemplate::from_gguf(&meta("{{ unclosed", "<s>", "</s>")));
    assert!(what.contains("syntax error"), "{what}");
}

#[test]
fn raise_exception_and_render_errors_are_model_errors() {
    let r = references().into_iter().find(|r| r.name == "own").unwrap();
    let t = ChatTemplate::new(&r.source, &r.bos, &r.eos).unwrap();
    let what = model_error(t.render(&[Message::new("tool", "x")], true));
    assert!(what.contains("bad role tool"), "{what}");
    let t = ChatTemplate::new("{{ messages[0]['content'].no_such_method() }}", "", "").unwrap();
    model_error(t.render(&[Message::new("user", "x")], false));
}

#[test]
fn hostile_metadata_is_an_error_naming_the_key() {
    let mut m = meta("x", "<s>", "</s>");
    m.set(CHAT_TEMPLATE_KEY, 7u32);
    assert!(model_error(ChatTemplate::from_gguf(&m)).contains(CHAT_TEMPLATE_KEY));

    let mut m = meta("x", "<s>", "</s>");
    m.set("tokenizer.ggml.bos_token_id", 3u32);
    let what = model_error(ChatTemplate::from_gguf(&m));
    assert!(what.contains("bos_token_id = 3") && what.contains("3 tokens"), "{what}");

    let mut m = meta("x", "<s>", "</s>");
    m.set("tokenizer.ggml.eos_token_id", -1i32);
    assert!(model_error(ChatTemplate::from_gguf(&m)).contains("eos_token_id"));

    let mut m = meta("x", "<s>", "</s>");
    m.set("tokenizer.ggml.tokens", GgufValue::Array(GgufArray::U32(vec![1, 2, 3])));
    assert!(model_error(ChatTemplate::from_gguf(&m)).contains("not an array of strings"));

    let mut m = meta("x", "<s>", "</s>");
    m.remove("tokenizer.ggml.tokens");
    assert!(model_error(ChatTemplate::from_gguf(&m)).contains("absent"));

    // No bos/eos ids: empty strings, as transformers renders a missing special token.
    let mut m = meta("[{{ bos_token }}|{{ eos_token }}]", "<s>", "</s>");
    m.remove("tokenizer.ggml.bos_token_id");
    m.remove("tokenizer.ggml.eos_token_id");
    assert_eq!(ChatTemplate::from_gguf(&m).unwrap().unwrap().render(&[], false).unwrap(), "[|]");
}

/// A template from a hostile file that loops 10^15 times runs out of fuel quickly (an error
/// naming the budget), and one that recurses through a loop ends; the engine stays usable.
#[test]
fn nested_loops_run_out_of_fuel_quickly() {
    let msgs = [Message::new("user", "hi")];
    let nested = "{% for a in range(100000) %}{% for b in range(100000) %}{% for c in range(100000) %}{% endfor %}{% endfor %}{% endfor %}";
    let deep = "{% for m in messages recursive %}{{ loop(messages + messages) }}{% endfor %}";
    for source in [nested, deep] {
        let t = ChatTemplate::new(source, "", "").unwrap();
        let start = std::time::Instant::now();
        let what = model_error(t.render(&msgs, true));
        assert!(start.elapsed() < std::time::Duration::from_secs(20), "{source}: {:?}", start.elapsed());
        assert!(what.contains("chat template"), "{what}");
    }
    let t = ChatTemplate::new(nested, "", "").unwrap();
    let what = model_error(t.render(&msgs, true));
    assert!(what.contains(&RENDER_FUEL.to_string()), "{what}");
    // The same template object renders again (and fails the same way, no state kept).
    assert!(model_error(t.render(&msgs, false)).contains("instructions"));
}

/// A template whose output grows past the cap is an error naming the cap, long before it
/// takes gigabytes.
#[test]
fn output_past_the_cap_is_an_error_naming_it() {
    let msgs = [Message::new("user", "hi")];
    let cap = output_cap(&msgs);
    assert_eq!(cap, OUTPUT_CAP_BASE + 2 * "userhi".len());
    let t = ChatTemplate::new("{% for a in range(10000) %}{{ 'x' * 1000 }}{% endfor %}", "", "").unwrap();
    let what = model_error(t.render(&msgs, true));
    assert!(what.contains(&format!("cap of {cap} bytes")), "{what}");
    // Just under the cap renders.
    let t = ChatTemplate::new("{% for a in range(1000) %}{{ 'x' * 1000 }}{% endfor %}", "", "").unwrap();
    assert_eq!(t.render(&msgs, true).unwrap().len(), 1_000_000);
}

/// A template that renders nothing (or only whitespace) gives no prompt to run: an error.
#[test]
fn empty_render_is_an_error() {
    let msgs = [Message::new("user", "hi")];
    for source in ["", "   \n", "{% for m in messages %}{% endfor %}"] {
        let t = ChatTemplate::new(source, "", "").unwrap();
        let what = model_error(t.render(&msgs, true));
        assert!(what.contains("no prompt") && what.contains("1 messages"), "{source:?}: {what}");
    }
}
