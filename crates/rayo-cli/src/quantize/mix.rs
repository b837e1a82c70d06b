//! Which type each tensor gets: llama.cpp's `llama_tensor_get_type` (src/llama-quant.cpp of the
//! llama.cpp vendored in PyPI `llama-cpp-python` 0.3.36), ported for the file types rayo writes,
//! with no importance matrix and no overrides. The order of the rules, the layer counters and
//! the fallbacks for rows that are not a whole number of blocks are llama.cpp's, so a file
//! quantized here holds the same types per tensor as `llama-quantize` writes.

use rayo::quant::GgmlType;

/// A target file type, as `llama-quantize` names it (`LLAMA_FTYPE_*`; the value is written to
/// `general.file_type`).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileType {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q8_0 = 7,
    Q5_0 = 8,
    Q5_1 = 9,
    Q2_K = 10,
    Q3_K_S = 11,
    Q3_K_M = 12,
    Q3_K_L = 13,
    Q4_K_S = 14,
    Q4_K_M = 15,
    Q5_K_S = 16,
    Q5_K_M = 17,
    Q6_K = 18,
    BF16 = 32,
}

/// Every name `rayo quantize` takes, with llama-quantize's aliases (`Q4_K` is `Q4_K_M`).
/// (`Q2_K_S` is left out: llama.cpp requires an importance matrix for it.)
pub const NAMES: [(&str, FileType); 20] = [
    ("Q4_0", FileType::Q4_0),
    ("Q4_1", FileType::Q4_1),
    ("Q5_0", FileType::Q5_0),
    ("Q5_1", FileType::Q5_1),
    ("Q8_0", FileType::Q8_0),
    ("Q2_K", FileType::Q2_K),
    ("Q3_K", FileType::Q3_K_M),
    ("Q3_K_S", FileType::Q3_K_S),
    ("Q3_K_M", FileType::Q3_K_M),
    ("Q3_K_L", FileType::Q3_K_L),
    ("Q4_K", FileType::Q4_K_M),
    ("Q4_K_S", FileType::Q4_K_S),
    ("Q4_K_M", FileType::Q4_K_M),
    ("Q5_K", FileType::Q5_K_M),
    ("Q5_K_S", FileType::Q5_K_S),
    ("Q5_K_M", FileType::Q5_K_M),
    ("Q6_K", FileType::Q6_K),
    ("F16", FileType::F16),
    ("BF16", FileType::BF16),
    ("F32", FileType::F32),
];

impl FileType {
    /// The file type named `name` (case-insensitive), as `llama-quantize` spells it.
    pub fn from_name(name: &str) -> Option<FileType> {
        NAMES.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|&(_, t)| t)
    }

    /// The canonical name (`Q4_K_M` for `Q4_K`).
    pub fn name(self) -> &'static str {
        NAMES.iter().rev().find(|(_, t)| *t == self).map(|&(n, _)| n).unwrap_or("?")
    }

    /// The type most tensors get (`llama_ftype_get_default_type`).
    pub fn default_type(self) -> GgmlType {
        use FileType::*;
        match self {
            F32 => GgmlType::F32,
            F16 => GgmlType::F16,
            BF16 => GgmlType::BF16,
            Q4_0 => GgmlType::Q4_0,
            Q4_1 => GgmlType::Q4_1,
            Q5_0 => GgmlType::Q5_0,
            Q5_1 => GgmlType::Q5_1,
            Q8_0 => GgmlType::Q8_0,
            Q2_K => GgmlType::Q2_K,
            Q3_K_S | Q3_K_M | Q3_K_L => GgmlType::Q3_K,
            Q4_K_S | Q4_K_M => GgmlType::Q4_K,
            Q5_K_S | Q5_K_M => GgmlType::Q5_K,
            Q6_K => GgmlType::Q6_K,
        }
    }
}

/// What the rules need to know of the model (from its GGUF metadata).
#[derive(Clone, Debug, Default)]
pub struct ModelInfo {
    /// `general.architecture`.
    pub arch: String,
    /// `{arch}.block_count`.
    pub n_layer: usize,
    /// `{arch}.attention.head_count`.
    pub n_head: usize,
    /// `{arch}.attention.head_count_kv` (the head count when absent).
    pub n_head_kv: usize,
    /// `{arch}.expert_count` (0 when absent).
    pub n_expert: usize,
}

impl ModelInfo {
    fn n_gqa(&self) -> usize {
        // llama.cpp's n_gqa(): 0 when there are no KV heads.
        self.n_head.checked_div(self.n_head_kv).unwrap_or(0)
    }
    /// llama.cpp's `LLM_TYPE_70B`: a llama with 80 layers and grouped KV heads.
    fn is_70b(&self) -> bool {
        self.arch == "llama" && self.n_layer == 80 && self.n_head != self.n_head_kv
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Category {
    Output,
    TokenEmbd,
    AttnQkv,
    AttnKvB,
    AttnV,
    AttnK,
    AttnQ,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Other,
}

fn category(name: &str) -> Category {
    use Category::*;
    if name == "output.weight" {
        Output
    } else if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
        TokenEmbd
    } else if name.contains("attn_qkv.weight") {
        AttnQkv
    } else if name.contains("attn_kv_b.weight") {
        AttnKvB
    } else if name.contains("attn_v.weight") {
        AttnV
    } else if name.contains("attn_k.weight") {
        AttnK
    } else if name.contains("attn_q.weight") {
        AttnQ
    } else if name.contains("attn_output.weight") {
        AttnOutput
    } else if name.contains("ffn_up") {
        FfnUp
    } else if name.contains("ffn_gate") {
        FfnGate
    } else if name.contains("ffn_down") {
        FfnDown
    } else {
        Other
    }
}

fn is_attn_v(c: Category) -> bool {
    matches!(c, Category::AttnV | Category::AttnQkv | Category::AttnKvB)
}

/// `tensor_allows_quantization`: 2-D (or more) weights, not norms, not the MoE router, not the
/// small tensors llama.cpp keeps as they are. `shape` is ggml's `ne` (row length first).
pub fn allows_quantization(name: &str, shape: &[u64]) -> bool {
    // ggml_n_dims: trailing dimensions of size 1 do not count.
    let n_dims = shape.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1);
    if n_dims < 2 || !name.ends_with("weight") {
        return false;
    }
    const KEEP: [&str; 12] = [
        "_norm.weight",
        "ffn_gate_inp.weight",
        "ffn_gate_tid2eid.weight",
        "altup",
        "laurel",
        "per_layer_model_proj",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "attn_rel_b.weight",
        "time_mix_",
        ".position_embd",
        ".patch_embd",
    ];
    !KEEP.iter().any(|k| name.contains(k)) && name != "position_embd.weight" && name != "token_types.weight"
}

/// The order llama.cpp's loader keeps tensors in (and `llama-quantize` processes and writes
/// them in, which its layer counters depend on): by layer number (`blk.N.`; other tensors
/// first), then by name.
pub fn llama_order(name: &str) -> (i64, &str) {
    let layer = name.strip_prefix("blk.").and_then(|r| r.split('.').next()).and_then(|s| s.parse::<i64>().ok()).unwrap_or(-1);
    (layer, name)
}

/// The per-file state of llama.cpp's rules (its layer counters), fed the tensors in file order.
pub struct Planner {
    ftype: FileType,
    model: ModelInfo,
    has_tied_embeddings: bool,
    n_attention_wv: usize,
    i_attention_wv: usize,
    i_ffn_down: usize,
    /// Tensors whose row length forced a fallback type.
    pub n_fallback: usize,
}

impl Planner {
    /// `names`: every tensor name in the file (the counters need the totals up front).
    pub fn new<'a>(ftype: FileType, model: ModelInfo, names: impl IntoIterator<Item = &'a str>) -> Planner {
        let mut p = Planner { ftype, model, has_tied_embeddings: true, n_attention_wv: 0, i_attention_wv: 0, i_ffn_down: 0, n_fallback: 0 };
        for name in names {
            let c = category(name);
            if is_attn_v(c) {
                p.n_attention_wv += 1;
            }
            if c == Category::Output {
                p.has_tied_embeddings = false;
            }
        }
        p
    }

    /// The type of the next tensor (`llama_tensor_get_type`); `current` is its type in the input.
    pub fn choose(&mut self, name: &str, shape: &[u64], current: GgmlType) -> GgmlType {
        if !allows_quantization(name, shape) {
            return current;
        }
        let default = self.ftype.default_type();
        if !default.is_quantized() {
            return default;
        }
        let cat = category(name);
        let chosen = self.rules(default, name, shape, cat);
        self.fallback(shape, chosen)
    }

    /// `tensor_type_fallback`: a 256-block type on rows that are not a multiple of 256 wide.
    fn fallback(&mut self, shape: &[u64], t: GgmlType) -> GgmlType {
        let ncols = shape.first().copied().unwrap_or(0);
        if ncols % t.block_size() as u64 == 0 {
            return t;
        }
        self.n_fallback += 1;
        let f = match t {
            GgmlType::Q2_K | GgmlType::Q3_K => GgmlType::Q4_0,
            GgmlType::Q4_K => GgmlType::Q5_0,
            GgmlType::Q5_K => GgmlType::Q5_1,
            GgmlType::Q6_K => GgmlType::Q8_0,
            other => other,
        };
        if ncols % f.block_size() as u64 != 0 {
            GgmlType::F16
        } else {
            f
        }
    }

    /// `llama_tensor_get_type_impl`, for the file types above.
    fn rules(&mut self, mut t: GgmlType, name: &str, shape: &[u64], cat: Category) -> GgmlType {
        use FileType as F;
        use GgmlType as G;
        let ft = self.ftype;
        let m = &self.model;
        let falcon = m.arch == "falcon";
        let use_more_bits = |i: usize, n: usize| i < n / 8 || i >= 7 * n / 8 || (i as i64 - (n / 8) as i64).rem_euclid(3) == 2;
        // The layer of a ffn tensor: its counter, or (in MoE models) the number in its name.
        let layer = |counter: usize| -> usize {
            if m.n_expert > 1 {
                name.strip_prefix("blk.").and_then(|r| r.split('.').next()).and_then(|s| s.parse().ok()).unwrap_or(counter)
            } else {
                counter
            }
        };
        let n_layer = m.n_layer;
        if cat == Category::Output || (self.has_tied_embeddings && cat == Category::TokenEmbd) {
            let nx = shape.first().copied().unwrap_or(0);
            if falcon || nx % t.block_size() as u64 != 0 {
                t = G::Q8_0;
            } else if t != G::Q8_0 {
                t = G::Q6_K;
            }
        } else if cat == Category::TokenEmbd {
            // (only the IQ and ternary file types change the untied token embeddings)
        } else if is_attn_v(cat) {
            let gqa4 = m.n_gqa() >= 4;
            if ft == F::Q2_K {
                t = if gqa4 { G::Q4_K } else { G::Q3_K };
            } else if ft == F::Q3_K_M {
                t = if self.i_attention_wv < 2 { G::Q5_K } else { G::Q4_K };
            } else if ft == F::Q3_K_L {
                t = G::Q5_K;
            } else if (ft == F::Q4_K_M || ft == F::Q5_K_M) && use_more_bits(self.i_attention_wv, self.n_attention_wv) {
                t = G::Q6_K;
            } else if ft == F::Q4_K_S && self.i_attention_wv < 4 {
                t = G::Q5_K;
            }
            if m.is_70b() && (t == G::Q3_K || t == G::Q4_K) {
                t = G::Q5_K;
            }
            if m.n_expert == 8 {
                t = G::Q8_0;
            }
            self.i_attention_wv += 1;
        } else if cat == Category::AttnK {
            if m.n_expert == 8 {
                t = G::Q8_0;
            }
        } else if cat == Category::FfnDown {
            let i = layer(self.i_ffn_down);
            if ft == F::Q2_K {
                t = G::Q3_K;
            } else if ft == F::Q3_K_M {
                t = if i < n_layer / 16 {
                    G::Q5_K
                } else if !falcon || use_more_bits(i, n_layer) {
                    G::Q4_K
                } else {
                    G::Q3_K
                };
            } else if ft == F::Q3_K_L {
                t = if falcon { G::Q4_K } else { G::Q5_K };
            } else if ft == F::Q4_K_M {
                if falcon {
                    t = if i < n_layer / 16 {
                        G::Q6_K
                    } else if use_more_bits(i, n_layer) {
                        G::Q5_K
                    } else {
                        G::Q4_K
                    };
                } else if use_more_bits(i, n_layer) {
                    t = G::Q6_K;
                }
            } else if ft == F::Q5_K_M && use_more_bits(i, n_layer) {
                t = G::Q6_K;
            } else if ft == F::Q4_K_S && !falcon && i < n_layer / 8 {
                t = G::Q5_K;
            }
            self.i_ffn_down += 1;
        } else if cat == Category::AttnOutput {
            if !falcon {
                if m.n_expert == 8 {
                    if matches!(ft, F::Q2_K | F::Q3_K_S | F::Q3_K_M | F::Q4_K_S | F::Q4_K_M) {
                        t = G::Q5_K;
                    }
                } else if ft == F::Q2_K {
                    t = G::Q3_K;
                } else if ft == F::Q3_K_M {
                    t = G::Q4_K;
                } else if ft == F::Q3_K_L {
                    t = G::Q5_K;
                }
            } else if ft == F::Q3_K_L {
                t = G::Q4_K;
            }
        } else if cat == Category::AttnQkv {
            if ft == F::Q3_K_M || ft == F::Q3_K_L {
                t = G::Q4_K;
            } else if ft == F::Q4_K_M {
                t = G::Q5_K;
            } else if ft == F::Q5_K_M {
                t = G::Q6_K;
            }
        }
        // (ffn_gate and ffn_up change only in the IQ file types, which rayo does not write.)
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_follow_llama_quantize() {
        assert_eq!(FileType::from_name("q4_k"), Some(FileType::Q4_K_M));
        assert_eq!(FileType::from_name("Q3_K"), Some(FileType::Q3_K_M));
        assert_eq!(FileType::Q4_K_M.name(), "Q4_K_M");
        assert_eq!(FileType::Q5_K_M as u32, 17);
        assert_eq!(FileType::from_name("Q4_K_X"), None);
        assert_eq!(FileType::from_name("Q2_K_S"), None);
    }

    #[test]
    fn norms_and_vectors_are_kept() {
        assert!(!allows_quantization("blk.0.attn_norm.weight", &[576]));
        assert!(!allows_quantization("blk.0.attn_norm.weight", &[576, 1]));
        assert!(!allows_quantization("blk.0.ffn_gate_inp.weight", &[576, 8]));
        assert!(allows_quantization("blk.0.ffn_up.weight", &[576, 1536]));
        assert!(!allows_quantization("blk.0.attn_q.bias", &[576, 2]));
    }

    #[test]
    fn layers_sort_by_number_then_name() {
        let mut v = vec!["blk.10.attn_q.weight", "blk.2.ffn_up.weight", "output_norm.weight", "blk.2.attn_k.weight", "token_embd.weight"];
        v.sort_by_key(|n| llama_order(n));
        assert_eq!(v, ["output_norm.weight", "token_embd.weight", "blk.2.attn_k.weight", "blk.2.ffn_up.weight", "blk.10.attn_q.weight"]);
    }

    /// Every file type on SmolLM2-135M (width 576, not a multiple of 256, so the k-quants fall
    /// back to 32-wide types on most tensors): the type of every tensor equals the one
    /// llama-quantize chose (tests/data/smollm2-mix.txt, from scripts/ref/quantize-mix.sh).
    #[test]
    fn every_file_type_matches_llama_quantize_on_smollm2() {
        let text = include_str!("../../tests/data/smollm2-mix.txt");
        let mut input = Vec::new();
        let mut want: std::collections::BTreeMap<&str, std::collections::BTreeMap<&str, &str>> = Default::default();
        for line in text.lines() {
            let f: Vec<&str> = line.split(' ').collect();
            if f[0] == "sha256" {
                continue;
            }
            if f[0] == "input" {
                let shape: Vec<u64> = f[3].split('x').map(|d| d.parse().unwrap()).collect();
                input.push((f[1], GgmlType::from_name(f[2]).unwrap(), shape));
            } else {
                want.entry(f[0]).or_default().insert(f[1], f[2]);
            }
        }
        input.sort_by_key(|(n, _, _)| llama_order(n));
        let model = ModelInfo { arch: "llama".into(), n_layer: 30, n_head: 9, n_head_kv: 3, n_expert: 0 };
        assert_eq!(want.len(), 16);
        for (ftype_name, types) in &want {
            let ftype = FileType::from_name(ftype_name).unwrap();
            let mut p = Planner::new(ftype, model.clone(), input.iter().map(|(n, _, _)| *n));
            for (name, cur, shape) in &input {
                let got = p.choose(name, shape, *cur);
                assert_eq!(got.name(), types[name], "{ftype_name}: {name}");
            }
        }
    }
}
