//! Weight matrices on the device, as the file holds them: a matrix whose bytes pass the
//! adapter's storage-binding limit is split by rows over several buffers (browsers bind 128 MiB
//! by default); one row past the limit is an error naming the tensor and the limit.

use crate::{Error, Result};
use rayo::gpu::{wgpu, GpuDevice};
use rayo::quant::{self, GgmlType, QuantMatrix};

/// A block format a WGSL kernel reads in place: its name (the file `shaders/formats/NAME.wgsl`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WgslFormat {
    F32,
    F16,
    Bf16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2K,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
}

impl WgslFormat {
    /// The kernel format of a GGUF type, or `None` where the weights are dequantized to f32 at
    /// load (Q8_1, Q8_K: activation formats, not found as weights in llama.cpp's files).
    pub fn of(ty: GgmlType) -> Option<WgslFormat> {
        Some(match ty {
            GgmlType::F32 => WgslFormat::F32,
            GgmlType::F16 => WgslFormat::F16,
            GgmlType::BF16 => WgslFormat::Bf16,
            GgmlType::Q4_0 => WgslFormat::Q4_0,
            GgmlType::Q4_1 => WgslFormat::Q4_1,
            GgmlType::Q5_0 => WgslFormat::Q5_0,
            GgmlType::Q5_1 => WgslFormat::Q5_1,
            GgmlType::Q8_0 => WgslFormat::Q8_0,
            GgmlType::Q2_K => WgslFormat::Q2K,
            GgmlType::Q3_K => WgslFormat::Q3K,
            GgmlType::Q4_K => WgslFormat::Q4K,
            GgmlType::Q5_K => WgslFormat::Q5K,
            GgmlType::Q6_K => WgslFormat::Q6K,
            _ => return None,
        })
    }

    /// The WGSL that defines `QK`, `BB`, `SUB`, `scale_min` and `quant` for this format.
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
}

/// A kernel over weights of `fmt`: the byte readers, the format, then `body`.
pub(crate) fn format_kernel(fmt: WgslFormat, body: &str) -> String {
    // `w` is declared by the body; WGSL allows module-scope declarations in any order.
    format!("{}\n{}\n{}", include_str!("shaders/formats/common.wgsl"), fmt.source(), body)
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
