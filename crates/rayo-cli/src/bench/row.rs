//! One measured row of `rayo bench`: printed as a table line or as one JSON object.

use crate::json::rounded;
use serde::Serialize;

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
    /// The row as one JSON object: `op`, `n`, then `m`, `k`, `n_cols` for matrix shapes,
    /// `backend`, `threads`, `ns` (to 0.1), `gbps` or `gflops` (to 0.001), `note` where set.
    pub fn to_json(&self) -> String {
        crate::json::line(&RowJson {
            op: &self.op,
            n: self.n,
            m: self.mkn.map(|(m, _, _)| m),
            k: self.mkn.map(|(_, k, _)| k),
            n_cols: self.mkn.map(|(_, _, n)| n),
            backend: &self.backend,
            threads: self.threads,
            ns: rounded(self.ns, 1),
            gbps: self.gbps.map(|g| rounded(g, 3)),
            gflops: self.gflops.map(|g| rounded(g, 3)),
            note: self.note.as_deref(),
        })
    }
}

/// A [`Row`] as `rayo bench --json` writes it (fields in this order; absent ones left out).
#[derive(Serialize)]
struct RowJson<'a> {
    op: &'a str,
    n: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    m: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    k: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    n_cols: Option<usize>,
    backend: &'a str,
    threads: usize,
    ns: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    gbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gflops: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row() -> Row {
        Row { op: "add".into(), n: 1000, mkn: None, backend: "scalar".into(), threads: 1, ns: 1234.56, gbps: Some(9.87654), gflops: None, note: None }
    }

    #[test]
    fn json_fields_in_order_and_escaped() {
        assert_eq!(row().to_json(), "{\"op\":\"add\",\"n\":1000,\"backend\":\"scalar\",\"threads\":1,\"ns\":1234.6,\"gbps\":9.877}");
        let mm = Row { mkn: Some((2, 3, 4)), gbps: None, gflops: Some(1.5), note: Some("say \"hi\"".into()), ..row() };
        assert_eq!(
            mm.to_json(),
            "{\"op\":\"add\",\"n\":1000,\"m\":2,\"k\":3,\"n_cols\":4,\"backend\":\"scalar\",\"threads\":1,\"ns\":1234.6,\"gflops\":1.5,\"note\":\"say \\\"hi\\\"\"}"
        );
    }
}
