//! The tensor formats of GGML/GGUF, defined once: one [`Format`] per format in [`FORMATS`],
//! with ggml's name, the GGUF type id, the block (values and bytes) and which backends have a
//! kernel that reads it in place.
//!
//! Everything else derives from this table or is checked against it: rayo's `GgmlType` (its
//! names, ids and block sizes, and at compile time the sizes of its block structs), the PTX
//! kernels' `QFormat` and the WGSL kernels' `WgslFormat` (their block sizes and the mappings
//! from a GGUF type), and each backend's format tests, which iterate the table. A format's
//! decode stays with each backend (rayo's scalar `BlockCodec`, the PTX and WGSL readers); the
//! table says which of them exist.
//!
//! This crate has no dependencies and sits below both `rayo` and `rayo-ptx` (which `rayo`
//! depends on only with its `cuda` feature), so both read the same table.
//!
//! Adding a format: one entry here; in `rayo::quant` a `GgmlType` variant (its id and order
//! are asserted against this table at compile time), its block struct (size asserted likewise)
//! and codec; for each backend whose column is set, a `QFormat` or `WgslFormat` variant and its
//! decode. The table tests of each crate say what is missing.

#![no_std]

/// Values per super-block of the k-quants.
pub const QK_K: u32 = 256;

/// Which backends have a kernel that reads a format in place (a backend without one
/// dequantizes such weights to f32 at load).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Kernels {
    /// rayo's CPU dequantizer and quantized products (`rayo::quant`).
    pub cpu: bool,
    /// The PTX kernels of `rayo-ptx` (`QFormat`: matvec, embedding, dequantization).
    pub ptx: bool,
    /// The WGSL kernels of `rayo-llm` (`WgslFormat`, `shaders/formats/NAME.wgsl`).
    pub wgsl: bool,
}

/// One tensor format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Format {
    /// ggml's spelling: `F32`, `Q4_K`, `BF16`, ...
    pub name: &'static str,
    /// The GGUF type id (`ggml_type` in llama.cpp's `ggml.h`).
    pub id: u32,
    /// Values per block (1 for the float types).
    pub block_values: u32,
    /// Bytes per block.
    pub block_bytes: u32,
    /// The backends that read it in place.
    pub kernels: Kernels,
}

const ALL: Kernels = Kernels { cpu: true, ptx: true, wgsl: true };
const CPU: Kernels = Kernels { cpu: true, ptx: false, wgsl: false };

const fn f(name: &'static str, id: u32, block_values: u32, block_bytes: u32, kernels: Kernels) -> Format {
    Format { name, id, block_values, block_bytes, kernels }
}

/// Every format rayo implements, in GGUF id order.
pub const FORMATS: [Format; 15] = [
    f("F32", 0, 1, 4, ALL),
    f("F16", 1, 1, 2, ALL),
    f("Q4_0", 2, 32, 18, ALL),
    f("Q4_1", 3, 32, 20, ALL),
    f("Q5_0", 6, 32, 22, ALL),
    f("Q5_1", 7, 32, 24, ALL),
    f("Q8_0", 8, 32, 34, ALL),
    // Q8_1 and Q8_K are the activations' side of the CPU products, not found as weights in
    // llama.cpp's files: the GPU backends dequantize them at load.
    f("Q8_1", 9, 32, 36, CPU),
    f("Q2_K", 10, QK_K, 84, ALL),
    f("Q3_K", 11, QK_K, 110, ALL),
    f("Q4_K", 12, QK_K, 144, ALL),
    f("Q5_K", 13, QK_K, 176, ALL),
    f("Q6_K", 14, QK_K, 210, ALL),
    f("Q8_K", 15, QK_K, 292, CPU),
    f("BF16", 30, 1, 2, ALL),
];

/// ggml's names for the type ids rayo does not implement (so errors can say what a file holds).
pub const FOREIGN: [(u32, &str); 17] = [
    (16, "IQ2_XXS"),
    (17, "IQ2_XS"),
    (18, "IQ3_XXS"),
    (19, "IQ1_S"),
    (20, "IQ4_NL"),
    (21, "IQ3_S"),
    (22, "IQ2_S"),
    (23, "IQ4_XS"),
    (24, "I8"),
    (25, "I16"),
    (26, "I32"),
    (27, "I64"),
    (28, "F64"),
    (29, "IQ1_M"),
    (34, "TQ1_0"),
    (35, "TQ2_0"),
    (39, "MXFP4"),
];

impl Format {
    /// The format with GGUF id `id`, if rayo implements it.
    pub const fn by_id(id: u32) -> Option<Format> {
        let mut i = 0;
        while i < FORMATS.len() {
            if FORMATS[i].id == id {
                return Some(FORMATS[i]);
            }
            i += 1;
        }
        None
    }

    /// The format spelled `name` (case-insensitive).
    pub fn by_name(name: &str) -> Option<Format> {
        FORMATS.iter().copied().find(|f| f.name.eq_ignore_ascii_case(name))
    }

    /// The format with GGUF id `id`; panics (at compile time where evaluated in a constant)
    /// when there is none.
    pub const fn of_id(id: u32) -> Format {
        match Format::by_id(id) {
            Some(f) => f,
            None => panic!("no format with this GGUF id in rayo_formats::FORMATS"),
        }
    }

    /// True for the block-quantized formats (not F32/F16/BF16).
    pub const fn is_quantized(&self) -> bool {
        self.block_values > 1
    }

    /// The block as a kernel that takes at least `values` values at a time sees it: the
    /// format's own block when it is that large, else as many whole blocks as make `values`
    /// (the PTX kernels read the float formats in blocks of 32). Returns (values, bytes).
    pub const fn block_of_at_least(&self, values: u32) -> (u32, u32) {
        if self.block_values >= values {
            (self.block_values, self.block_bytes)
        } else {
            let n = values.div_ceil(self.block_values);
            (n * self.block_values, n * self.block_bytes)
        }
    }
}

/// ggml's name for a type id rayo does not implement, or `"unknown"`.
pub fn foreign_name(id: u32) -> &'static str {
    FOREIGN.iter().find(|(i, _)| *i == id).map_or("unknown", |(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_are_unique_and_in_order() {
        for w in FORMATS.windows(2) {
            assert!(w[0].id < w[1].id, "{} before {}", w[0].name, w[1].name);
        }
        for (i, a) in FORMATS.iter().enumerate() {
            assert!(FORMATS[i + 1..].iter().all(|b| !b.name.eq_ignore_ascii_case(a.name)), "{}", a.name);
            assert!(FOREIGN.iter().all(|(id, n)| *id != a.id && *n != a.name), "{}", a.name);
            assert_eq!(Format::by_id(a.id), Some(*a));
            assert_eq!(Format::by_name(&a.name.to_ascii_lowercase()), Some(*a));
        }
        assert_eq!(foreign_name(20), "IQ4_NL");
        assert_eq!(foreign_name(1000), "unknown");
        assert_eq!(Format::by_id(20), None);
    }

    #[test]
    fn blocks_are_sane() {
        for f in FORMATS {
            assert!(f.block_values.is_power_of_two() && f.block_bytes > 0, "{}", f.name);
            // every format packs at most 4 bytes a value, the quantized ones under 1.2
            assert!(f.block_bytes <= 4 * f.block_values, "{}", f.name);
            assert_eq!(f.is_quantized(), f.block_bytes * 5 < f.block_values * 6, "{}", f.name);
            assert!(f.kernels.cpu, "{}: every format has a CPU decode", f.name);
        }
        assert_eq!(Format::of_id(0).block_of_at_least(32), (32, 128));
        assert_eq!(Format::of_id(30).block_of_at_least(32), (32, 64));
        assert_eq!(Format::of_id(12).block_of_at_least(32), (256, 144));
    }
}
