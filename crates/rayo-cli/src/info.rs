//! `rayo info`: the CPU, its instruction sets, the one rayo chose, threads (later: GPUs).

use crate::out::outln;
use rayo::Backend;

pub fn run() -> Result<(), String> {
    outln!("rayo {}", env!("CARGO_PKG_VERSION"));
    outln!("cpu:        {}", cpu_name());
    outln!("arch:       {}", std::env::consts::ARCH);
    outln!("isa found:  {}", isa_features().join(" "));
    let avail: Vec<&str> = Backend::available().iter().map(|b| b.name()).collect();
    outln!("backends:   {}", avail.join(" "));
    outln!("detected:   {}", Backend::detect());
    match Backend::from_env() {
        Ok(Some(b)) => outln!("selected:   {b} (RAYO_BACKEND)"),
        Ok(None) => outln!("selected:   {}", Backend::detect()),
        Err(e) => outln!("selected:   {} ({e}; ignored)", Backend::detect()),
    }
    outln!("threads:    {}", rayo::max_threads());
    if let Some(c) = caches() {
        outln!("caches:     {c}");
    }
    outln!("force cpu:  {}", rayo::force_cpu());
    for line in rayo::Config::get().to_string().lines() {
        outln!("config:     {line}");
    }
    for e in rayo::Config::problems() {
        outln!("config:     ignored: {e}");
    }
    gpu_info();
    outln!("cuda:       {}", cuda_line());
    Ok(())
}

fn cpu_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).and_then(|l| l.split(':').nth(1)).map(|v| v.trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

#[cfg(target_arch = "x86_64")]
fn isa_features() -> Vec<&'static str> {
    let mut f = vec!["sse2"];
    macro_rules! probe {
        ($($name:tt),*) => {$( if std::is_x86_feature_detected!($name) { f.push($name); } )*};
    }
    probe!("sse4.1", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512vnni", "avx512bf16", "avx512fp16");
    f
}

#[cfg(target_arch = "aarch64")]
fn isa_features() -> Vec<&'static str> {
    vec!["neon"]
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
fn isa_features() -> Vec<&'static str> {
    vec![]
}

/// "L1d 48K, L2 2048K, L3 ..." from sysfs (Linux).
fn caches() -> Option<String> {
    let mut out = Vec::new();
    for i in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok().map(|s| s.trim().to_string());
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size")) else { break };
        if kind == "Instruction" {
            continue;
        }
        let tag = if kind == "Data" { "d" } else { "" };
        out.push(format!("L{level}{tag} {size}"));
    }
    (!out.is_empty()).then(|| out.join(", "))
}

#[cfg(feature = "cuda")]
fn cuda_line() -> String {
    match rayo::cuda::CudaDevice::global() {
        Ok(d) => format!("{} (kernels generated for sm_{})", d.info(), d.ptx_target()),
        Err(e) => format!("none: {e}"),
    }
}

#[cfg(not(feature = "cuda"))]
fn cuda_line() -> String {
    "not built in (feature cuda of rayo-cli)".into()
}

#[cfg(feature = "gpu")]
fn gpu_info() {
    let adapters = rayo::gpu::GpuDevice::list_adapters();
    if adapters.is_empty() {
        outln!("wgpu:       no adapter");
    }
    for a in &adapters {
        let soft = if a.device_type == "cpu" { "; a software adapter: runs on the CPU" } else { "" };
        outln!("wgpu:       {} ({}, {}, {} {}{soft})", a.name, a.backend, a.device_type, a.driver, a.driver_info);
    }
    match rayo::gpu::GpuDevice::new() {
        Ok(d) => {
            let l = d.limits();
            outln!(
                "wgpu using: {} (storage binding {} MiB, buffer {} MiB, workgroup memory {} KiB)",
                d.adapter_info().name,
                l.max_storage_binding_bytes >> 20,
                l.max_buffer_bytes >> 20,
                l.max_workgroup_storage_bytes >> 10
            );
        }
        Err(e) => outln!("wgpu using: none ({e})"),
    }
}

#[cfg(not(feature = "gpu"))]
fn gpu_info() {
    outln!("wgpu:       not built (feature gpu)");
}
