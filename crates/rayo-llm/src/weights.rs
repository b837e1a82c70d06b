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
    /// Biases of the q/k/v projections (`qwen2`), else `None`.
    pub bias: Option<[Vec<f32>; 3]>,
    pub wo: WeightRef,
    pub ffn_norm: Vec<f32>,
    pub gate: WeightRef,
    pub up: WeightRef,
    pub down: WeightRef,
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
    /// Finds and checks every tensor the model needs. A missing tensor or a shape that
    /// contradicts `cfg` is an [`Error::Tensor`] naming the tensor and both shapes.
    pub fn from_gguf(file: &GgufFile, cfg: &Config) -> Result<Weights> {
        let (d, q, kv, ff) = (cfg.n_embd, cfg.q_width(), cfg.kv_width(), cfg.n_ff);
        let token_embd = matrix(file, "token_embd.weight", cfg.vocab_size, d)?;
        let output = match file.tensor("output.weight") {
            Some(_) => matrix(file, "output.weight", cfg.vocab_size, d)?,
            None => token_embd.clone(),
        };
        let layers = (0..cfg.n_layer)
            .map(|i| {
                let name = |t: &str| format!("blk.{i}.{t}");
                let bias = if cfg.qkv_bias {
                    Some([vector(file, &name("attn_q.bias"), q)?, vector(file, &name("attn_k.bias"), kv)?, vector(file, &name("attn_v.bias"), kv)?])
                } else {
                    None
                };
                Ok(LayerWeights {
                    attn_norm: vector(file, &name("attn_norm.weight"), d)?,
                    wq: matrix(file, &name("attn_q.weight"), q, d)?,
                    wk: matrix(file, &name("attn_k.weight"), kv, d)?,
                    wv: matrix(file, &name("attn_v.weight"), kv, d)?,
                    bias,
                    wo: matrix(file, &name("attn_output.weight"), d, q)?,
                    ffn_norm: vector(file, &name("ffn_norm.weight"), d)?,
                    gate: matrix(file, &name("ffn_gate.weight"), ff, d)?,
                    up: matrix(file, &name("ffn_up.weight"), ff, d)?,
                    down: matrix(file, &name("ffn_down.weight"), d, ff)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Weights { token_embd, layers, output_norm: vector(file, "output_norm.weight", d)?, output })
    }

    /// The bytes of every matrix the forward pass reads once per token.
    pub fn bytes_per_token(&self) -> usize {
        let layer = |l: &LayerWeights| [&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down].iter().map(|w| w.range.len()).sum::<usize>();
        self.layers.iter().map(layer).sum::<usize>() + self.output.range.len()
    }
}

fn find<'f>(file: &'f GgufFile, name: &str) -> Result<&'f TensorInfo> {
    file.tensor(name).ok_or_else(|| Error::tensor(name, "is missing"))
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
