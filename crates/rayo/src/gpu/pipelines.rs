//! Compute pipelines, compiled once per distinct WGSL source and cached for the device's life.

use crate::{Error, Result};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// A compiled kernel and the layout of its bind group 0.
pub(crate) struct Kernel {
    pub pipeline: wgpu::ComputePipeline,
    pub layout: wgpu::BindGroupLayout,
}

#[derive(Default)]
pub(crate) struct PipelineCache {
    map: Mutex<HashMap<String, Arc<Kernel>>>,
}

impl PipelineCache {
    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The kernel for `key`; on first use compiles `source()` (entry point `main`).
    /// A WGSL or pipeline error becomes [`Error::Device`] with wgpu's message.
    pub async fn get(&self, device: &wgpu::Device, key: &str, source: impl FnOnce() -> String) -> Result<Arc<Kernel>> {
        if let Some(k) = self.map.lock().unwrap_or_else(|p| p.into_inner()).get(key) {
            return Ok(k.clone());
        }
        let src = source();
        let label = if key.len() <= 64 { key } else { "rayo generated kernel" };
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor { label: Some(label), source: wgpu::ShaderSource::Wgsl(src.into()) });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(label),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        if let Some(e) = scope.pop().await {
            return Err(Error::Device { api: "wgpu", message: format!("kernel {label}: {e}") });
        }
        let layout = pipeline.get_bind_group_layout(0);
        let k = Arc::new(Kernel { pipeline, layout });
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map.entry(key.to_string()).or_insert(k).clone())
    }
}
