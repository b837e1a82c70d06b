//! The model's tensors, found by name in a GGUF file and checked against the [`Config`]:
//! each weight matrix is a place in the file (type, shape, byte range), never a copy.

use crate::config::Config;
use crate::{Error, Result};
use rayo::gguf::{GgufFile, TensorInfo};
use rayo::quant::{GgmlType, QuantMatrix};
use std::ops::Range;

/// A weight matrix in the file: `rows × cols` values of `ty`, row-major (GGUF's `ne[1] × ne[0]`).
#[derive(Clone, Debug)]
pub struct WeightRef {
    /// The tensor's name, for errors.
    pub name: String,
    pub ty: GgmlType,
    pub rows: usize,
    pub cols: usize,
    /// Its bytes within [`GgufFile::as_bytes`].
    pub range: Range<usize>,
}

impl WeightRef {
    /// Rows `r0..r1` of this matrix (a part of a fused tensor), named `part` in errors.
    pub fn rows_of(&self, r0: usize, r1: usize, part: &str) -> Result<WeightRef> {
        let row = self.ty.bytes_for(self.cols).map_err(crate::Error::from)?;
        if r0 > r1 || r1 > self.rows {
            return Err(Error::tensor(&self.name, format!("has {} rows, not the {r0}..{r1} of its {part}", self.rows)));
        }
        let start = self.range.start + r0 * row;
        Ok(WeightRef { name: format!("{} ({part})", self.name), ty: self.ty, rows: r1 - r0, cols: self.cols, range: start..start + (r1 - r0) * row })
    }

    /// The matrix as a view of `file`'s bytes.
    pub fn matrix<'f>(&self, file: &'f GgufFile) -> Result<QuantMatrix<'f>> {
        QuantMatrix::new(self.ty, self.rows, self.cols, &file.as_bytes()[self.range.clone()]).map_err(crate::Error::from)
    }
}

/// One transformer block's tensors.
#[derive(Clone, Debug)]
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    pub wq: WeightRef,
    pub wk: WeightRef,
    pub wv: WeightRef,
    /// Biases of the q/k/v projections ([`crate::arch::Architecture::qkv_bias`]), else `None`.
    pub bias: Option<[Vec<f32>; 3]>,
    /// Per-head RMSNorm weights of the queries and keys (`head_dim` values each;
    /// [`crate::arch::Architecture::qk_norm`]), else `None`.
    pub qk_norm: Option<[Vec<f32>; 2]>,
    pub wo: WeightRef,
    pub ffn_norm: Vec<f32>,
    pub gate: WeightRef,
    pub up: WeightRef,
    pub down: WeightRef,
    /// RMSNorm weights of the attention's and the MLP's outputs
    /// ([`crate::arch::Architecture::post_norms`]), else `None`.
    pub post_norms: Option<[Vec<f32>; 2]>,
}

/// All of a model's tensors. Norm weights (a few KB) are copied to f32; matrices stay in the file.
#[derive(Clone, Debug)]
pub struct Weights {
    pub token_embd: WeightRef,
    pub layers: Vec<LayerWeights>,
    pub output_norm: Vec<f32>,
    /// The LM head: `output.weight`, or the embedding table when the model ties them.
    pub output: WeightRef,
}

impl Weights {
    /// Finds and checks every tensor `cfg.arch` declares. A missing tensor, a shape that
    /// contradicts `cfg`, or a tensor in the file that the architecture does not use (its
    /// computation would be silently left out) is an [`Error::Tensor`] naming the tensor.
    pub fn from_gguf(file: &GgufFile, cfg: &Config) -> Result<Weights> {
        let mut t = Tensors { file, used: Vec::new() };
        let (d, q, kv, ff, hd) = (cfg.n_embd, cfg.q_width(), cfg.kv_width(), cfg.n_ff, cfg.head_dim);
        let arch = cfg.arch;
        let s = cfg.shard;
        if !s.is_alone() && file.tensor("output.weight").is_none() {
            return Err(Error::tensor("output.weight", format!("is missing: rank {} of {} holds its rows of the head", s.rank, s.world)));
        }
        // a tensor-parallel rank's table: its rows of the vocabulary and a zero row
        let token_embd = t.matrix("token_embd.weight", crate::shard::embedding_rows(s, cfg.vocab_size), d)?;
        // a tensor-parallel rank's head holds its part of the vocabulary's rows
        let head_rows = s.part(cfg.vocab_size).len();
        let output = match file.tensor("output.weight") {
            Some(_) => t.matrix("output.weight", head_rows, d)?,
            None => token_embd.clone(),
        };
        // grown as tensors are found: a hostile block_count must not reserve memory up front
        let mut layers = Vec::new();
        for i in 0..cfg.n_layer {
            let name = |n: &str| format!("blk.{i}.{n}");
            let bias = match arch.qkv_bias {
                true => Some([t.vector(&name("attn_q.bias"), q)?, t.vector(&name("attn_k.bias"), kv)?, t.vector(&name("attn_v.bias"), kv)?]),
                false => None,
            };
            let qk_norm = match arch.qk_norm {
                true => Some([t.vector(&name("attn_q_norm.weight"), hd)?, t.vector(&name("attn_k_norm.weight"), hd)?]),
                false => None,
            };
            let post_norms = match arch.post_norms {
                true => Some([t.vector(&name("post_attention_norm.weight"), d)?, t.vector(&name("post_ffw_norm.weight"), d)?]),
                false => None,
            };
            let (wq, wk, wv) = match arch.fused && file.tensor(&name("attn_qkv.weight")).is_some() {
                true => {
                    let qkv = t.matrix(&name("attn_qkv.weight"), q + 2 * kv, d)?;
                    (qkv.rows_of(0, q, "Q")?, qkv.rows_of(q, q + kv, "K")?, qkv.rows_of(q + kv, q + 2 * kv, "V")?)
                }
                false => {
                    (t.matrix(&name("attn_q.weight"), q, d)?, t.matrix(&name("attn_k.weight"), kv, d)?, t.matrix(&name("attn_v.weight"), kv, d)?)
                }
            };
            let (gate, up) = match arch.fused {
                true => {
                    let gate_up = t.matrix(&name("ffn_up.weight"), 2 * ff, d)?;
                    (gate_up.rows_of(0, ff, "gate")?, gate_up.rows_of(ff, 2 * ff, "up")?)
                }
                false => (t.matrix(&name("ffn_gate.weight"), ff, d)?, t.matrix(&name("ffn_up.weight"), ff, d)?),
            };
            layers.push(LayerWeights {
                attn_norm: t.vector(&name("attn_norm.weight"), d)?,
                wq,
                wk,
                wv,
                bias,
                qk_norm,
                wo: t.matrix(&name("attn_output.weight"), d, q)?,
                ffn_norm: t.vector(&name("ffn_norm.weight"), d)?,
                gate,
                up,
                down: t.matrix(&name("ffn_down.weight"), d, ff)?,
                post_norms,
            });
        }
        let output_norm = t.vector("output_norm.weight", d)?;
        if cfg.rope_freqs.is_some() {
            t.used.push(ROPE_FREQS.to_string());
        }
        if cfg.long_rope.is_some() {
            t.used.extend(LONG_ROPE.map(String::from));
        }
        if let Some(extra) = file.tensors().iter().find(|x| !t.used.contains(&x.name)) {
            return Err(Error::tensor(&extra.name, format!("is in the file, but the `{}` block this engine runs does not use it", arch.name)));
        }
        Ok(Weights { token_embd, layers, output_norm, output })
    }

    /// The bytes of every matrix the forward pass reads once per token.
    pub fn bytes_per_token(&self) -> usize {
        let layer = |l: &LayerWeights| [&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down].iter().map(|w| w.range.len()).sum::<usize>();
        self.layers.iter().map(layer).sum::<usize>() + self.output.range.len()
    }
}

/// The tensor of RoPE's per-pair frequency divisors.
const ROPE_FREQS: &str = "rope_freqs.weight";

/// LongRoPE's tensors of divisors: for a context past the original one, and up to it.
const LONG_ROPE: [&str; 2] = ["rope_factors_long.weight", "rope_factors_short.weight"];

/// `rope_freqs.weight` when the file has it: `n_rot / 2` finite positive values (else an error
/// naming the tensor).
pub fn rope_freqs(file: &GgufFile, n_rot: usize) -> Result<Option<Vec<f32>>> {
    if file.tensor(ROPE_FREQS).is_none() {
        return Ok(None);
    }
    divisors(file, ROPE_FREQS, n_rot).map(Some)
}

/// LongRoPE's divisors when the file has them (both tensors, each as [`rope_freqs`]'s; one
/// without the other is an error naming the missing one), with the context they switch at:
/// `rope.scaling.original_context_length`, else `trained` (llama.cpp's default).
pub fn long_rope(file: &GgufFile, n_rot: usize, trained: usize) -> Result<Option<crate::config::LongRope>> {
    let [long, short] = LONG_ROPE;
    match (file.tensor(long), file.tensor(short)) {
        (None, None) => return Ok(None),
        (Some(_), None) => return Err(Error::tensor(short, format!("is missing (the file has {long}: LongRoPE needs both)"))),
        (None, Some(_)) => return Err(Error::tensor(long, format!("is missing (the file has {short}: LongRoPE needs both)"))),
        _ => {}
    }
    let arch = file.metadata().get("general.architecture").and_then(|v| v.as_str()).unwrap_or_default();
    let key = format!("{arch}.rope.scaling.original_context_length");
    let original_context = match file.metadata().get(&key) {
        None => trained,
        Some(v) => match v.to_f64() {
            Some(n) if n >= 1.0 && n.fract() == 0.0 && n <= usize::MAX as f64 => n as usize,
            _ => return Err(Error::Metadata { key, problem: format!("is {v:?}, expected a positive integer") }),
        },
    };
    Ok(Some(crate::config::LongRope { long: divisors(file, long, n_rot)?, short: divisors(file, short, n_rot)?, original_context }))
}

/// The vector `name` of `n_rot / 2` RoPE divisors, each finite and positive.
fn divisors(file: &GgufFile, name: &str, n_rot: usize) -> Result<Vec<f32>> {
    let v = vector(file, name, n_rot / 2)?;
    match v.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
        Some(bad) => Err(Error::tensor(name, format!("holds {bad}: RoPE's frequency divisors must be finite and positive"))),
        None => Ok(v),
    }
}

fn find<'f>(file: &'f GgufFile, name: &str) -> Result<&'f TensorInfo> {
    file.tensor(name).ok_or_else(|| Error::tensor(name, "is missing"))
}

/// The file's tensors, and the names taken so far.
struct Tensors<'f> {
    file: &'f GgufFile,
    used: Vec<String>,
}

impl Tensors<'_> {
    fn matrix(&mut self, name: &str, rows: usize, cols: usize) -> Result<WeightRef> {
        self.used.push(name.to_string());
        matrix(self.file, name, rows, cols)
    }
    fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>> {
        self.used.push(name.to_string());
        vector(self.file, name, len)
    }
}

fn shape_error(t: &TensorInfo, want: &[usize]) -> Error {
    Error::tensor(&t.name, format!("has shape {:?}, the metadata implies {:?}", t.shape, want))
}

/// The matrix `name`, checked to be `rows × cols` (GGUF shape `[cols, rows]`).
fn matrix(file: &GgufFile, name: &str, rows: usize, cols: usize) -> Result<WeightRef> {
    let t = find(file, name)?;
    if t.shape.len() != 2 || t.shape[0] != cols as u64 || t.shape[1] != rows as u64 {
        return Err(shape_error(t, &[cols, rows]));
    }
    // `tensor_data` checks the bytes lie in the file, so the offset fits a usize (checked anyway).
    let len = file.tensor_data(t)?.len();
    let range = file
        .data_offset()
        .checked_add(t.offset)
        .and_then(|s| usize::try_from(s).ok())
        .and_then(|s| Some(s..s.checked_add(len)?))
        .ok_or_else(|| Error::tensor(name, format!("has an offset {} past the data at {} that overflows", t.offset, file.data_offset())))?;
    let w = WeightRef { name: name.to_string(), ty: t.ty, rows, cols, range };
    w.matrix(file).map_err(|e| Error::tensor(name, format!("cannot be read: {e}")))?;
    Ok(w)
}

/// The vector `name` (`len` values of F32, F16 or BF16, as norm weights and biases are stored),
/// as f32.
fn vector(file: &GgufFile, name: &str, len: usize) -> Result<Vec<f32>> {
    let t = find(file, name)?;
    if t.shape.len() != 1 || t.shape[0] != len as u64 {
        return Err(shape_error(t, &[len]));
    }
    let mut out = vec![0.0; len];
    rayo::quant::dequantize(t.ty, file.tensor_data(t)?, &mut out).map_err(|e| Error::tensor(name, format!("cannot be read: {e}")))?;
    Ok(out)
}
