//! rayo in the browser (module `rayo_web`, built by `scripts/web-build.sh`): every function
//! returns a Promise and runs on WebGPU through rayo's wgpu backend (its async API; a browser
//! cannot block).
//!
//! ```js
//! import init, { adapterInfo, relu, sum, matmul, Model } from "./pkg/rayo_web.js";
//! await init();
//! console.log(await adapterInfo());
//! const y = await relu(new Float32Array([-1, 2]));            // Float32Array [0, 2]
//! const model = await Model.load(new Uint8Array(ggufBytes));
//! const text = await model.generate("Once upon a time", 16, 0, t => console.log(t));
//! ```
#![cfg(target_arch = "wasm32")]

mod model;
mod ops;

pub use model::Model;
pub use ops::{adapter_info, gelu, matmul, relu, softmax, sum};

/// A rayo or rayo_llm error as a JavaScript `Error` (its message, with the numbers).
pub(crate) fn js_err(e: impl std::fmt::Display) -> wasm_bindgen::JsError {
    wasm_bindgen::JsError::new(&e.to_string())
}
