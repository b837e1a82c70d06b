//! Weight matrices on the device, as the file holds them: a matrix whose bytes pass the
//! adapter's storage-binding limit is split by rows over several buffers (browsers bind 128 MiB
//! by default); one row past the limit is an error naming the tensor and the limit.

use crate::{Error, Result};
use rayo::gpu::{wgpu, GpuDevice};
use rayo::quant::{self, GgmlType, QuantMatrix};

/// A block format a WGSL kernel reads in place: its name (the file `shaders/formats/NAME.wgsl`,
/// its decode). Each discriminant is the GGUF type id, the key into [`rayo::quant::formats::FORMATS`],
/// whose entries with a WGSL kernel are exactly [`WgslFormat::ALL`]; the block sizes (`QK`,
/// `BB`) are the table's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WgslFormat {
    F32 = 0,
    F16 = 1,
    Bf16 = 30,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q2K = 10,
    Q3K = 11,
    Q4K = 12,
    Q5K = 13,
    Q6K = 14,
}

impl WgslFormat {
    /// Every format with a WGSL kernel.
    pub const ALL: [WgslFormat; 13] = [
        WgslFormat::F32,
        WgslFormat::F16,
        WgslFormat::Bf16,
        WgslFormat::Q4_0,
        WgslFormat::Q4_1,
        WgslFormat::Q5_0,
        WgslFormat::Q5_1,
        WgslFormat::Q8_0,
        WgslFormat::Q2K,
        WgslFormat::Q3K,
        WgslFormat::Q4K,
        WgslFormat::Q5K,
        WgslFormat::Q6K,
    ];

    /// The kernel format of a GGUF type, or `None` where the table has no WGSL kernel for it and
    /// the weights are dequantized to f32 at load (Q8_1, Q8_K: activation formats, not found as
    /// weights in llama.cpp's files).
    pub fn of(ty: GgmlType) -> Option<WgslFormat> {
        ty.format().kernels.wgsl.then(|| WgslFormat::ALL.into_iter().find(|f| *f as u32 == ty.id())).flatten()
    }

    /// The GGUF type.
    pub fn ty(self) -> GgmlType {
        GgmlType::from_id(self as u32).expect("a WgslFormat is a GGUF type")
    }

    /// The WGSL that defines `SUB`, `scale_min` and `quant` for this format.
    pub fn source(self) -> &'static str {
        match self {
            WgslFormat::F32 => include_str!("shaders/formats/f32.wgsl"),
            WgslFormat::F16 => include_str!("shaders/formats/f16.wgsl"),
            WgslFormat::Bf16 => include_str!("shaders/formats/bf16.wgsl"),
            WgslFormat::Q4_0 => include_str!("shaders/formats/q4_0.wgsl"),
            WgslFormat::Q4_1 => include_str!("shaders/formats/q4_1.wgsl"),
            WgslFormat::Q5_0 => include_str!("shaders/formats/q5_0.wgsl"),
            WgslFormat::Q5_1 => include_str!("shaders/formats/q5_1.wgsl"),
            WgslFormat::Q8_0 => include_str!("shaders/formats/q8_0.wgsl"),
            WgslFormat::Q2K => include_str!("shaders/formats/q2_k.wgsl"),
            WgslFormat::Q3K => include_str!("shaders/formats/q3_k.wgsl"),
            WgslFormat::Q4K => include_str!("shaders/formats/q4_k.wgsl"),
            WgslFormat::Q5K => include_str!("shaders/formats/q5_k.wgsl"),
            WgslFormat::Q6K => include_str!("shaders/formats/q6_k.wgsl"),
        }
    }

    /// The block constants from the table: `QK` (values per block) and `BB` (bytes per block).
    pub fn block_constants(self) -> String {
        let f = self.ty().format();
        format!("const QK: u32 = {}u;\nconst BB: u32 = {}u;\n", f.block_values, f.block_bytes)
    }
}

/// A kernel over weights of `fmt`: the byte readers, the format (its block constants and
/// decode), then `body`.
pub(crate) fn format_kernel(fmt: WgslFormat, body: &str) -> String {
    // `w` is declared by the body; WGSL allows module-scope declarations in any order.
    format!("{}\n{}{}\n{}", include_str!("shaders/formats/common.wgsl"), fmt.block_constants(), fmt.source(), body)
}

/// One part of a matrix: rows `row0..row0 + rows` in `buf`.
pub struct Part {
    pub row0: usize,
    pub rows: usize,
    pub buf: wgpu::Buffer,
}

/// A weight matrix on the device.
pub struct WgpuWeight {
    pub fmt: WgslFormat,
    pub rows: usize,
    pub cols: usize,
    pub parts: Vec<Part>,
}

impl WgpuWeight {
    /// Device bytes held.
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.buf.size()).sum()
    }
}

/// Uploads `m` (named `name`, for errors and the log), split by rows so that no buffer passes
/// `limit` bytes.
pub(crate) fn upload(dev: &GpuDevice, name: &str, m: &QuantMatrix<'_>, limit: u64) -> Result<WgpuWeight> {
    let (rows, cols) = (m.rows(), m.cols());
    let converted: Vec<u8>;
    let (fmt, bytes) = match WgslFormat::of(m.ty()) {
        Some(f) => (f, m.bytes()),
        None => {
            log::info!("wgpu: {name} ({:?}) dequantized to f32 at load (no WGSL kernel for its format)", m.ty());
            let mut f = vec![0f32; rows * cols];
            quant::dequantize(m.ty(), m.bytes(), &mut f)?;
            converted = bytemuck::cast_slice(&f).to_vec();
            (WgslFormat::F32, &converted[..])
        }
    };
    let row_bytes = bytes.len() / rows.max(1);
    // parts are padded to 16 bytes
    let limit = limit & !15;
    if row_bytes as u64 + 16 > limit {
        return Err(Error::backend(
            "wgpu",
            format!("tensor {name}: one row is {row_bytes} bytes, past the adapter's storage-binding limit of {limit} bytes"),
        ));
    }
    let per_part = ((limit - 16) / row_bytes.max(1) as u64) as usize;
    if per_part < rows {
        log::info!("wgpu: {name} ({} bytes) split into {} bindings of at most {limit} bytes", bytes.len(), rows.div_ceil(per_part));
    }
    let mut parts = Vec::new();
    let mut row0 = 0;
    while row0 < rows {
        let n = per_part.min(rows - row0);
        let src = &bytes[row0 * row_bytes..(row0 + n) * row_bytes];
        parts.push(Part { row0, rows: n, buf: upload_bytes(dev, name, src)? });
        row0 += n;
    }
    Ok(WgpuWeight { fmt, rows, cols, parts })
}

/// A storage buffer holding `src`, padded with zeros to a multiple of 16 bytes (whole vec4s).
pub(crate) fn upload_bytes(dev: &GpuDevice, name: &str, src: &[u8]) -> Result<wgpu::Buffer> {
    let size = (src.len() as u64).next_multiple_of(16).max(16);
    let buf = dev.raw_device().create_buffer(&wgpu::BufferDescriptor {
        label: Some(name),
        size,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: true,
    });
    {
        let mut view = buf.slice(..).get_mapped_range_mut().map_err(|e| rayo::Error::Device { api: "wgpu", message: format!("{name}: {e}") })?;
        view.slice(..src.len()).copy_from_slice(src);
    }
    buf.unmap();
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `WgslFormat` is the table's WGSL column, and its block constants are the table's, not
    /// the format files'.
    #[test]
    fn wgsl_formats_are_the_tables_wgsl_column() {
        for f in quant::formats::FORMATS {
            let ty = GgmlType::from_id(f.id).unwrap();
            let w = WgslFormat::of(ty);
            assert_eq!(w.is_some(), f.kernels.wgsl, "{}", f.name);
            let Some(w) = w else { continue };
            assert_eq!(w.ty(), ty);
            assert_eq!(format!("{w:?}").replace('_', "").to_ascii_lowercase(), f.name.replace('_', "").to_ascii_lowercase());
            assert_eq!(w.block_constants(), format!("const QK: u32 = {}u;\nconst BB: u32 = {}u;\n", f.block_values, f.block_bytes));
            for line in w.source().lines() {
                assert!(!line.starts_with("const QK") && !line.starts_with("const BB"), "{w:?}: block constants come from the table");
            }
        }
        let table = quant::formats::FORMATS.iter().filter(|f| f.kernels.wgsl).count();
        assert_eq!(WgslFormat::ALL.len(), table);
    }
}
