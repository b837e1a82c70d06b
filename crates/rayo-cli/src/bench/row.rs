//! One measured row of `rayo bench`: printed as a table line or as one JSON object.

/// A benchmark result. `n` is the element count for vector ops; matrix ops set `mkn`.
#[derive(Debug, Clone)]
pub struct Row {
    pub op: String,
    pub n: usize,
    /// (m, k, n) for matrix products and other 2-D/3-D shapes.
    pub mkn: Option<(usize, usize, usize)>,
    pub backend: String,
    pub threads: usize,
    /// Median wall time of one call, nanoseconds.
    pub ns: f64,
    /// Bytes moved per call / ns (memory-bound ops).
    pub gbps: Option<f64>,
    /// 1e9 flop per second (compute-bound ops).
    pub gflops: Option<f64>,
    /// Free-form qualifier, e.g. "roundtrip" or "resident" for GPU rows.
    pub note: Option<String>,
}

impl Row {
    pub fn to_json(&self) -> String {
        let mut s = format!("{{\"op\":\"{}\",\"n\":{}", self.op, self.n);
        if let Some((m, k, n)) = self.mkn {
            s += &format!(",\"m\":{m},\"k\":{k},\"n_cols\":{n}");
        }
        s += &format!(",\"backend\":\"{}\",\"threads\":{},\"ns\":{:.1}", self.backend, self.threads, self.ns);
        if let Some(g) = self.gbps {
            s += &format!(",\"gbps\":{g:.3}");
        }
        if let Some(g) = self.gflops {
            s += &format!(",\"gflops\":{g:.3}");
        }
        if let Some(note) = &self.note {
            s += &format!(",\"note\":\"{note}\"");
        }
        s + "}"
    }
}
