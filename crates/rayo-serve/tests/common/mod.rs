//! What the server's tests share: the model file.

use std::path::{Path, PathBuf};

/// SmolLM2-135M-Instruct Q4_1 (`RAYO_SMOLLM2`, or where scripts/fetch-smollm2.sh puts it) when
/// it is there; else a `SKIP` line, or a failure under `RAYO_REQUIRE_SMOLLM2`.
pub fn smollm2(test: &str) -> Option<PathBuf> {
    let path = match std::env::var_os("RAYO_SMOLLM2") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    };
    if path.exists() {
        return Some(path);
    }
    let required = std::env::var_os("RAYO_REQUIRE_SMOLLM2").is_some_and(|v| v != "0");
    assert!(!required, "RAYO_REQUIRE_SMOLLM2 is set but {} is absent (scripts/fetch-smollm2.sh fetches it)", path.display());
    println!("SKIP {test}: {} is absent (scripts/fetch-smollm2.sh fetches it)", path.display());
    None
}
