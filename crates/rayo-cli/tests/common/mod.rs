//! What the CLI tests share: the real model, when `scripts/fetch-smollm2.sh` has fetched it.

use std::path::{Path, PathBuf};

/// SmolLM2-135M-Instruct Q4_1 (`RAYO_SMOLLM2`, or the fetch script's path), or `None` after a
/// `SKIP` line naming `test`. With `RAYO_REQUIRE_SMOLLM2` set (as `scripts/test.sh` does), a
/// missing model is a failure, not a skip.
pub fn smollm2(test: &str) -> Option<PathBuf> {
    let path = match std::env::var_os("RAYO_SMOLLM2") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"),
    };
    if path.exists() {
        return Some(path);
    }
    assert!(std::env::var_os("RAYO_REQUIRE_SMOLLM2").is_none(), "RAYO_REQUIRE_SMOLLM2 is set but {} is absent", path.display());
    println!("SKIP {test}: {} is absent (scripts/fetch-smollm2.sh fetches it)", path.display());
    None
}
