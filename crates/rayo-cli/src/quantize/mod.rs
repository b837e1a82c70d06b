//! `rayo quantize IN OUT TYPE`: rewrites a GGUF model with its weights in another format, the
//! type of each tensor chosen as llama.cpp chooses it ([`mix`]), tensors in llama.cpp's order,
//! metadata copied with `general.file_type` and `general.quantization_version` set — the file
//! `llama-quantize --allow-requantize IN OUT TYPE` writes. Quantized inputs are dequantized to
//! f32 first (as llama.cpp does when it requantizes). The output is written to `OUT.part` and
//! renamed when complete, so a failed run leaves no truncated model behind.

pub mod mix;

use crate::args::QuantizeArgs;
use crate::out::{errln, outln};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use mix::{llama_order, FileType, ModelInfo, Planner};
use rayo::gguf::{GgufFile, GgufValue, Metadata, TensorInfo};
use rayo::quant::GgmlType;
use std::collections::BTreeMap;
use std::io::Write;
use std::time::Instant;

/// `general.quantization_version` (ggml's `GGML_QNT_VERSION`).
const QUANTIZATION_VERSION: u32 = 2;

pub fn run(a: &QuantizeArgs) -> Result<(), String> {
    let ftype = FileType::from_name(&a.ty).ok_or_else(|| format!("unknown type {}", a.ty))?;
    let started = Instant::now();
    let input = crate::input::open_gguf(&a.input, "model file", crate::input::FETCH_HINT)?;
    let model = model_info(input.metadata());
    let mut order: Vec<&TensorInfo> = input.tensors().iter().collect();
    order.sort_by_key(|t| llama_order(&t.name));
    let mut planner = Planner::new(ftype, model, order.iter().map(|t| t.name.as_str()));

    let mut w = rayo::gguf::GgufWriter::new();
    *w.metadata_mut() = input.metadata().clone();
    // As llama.cpp's gguf_set_val_*: an existing key is removed and the new value appended.
    for (key, value) in [("general.quantization_version", QUANTIZATION_VERSION), ("general.file_type", ftype as u32)] {
        w.metadata_mut().remove(key);
        w.set(key, value);
    }
    let mut plan = Vec::with_capacity(order.len());
    for t in &order {
        let to = planner.choose(&t.name, &t.shape, t.ty);
        let bytes = w.declare_tensor(&t.name, to, &t.shape).map_err(|e| e.to_string())?;
        plan.push((*t, to, bytes));
    }
    if planner.n_fallback > 0 {
        errln!(
            "rayo quantize: {} tensors have rows not a multiple of their type's block: they fall back to a 32-wide type (as llama.cpp does)",
            planner.n_fallback
        );
    }

    let part = a.output.with_extension(match a.output.extension() {
        Some(e) => format!("{}.part", e.to_string_lossy()),
        None => "part".into(),
    });
    let file = std::fs::File::create(&part).map_err(|e| format!("creating {}: {e}", part.display()))?;
    let result = write_tensors(&input, &plan, w, std::io::BufWriter::new(file), a.threads);
    if let Err(e) = result {
        let _ = std::fs::remove_file(&part);
        return Err(e);
    }
    std::fs::rename(&part, &a.output).map_err(|e| format!("renaming {} to {}: {e}", part.display(), a.output.display()))?;

    let in_bytes: u64 = plan.iter().map(|(t, _, _)| t.bytes).sum();
    let out_bytes: u64 = plan.iter().map(|(_, _, bytes)| bytes).sum();
    let mut counts: BTreeMap<GgmlType, usize> = BTreeMap::new();
    plan.iter().for_each(|(_, to, _)| *counts.entry(*to).or_default() += 1);
    let per_type: Vec<String> = counts.iter().map(|(t, n)| format!("{n} {t}")).collect();
    outln!(
        "{}: {} ({} tensors: {}), {:.1} MB -> {:.1} MB in {:.1} s",
        a.output.display(),
        ftype.name(),
        plan.len(),
        per_type.join(", "),
        in_bytes as f64 / 1e6,
        out_bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Writes the header, then each tensor (copied, or converted on `threads` threads), with a
/// progress bar on stderr over the values converted.
fn write_tensors<W: Write>(
    input: &GgufFile,
    plan: &[(&TensorInfo, GgmlType, u64)],
    w: rayo::gguf::GgufWriter,
    out: W,
    threads: usize,
) -> Result<(), String> {
    let total: u64 = plan.iter().map(|(t, _, _)| t.elements()).sum();
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr_with_hz(4));
    bar.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}% {msg}").unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut s = w.start(out).map_err(|e| e.to_string())?;
    for (t, to, _) in plan {
        bar.set_message(format!("{} {} -> {}", t.name, t.ty, to));
        let data = input.tensor_data(t).map_err(|e| e.to_string())?;
        if *to == t.ty {
            s.write_tensor(data).map_err(|e| e.to_string())?;
        } else {
            let converted = convert(t, *to, data, threads).map_err(|e| format!("{}: {e}", t.name))?;
            s.write_tensor(&converted).map_err(|e| e.to_string())?;
        }
        bar.inc(t.elements());
    }
    let mut out = s.finish().map_err(|e| e.to_string())?;
    out.flush().map_err(|e| format!("writing the output: {e}"))?;
    bar.finish_and_clear();
    Ok(())
}

/// `data` (a tensor of type `t.ty`) in type `to`: each row dequantized to f32 and quantized,
/// rows split over `threads` threads.
fn convert(t: &TensorInfo, to: GgmlType, data: &[u8], threads: usize) -> rayo::Result<Vec<u8>> {
    let ncols = usize::try_from(t.shape.first().copied().unwrap_or(1)).unwrap_or(usize::MAX);
    let nrows = usize::try_from(t.elements()).unwrap_or(usize::MAX) / ncols.max(1);
    let row_in = t.ty.bytes_for(ncols)?;
    let row_out = to.bytes_for(ncols)?;
    let mut out = vec![0u8; row_out * nrows];
    let per = nrows.div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        let jobs: Vec<_> = out
            .chunks_mut(per * row_out)
            .zip(data.chunks(per * row_in))
            .map(|(dst, src)| {
                scope.spawn(move || -> rayo::Result<()> {
                    let mut row = vec![0f32; ncols];
                    for (d, s) in dst.chunks_mut(row_out).zip(src.chunks(row_in)) {
                        rayo::quant::dequantize(t.ty, s, &mut row)?;
                        rayo::quant::quantize(to, &row, d)?;
                    }
                    Ok(())
                })
            })
            .collect();
        jobs.into_iter().try_for_each(|j| j.join().unwrap_or(Ok(())))
    })?;
    Ok(out)
}

/// The numbers llama.cpp's rules read, from the model's metadata.
fn model_info(m: &Metadata) -> ModelInfo {
    let arch = m.get("general.architecture").and_then(GgufValue::as_str).unwrap_or("").to_string();
    let int = |key: &str| m.get(&format!("{arch}.{key}")).and_then(GgufValue::to_u64).map(|v| v as usize);
    let n_head = int("attention.head_count").unwrap_or(0);
    ModelInfo {
        n_layer: int("block_count").unwrap_or(0),
        n_head,
        n_head_kv: int("attention.head_count_kv").unwrap_or(n_head),
        n_expert: int("expert_count").unwrap_or(0),
        arch,
    }
}
