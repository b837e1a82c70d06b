//! The ops: each one submit and one awaited read on the shared WebGPU device.

use crate::js_err;
use rayo::gpu::GpuDevice;
use wasm_bindgen::prelude::*;

async fn device() -> Result<GpuDevice, JsError> {
    GpuDevice::new_async().await.map_err(js_err)
}

/// The adapter's name, backend, type and driver, as one line.
#[wasm_bindgen(js_name = adapterInfo)]
pub async fn adapter_info() -> Result<String, JsError> {
    let d = device().await?;
    let a = d.adapter_info();
    let l = d.limits();
    Ok(format!(
        "{} ({}, {}, driver {} {}; storage binding {} MiB)",
        a.name,
        a.backend,
        a.device_type,
        a.driver,
        a.driver_info,
        l.max_storage_binding_bytes >> 20
    ))
}

/// `max(x, 0)` per element.
#[wasm_bindgen]
pub async fn relu(x: Vec<f32>) -> Result<Vec<f32>, JsError> {
    let mut out = vec![0.0; x.len()];
    device().await?.relu_async(&x, &mut out).await.map_err(js_err)?;
    Ok(out)
}

/// GELU (the erf form) per element.
#[wasm_bindgen]
pub async fn gelu(x: Vec<f32>) -> Result<Vec<f32>, JsError> {
    let mut out = vec![0.0; x.len()];
    device().await?.gelu_async(&x, &mut out).await.map_err(js_err)?;
    Ok(out)
}

/// Softmax over the whole array.
#[wasm_bindgen]
pub async fn softmax(x: Vec<f32>) -> Result<Vec<f32>, JsError> {
    let mut out = vec![0.0; x.len()];
    device().await?.softmax_async(&x, &mut out).await.map_err(js_err)?;
    Ok(out)
}

/// The sum of the elements.
#[wasm_bindgen]
pub async fn sum(x: Vec<f32>) -> Result<f32, JsError> {
    device().await?.sum_async(&x).await.map_err(js_err)
}

/// `a (m×k) · b (k×n)`, row-major, as an `m×n` array.
#[wasm_bindgen]
pub async fn matmul(a: Vec<f32>, b: Vec<f32>, m: usize, k: usize, n: usize) -> Result<Vec<f32>, JsError> {
    let len = m.checked_mul(n).ok_or_else(|| js_err(rayo::Error::SizeOverflow { op: "matmul", dims: vec![m, n] }))?;
    let mut out = vec![0.0; len];
    device().await?.matmul_async(&a, &b, &mut out, m, k, n).await.map_err(js_err)?;
    Ok(out)
}
