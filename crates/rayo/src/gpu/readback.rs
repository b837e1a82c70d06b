//! Reading results back through the device's one reused staging buffer.

use super::encoder::{Encoder, Span};
use super::oneshot;
use super::pool::size_class;
use crate::{Error, Result};

/// How long a native readback polls the device in a loop before it blocks in the driver
/// (`RAYO_WGPU_SPIN_US`, default 200): a blocking wait wakes up late, a short spin does not.
#[cfg(not(target_arch = "wasm32"))]
fn spin_limit() -> std::time::Duration {
    std::time::Duration::from_micros(crate::Config::get().wgpu_spin_us)
}

/// Drives the device until `done()`: non-blocking polls for up to [`spin_limit`], then a
/// blocking wait for all submitted work.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn wait_for(device: &wgpu::Device, done: impl Fn() -> bool) -> Result<()> {
    let start = std::time::Instant::now();
    let limit = spin_limit();
    while start.elapsed() < limit {
        device.poll(wgpu::PollType::Poll).map_err(|e| dev_err(e.to_string()))?;
        if done() {
            return Ok(());
        }
        std::hint::spin_loop();
    }
    device.poll(wgpu::PollType::wait_indefinitely()).map_err(|e| dev_err(e.to_string()))?;
    Ok(())
}

fn dev_err(message: String) -> Error {
    Error::Device { api: "wgpu", message }
}

/// Appends a copy of `src` into the staging buffer to `enc`, submits, waits for the mapping
/// and copies the floats into `out` (`out.len() == src.len`).
pub(crate) async fn submit_and_read(mut enc: Encoder, src: &Span, out: &mut [f32]) -> Result<()> {
    debug_assert_eq!(out.len(), src.len);
    let bytes = src.bytes();
    if bytes == 0 {
        enc.submit()?;
        return Ok(());
    }
    let dev = enc.dev.clone();
    let inner = &dev.inner;
    let taken = inner.staging.lock().unwrap_or_else(|p| p.into_inner()).take();
    let staging = match taken {
        Some(b) if b.size() >= bytes => b,
        _ => inner.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rayo staging"),
            size: size_class(bytes).min(inner.limits.max_buffer_bytes).max(bytes),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        }),
    };
    enc.enc.copy_buffer_to_buffer(&src.buf, src.offset, &staging, 0, bytes);
    enc.submit()?;
    let (tx, rx) = oneshot::channel();
    staging.slice(0..bytes).map_async(wgpu::MapMode::Read, move |r| tx.send(r));
    #[cfg(not(target_arch = "wasm32"))]
    wait_for(&inner.device, || rx.is_ready())?;
    match rx.await {
        Some(Ok(())) => {}
        Some(Err(e)) => return Err(dev_err(format!("mapping the staging buffer failed: {e}"))),
        None => return Err(dev_err("mapping callback dropped".into())),
    }
    {
        let view = staging.slice(0..bytes).get_mapped_range().map_err(|e| dev_err(e.to_string()))?;
        match bytemuck::try_cast_slice::<u8, f32>(&view) {
            Ok(f) => out.copy_from_slice(f),
            Err(_) => {
                for (o, c) in out.iter_mut().zip(view.chunks_exact(4)) {
                    *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
        }
    }
    staging.unmap();
    let mut slot = inner.staging.lock().unwrap_or_else(|p| p.into_inner());
    if slot.as_ref().is_none_or(|b| b.size() < staging.size()) {
        *slot = Some(staging);
    }
    drop(slot);
    dev.check()
}
