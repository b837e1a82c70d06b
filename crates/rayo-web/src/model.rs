//! A GGUF language model on WebGPU: the same engine as `rayo generate --backend wgpu`
//! ([`rayo_llm::Session`] over [`Wgpu`]); each token's pass is submitted by
//! [`Session::forward_queued`] and its logits are the one awaited read.

use crate::js_err;
use rayo::gguf::GgufFile;
use rayo::gpu::GpuDevice;
use rayo_llm::sample::{Sampler, SamplerConfig};
use rayo_llm::wgpu::Wgpu;
use rayo_llm::{Session, SessionOptions, Utf8Stream};
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;

/// Positions of the KV cache (at most the model's context length).
const CONTEXT: usize = 2048;

struct Inner {
    model: rayo_llm::Model,
    session: Session<Wgpu>,
    /// The token ids of the last generation.
    last: Vec<u32>,
}

/// A model loaded from GGUF bytes, on the WebGPU device.
#[wasm_bindgen]
pub struct Model {
    // taken out while a generation runs (no borrow is held across an await)
    inner: Rc<RefCell<Option<Inner>>>,
}

#[wasm_bindgen]
impl Model {
    /// Parses and checks `bytes` (a GGUF file) and uploads its weights to the device.
    pub async fn load(bytes: Vec<u8>) -> Result<Model, JsError> {
        let model = rayo_llm::Model::from_file(GgufFile::from_bytes(bytes).map_err(js_err)?).map_err(js_err)?;
        let dev = GpuDevice::new_async().await.map_err(js_err)?;
        let opts = SessionOptions { context: model.config().context_length.min(CONTEXT), ..SessionOptions::default() };
        let session = Session::new(&model, Wgpu::with_device(dev, model.file().clone()), opts).map_err(js_err)?;
        session.backend().device().check_errors().map_err(js_err)?;
        Ok(Model { inner: Rc::new(RefCell::new(Some(Inner { model, session, last: Vec::new() }))) })
    }

    /// The architecture and shape, one line.
    pub fn info(&self) -> String {
        match &*self.inner.borrow() {
            Some(i) => {
                let c = i.model.config();
                let w = i.session.backend().weight_bytes();
                format!(
                    "{}: {} layers, width {}, {} heads ({} KV), vocab {}, {:.1} MB of weights on the device",
                    c.arch.name,
                    c.n_layer,
                    c.n_embd,
                    c.n_head,
                    c.n_head_kv,
                    c.vocab_size,
                    w as f64 / 1e6
                )
            }
            None => "(generating)".into(),
        }
    }

    /// The token ids the last generation produced.
    #[wasm_bindgen(js_name = lastTokens)]
    pub fn last_tokens(&self) -> Vec<u32> {
        self.inner.borrow().as_ref().map(|i| i.last.clone()).unwrap_or_default()
    }

    /// Generates up to `max_tokens` tokens after `prompt` (temperature 0: greedy), calling
    /// `on_token(text)` with each complete piece of text; resolves to the prompt followed by
    /// the generated text.
    pub fn generate(&self, prompt: String, max_tokens: u32, temperature: f32, on_token: Option<js_sys::Function>) -> js_sys::Promise {
        let cell = Rc::clone(&self.inner);
        wasm_bindgen_futures::future_to_promise(async move {
            let mut inner = cell.borrow_mut().take().ok_or_else(|| JsError::new("this model is already generating"))?;
            let r = generate(&mut inner, &prompt, max_tokens as usize, temperature, on_token.as_ref()).await;
            *cell.borrow_mut() = Some(inner);
            r.map(|text| JsValue::from_str(&(prompt + &text))).map_err(JsValue::from)
        })
    }
}

async fn generate(
    inner: &mut Inner,
    prompt: &str,
    max_tokens: usize,
    temperature: f32,
    on_token: Option<&js_sys::Function>,
) -> Result<String, JsError> {
    let tok = inner.model.tokenizer();
    let ids = tok.encode(prompt, true, true).map_err(js_err)?;
    if ids.is_empty() {
        return Err(JsError::new("the prompt has no tokens"));
    }
    if ids.len() > inner.session.context() {
        return Err(JsError::new(&format!("the prompt's {} tokens do not fit the context of {} positions", ids.len(), inner.session.context())));
    }
    let cfg = if temperature <= 0.0 {
        SamplerConfig::greedy()
    } else {
        SamplerConfig { temperature, seed: js_sys::Math::random().to_bits(), ..SamplerConfig::default() }
    };
    let mut sampler = Sampler::new(cfg).map_err(js_err)?;
    let s = &mut inner.session;
    s.rewind(0);
    let mut logits = vec![0f32; inner.model.config().vocab_size];
    let mut history = ids.clone();
    let (mut text, mut utf8) = (String::new(), Utf8Stream::default());
    let emit = |piece: &str, text: &mut String| -> Result<(), JsError> {
        text.push_str(piece);
        if let Some(f) = on_token {
            f.call1(&JsValue::NULL, &JsValue::from_str(piece)).map_err(|e| JsError::new(&format!("onToken threw: {e:?}")))?;
        }
        Ok(())
    };
    inner.last.clear();
    let mut next: &[u32] = &ids;
    while inner.last.len() < max_tokens && s.position() + next.len() <= s.context() {
        s.forward_queued(next).map_err(js_err)?;
        s.backend().read_async(s.logits_buffer(), &mut logits).await.map_err(js_err)?;
        let id = sampler.sample(&logits, &history).map_err(js_err)?;
        if tok.is_eog(id) {
            break;
        }
        inner.last.push(id);
        history.push(id);
        let piece = utf8.push(tok.token_bytes(id).map_err(js_err)?);
        if !piece.is_empty() {
            emit(&piece, &mut text)?;
        }
        next = std::slice::from_ref(&history[history.len() - 1]);
    }
    let rest = utf8.finish();
    if !rest.is_empty() {
        emit(&rest, &mut text)?;
    }
    Ok(text)
}
