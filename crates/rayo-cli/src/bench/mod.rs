//! `rayo bench`: a table (or JSON lines) of op × size × backend × threads, median times. With no
//! `--backend`, every backend this machine has runs side by side: each CPU instruction set, then
//! wgpu and CUDA for the same op and size, with a `skip` line for a backend that is absent.

mod cpu;
#[cfg(feature = "cuda")]
mod cuda;
#[cfg(feature = "gpu")]
mod gpu;
mod llm;
mod matrix;
mod quant;
pub mod row;
mod timer;

use crate::args::BenchArgs;
use crate::out::{errln, outln};
use rayo::Backend;
use row::Row;
use timer::Plan;

/// What a bare `rayo bench` measures: the headline rows.
const DEFAULT_OPS: &[&str] =
    &["stream_copy", "stream_triad", "add", "add_alloc", "dot", "sum", "max", "sigmoid", "tanh", "gelu", "exp", "softmax", "matmul"];

/// The end of `rayo bench --help`.
pub const AFTER_HELP: &str = "\
Without --backend, every backend this machine has runs side by side (each CPU instruction set,
wgpu, CUDA), with a skip line for one that is absent. `rayo bench --op list` prints the ops each
backend knows. Matrix ops (matmul matvec transpose conv2d; cuda gemm*) take --size n as n×n.
wgpu gives two rows per op (roundtrip: host slices in and out; resident: data on the device);
on a software adapter (lavapipe, SwiftShader) its rows are labelled wgpu-sw.
Quantized products (CPU): `read` (sum of 256 MiB, GB/s), qmatvec_<FMT> and qmatmul_<FMT> for
FMT in F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1 Q2_K..Q6_K Q8_K (--size n: n×n weights,
default 4096; qmatmul multiplies 64 rows), and matmul_m64 (the f32 GEMM of that shape).

With --model FILE, llama-bench's rows for a GGUF language model instead: --backend cpu|cuda|wgpu
(one; default cpu).

Examples:
  rayo bench --quick
  rayo bench --model .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf --backend wgpu
  rayo bench --op add --op gelu --size 100K --size 10M --backend avx2 --backend avx512
  rayo bench --op matmul --size 1024 --threads 1 --threads 2 --json
  rayo bench --backend cuda --op gemm --op ptxgen
  rayo bench --backend avx512 --threads 1 --threads 2 --op read --op qmatvec_Q4_K --op qmatmul_Q4_K --op matmul_m64";

/// Which backends a run measures.
struct Selection {
    cpu: Vec<Backend>,
    wgpu: bool,
    cuda: bool,
    /// Backends were named: an absent one is an error, not a skip line.
    explicit: bool,
}

impl Selection {
    fn new(names: &[String], say: &dyn Fn(String)) -> Selection {
        let all = names.is_empty() || names.iter().any(|n| n == "all");
        let mut s = Selection { cpu: vec![], wgpu: all, cuda: all, explicit: !all };
        if all {
            s.cpu = Backend::available();
        }
        for name in names {
            match name.as_str() {
                "all" => {}
                "wgpu" => s.wgpu = true,
                "cuda" => s.cuda = true,
                "cpu" => s.cpu.push(Backend::selected()),
                isa => match Backend::from_name(isa) {
                    Some(b) if b.is_supported() => s.cpu.push(b),
                    Some(b) => say(format!("skip {b}: not supported by this CPU")),
                    None => say(format!("skip {isa}: not a backend")),
                },
            }
        }
        let mut seen = vec![];
        s.cpu.retain(|b| {
            !seen.contains(b) && {
                seen.push(*b);
                true
            }
        });
        s
    }
}

/// A GPU backend of this build, opened.
enum Gpu {
    #[cfg(feature = "gpu")]
    Wgpu(gpu::Wgpu),
    #[cfg(feature = "cuda")]
    Cuda(cuda::Cuda),
}

// Built with neither GPU feature, `Gpu` has no value and its methods are never called.
#[cfg_attr(not(any(feature = "gpu", feature = "cuda")), allow(unused_variables))]
impl Gpu {
    fn label(&self) -> &'static str {
        match *self {
            #[cfg(feature = "gpu")]
            Gpu::Wgpu(ref w) => w.label(),
            #[cfg(feature = "cuda")]
            Gpu::Cuda(_) => "cuda",
        }
    }

    fn heading(&self) -> String {
        match *self {
            #[cfg(feature = "gpu")]
            Gpu::Wgpu(ref w) => w.heading(),
            #[cfg(feature = "cuda")]
            Gpu::Cuda(ref c) => c.heading(),
        }
    }

    /// This backend's name for what `op` names elsewhere, if it has it.
    fn op_for(&self, op: &str) -> Option<String> {
        match *self {
            #[cfg(feature = "gpu")]
            Gpu::Wgpu(ref w) => w.has(op).then(|| op.to_string()),
            #[cfg(feature = "cuda")]
            Gpu::Cuda(_) => cuda::Cuda::op_for(op).map(str::to_string),
        }
    }

    fn default_ops(&self) -> &'static [&'static str] {
        match *self {
            #[cfg(feature = "gpu")]
            Gpu::Wgpu(_) => gpu::DEFAULT_OPS,
            #[cfg(feature = "cuda")]
            Gpu::Cuda(_) => cuda::DEFAULT_OPS,
        }
    }

    fn default_sizes(&self, op: &str, quick: bool) -> Vec<usize> {
        match *self {
            #[cfg(feature = "gpu")]
            Gpu::Wgpu(ref w) => w.default_sizes(op, quick),
            #[cfg(feature = "cuda")]
            Gpu::Cuda(ref c) => c.default_sizes(op, quick),
        }
    }

    fn rows(&self, op: &str, n: usize, plan: Plan) -> Result<Vec<Row>, String> {
        match *self {
            #[cfg(feature = "gpu")]
            Gpu::Wgpu(ref w) => w.rows(op, n, plan),
            #[cfg(feature = "cuda")]
            Gpu::Cuda(ref c) => c.rows(op, n, plan),
        }
    }
}

/// Every op each backend of this build knows, for error messages and `--op list`.
#[cfg_attr(not(any(feature = "gpu", feature = "cuda")), allow(unused_mut))]
fn known_ops() -> Vec<(&'static str, Vec<&'static str>)> {
    // The quantized rows' names are made at run time (one per format); leaked once per call.
    let q: Vec<&'static str> = quant::ops().into_iter().map(|s| &*Box::leak(s.into_boxed_str())).collect();
    let mut v = vec![("cpu", cpu::ops().into_iter().chain(matrix::OPS.iter().copied()).chain(q).collect())];
    #[cfg(feature = "gpu")]
    v.push(("wgpu", gpu::ops()));
    #[cfg(feature = "cuda")]
    v.push(("cuda", cuda::ops()));
    v
}

fn cpu_has(op: &str) -> bool {
    cpu::ops().contains(&op) || matrix::OPS.contains(&op) || quant::has(op)
}

/// Whether some selected backend knows `op` (whether or not this machine has that backend).
#[cfg_attr(not(any(feature = "gpu", feature = "cuda")), allow(unused_mut))]
fn selection_has(sel: &Selection, op: &str) -> bool {
    let mut known = !sel.cpu.is_empty() && cpu_has(op);
    #[cfg(feature = "gpu")]
    {
        known |= sel.wgpu && gpu::ops().contains(&op);
    }
    #[cfg(feature = "cuda")]
    {
        known |= sel.cuda && cuda::Cuda::op_for(op).is_some();
    }
    known
}

/// Opens the selected GPU backends: an absent one is a skip line (or an error when named).
#[cfg_attr(not(any(feature = "gpu", feature = "cuda")), allow(unused_mut))]
fn open_gpus(sel: &Selection, say: &dyn Fn(String)) -> Result<Vec<Gpu>, String> {
    let mut gpus = vec![];
    let absent = |name: &str, why: String| -> Result<(), String> {
        if sel.explicit {
            Err(format!("backend {name}: {why}"))
        } else {
            say(format!("skip {name}: {why}"));
            Ok(())
        }
    };
    if sel.wgpu {
        #[cfg(feature = "gpu")]
        match gpu::Wgpu::open() {
            Ok(w) => gpus.push(Gpu::Wgpu(w)),
            Err(e) => absent("wgpu", format!("no adapter ({e})"))?,
        }
        #[cfg(not(feature = "gpu"))]
        absent("wgpu", "this rayo was built without it (feature gpu of rayo-cli)".into())?;
    }
    if sel.cuda {
        #[cfg(feature = "cuda")]
        match cuda::Cuda::open() {
            Ok(c) => gpus.push(Gpu::Cuda(c)),
            Err(e) => absent("cuda", e)?,
        }
        #[cfg(not(feature = "cuda"))]
        absent("cuda", "this rayo was built without it (feature cuda of rayo-cli)".into())?;
    }
    Ok(gpus)
}

pub fn run(args: &BenchArgs) -> Result<(), String> {
    if let Some(model) = &args.model {
        let backend = match args.backends.as_slice() {
            [] => "cpu".to_string(),
            [b] => crate::args::parse_llm_backend(b)?,
            _ => return Err("--model takes one --backend".into()),
        };
        if crate::llm::serve_other_rank(model, &backend, args.threads.first().copied().unwrap_or(1), false, &args.ranks)? {
            return Ok(());
        }
        return llm::run(model, &backend, &args.threads, &crate::llm::Ranks::of(&args.ranks, &backend)?, args.json);
    }
    let plan = if args.quick { Plan::QUICK } else { Plan::FULL };
    let json = args.json;
    // Headings and skip lines: part of the table, or on stderr beside JSON lines.
    let say = |s: String| {
        if json {
            errln!("rayo bench: {s}");
        } else {
            outln!("{s}");
        }
    };
    if args.ops.iter().any(|o| o == "list") {
        for (backend, ops) in known_ops() {
            outln!("{backend}: {}", ops.join(" "));
        }
        return Ok(());
    }
    let sel = Selection::new(&args.backends, &say);
    for op in &args.ops {
        if !selection_has(&sel, op) {
            let known: Vec<String> = known_ops().into_iter().map(|(b, ops)| format!("  {b}: {}", ops.join(" "))).collect();
            return Err(format!("unknown op {op:?} for the backends selected; known ops:\n{}", known.join("\n")));
        }
    }
    let gpus = open_gpus(&sel, &say)?;
    for g in &gpus {
        say(g.heading());
    }
    if sel.cpu.is_empty() && gpus.is_empty() {
        return Ok(());
    }
    let ops: Vec<String> = if !args.ops.is_empty() {
        args.ops.clone()
    } else if !sel.cpu.is_empty() {
        DEFAULT_OPS.iter().map(|s| s.to_string()).collect()
    } else {
        let mut v: Vec<String> = vec![];
        for op in gpus.iter().flat_map(|g| g.default_ops()) {
            if !v.iter().any(|o| o == op) {
                v.push(op.to_string());
            }
        }
        v
    };
    let threads = if args.threads.is_empty() { vec![1] } else { args.threads.clone() };
    if !json {
        outln!("{:<14} {:>16} {:<8} {:>7} {:>11} {:>15}  note", "op", "n", "backend", "threads", "median", "rate");
    }
    let emit = |r: &Row| emit(r, json);
    // A GPU row that fails: an error when the backend was named, else a skip line.
    let gpu_rows = |g: &Gpu, op: &str, n: usize| -> Result<(), String> {
        match g.rows(op, n, plan) {
            Ok(rows) => rows.iter().for_each(emit),
            Err(e) if sel.explicit => return Err(e),
            Err(e) => say(format!("skip {} {op} n={n}: {e}", g.label())),
        }
        Ok(())
    };
    if sel.cpu.is_empty() {
        // GPU backends only: each with its own ops and sizes (what docs/perf's scripts use).
        for g in &gpus {
            for op in &ops {
                let Some(gop) = g.op_for(op) else { continue };
                let sizes = if args.sizes.is_empty() { g.default_sizes(&gop, args.quick) } else { args.sizes.clone() };
                for n in sizes {
                    gpu_rows(g, &gop, n)?;
                }
            }
        }
        return Ok(());
    }
    // CPU instruction sets, then each GPU backend, for the same op and size.
    let mut first = true;
    for op in &ops {
        let is_matrix = matrix::OPS.contains(&op.as_str());
        let sizes = match (args.sizes.is_empty(), cpu_has(op), gpus.iter().find_map(|g| g.op_for(op).map(|o| (g, o)))) {
            (false, _, _) => args.sizes.clone(),
            (true, true, _) if quant::has(op) => vec![quant::default_size(op)],
            (true, true, _) => default_sizes(is_matrix, args.quick),
            (true, false, Some((g, gop))) => g.default_sizes(&gop, args.quick),
            (true, false, None) => vec![],
        };
        for n in sizes {
            fits_in_memory(op, n, is_matrix || (quant::has(op) && op != "read"))?;
            if !json && !first {
                outln!();
            }
            first = false;
            if cpu_has(op) {
                for &b in &sel.cpu {
                    for &t in &threads {
                        let rows = if quant::has(op) {
                            quant::run(op, n, b, t, plan).into_iter().collect()
                        } else if is_matrix {
                            matrix::run(op, n, b, t, plan)
                        } else {
                            cpu::run(op, n, b, t, plan).into_iter().collect()
                        };
                        rows.iter().for_each(emit);
                    }
                }
            }
            for g in &gpus {
                if let Some(gop) = g.op_for(op) {
                    gpu_rows(g, &gop, n)?;
                }
            }
        }
    }
    Ok(())
}

/// CPU sizes when none are given (n×n for matrix ops).
/// An error naming the size when `op` at `n` (n×n values where `square`) would take more than
/// the memory this machine has free (Linux's `MemAvailable`; unchecked elsewhere), rather than
/// an allocation failure that aborts the run. The estimate counts three buffers of f32.
fn fits_in_memory(op: &str, n: usize, square: bool) -> Result<(), String> {
    let values = if square { n.checked_mul(n) } else { Some(n) };
    let need = values.and_then(|v| v.checked_mul(3 * 4));
    let avail = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
        line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kib| kib * 1024)
    });
    match (need, avail) {
        (Some(need), Some(avail)) if need as u64 <= avail => Ok(()),
        (_, None) => Ok(()),
        (need, Some(avail)) => {
            let need = need.map_or("more than 2^64 bytes".to_string(), |b| format!("about {:.1} GiB", b as f64 / (1u64 << 30) as f64));
            let shape = if square { format!("{n}×{n}") } else { n.to_string() };
            Err(format!(
                "--size {n}: {op} at {shape} would need {need}, and this machine has {:.1} GiB available; pick a smaller size",
                avail as f64 / (1u64 << 30) as f64
            ))
        }
    }
}

fn default_sizes(is_matrix: bool, quick: bool) -> Vec<usize> {
    match (is_matrix, quick) {
        (true, q) => matrix::default_sizes(q),
        (false, true) => vec![100_000, 10_000_000],
        (false, false) => vec![1_000, 100_000, 10_000_000],
    }
}

fn emit(row: &Row, json: bool) {
    if json {
        outln!("{}", row.to_json());
        return;
    }
    let rate = match (row.gbps, row.gflops) {
        (_, Some(g)) => format!("{g:.1} GFLOP/s"),
        (Some(g), _) => format!("{g:.1} GB/s"),
        _ => String::new(),
    };
    let n = match row.mkn {
        Some((m, k, n)) => format!("{m}x{k}x{n}"),
        None => row.n.to_string(),
    };
    let cpu = Backend::from_name(&row.backend).is_some();
    let threads = if cpu { row.threads.to_string() } else { "-".into() };
    let note = row.note.as_deref().unwrap_or("");
    let line = format!("{:<14} {:>16} {:<8} {:>7} {:>11} {:>15}  {note}", row.op, n, row.backend, threads, fmt_ns(row.ns), rate);
    outln!("{}", line.trim_end());
}

fn fmt_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{:.2} ms", ns / 1e6)
    }
}
