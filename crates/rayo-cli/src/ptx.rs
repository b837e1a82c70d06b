//! `rayo ptx --out DIR [--sm 80] [--sm 90]`: writes the PTX of every rayo-ptx kernel variant, one
//! file per kernel and target, after the checker has accepted it.

use rayo_ptx::kernels::all_variants;
use std::path::PathBuf;

pub fn run(argv: &[String]) -> Result<(), String> {
    let mut out: Option<PathBuf> = None;
    let mut sms: Vec<u32> = vec![];
    let mut it = argv.iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--out" => out = Some(PathBuf::from(value()?)),
            "--sm" => {
                let v = value()?;
                let sm: u32 = v.trim_start_matches("sm_").parse().map_err(|_| format!("--sm {v}: not a target like 90 or sm_90"))?;
                if !(50..=120).contains(&sm) {
                    return Err(format!("--sm {sm}: outside 50..=120"));
                }
                sms.push(sm);
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    let out = out.ok_or("rayo ptx needs --out DIR")?;
    if sms.is_empty() {
        sms = vec![80, 90];
    }
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let t = std::time::Instant::now();
    let mut files = 0;
    for k in all_variants() {
        for &sm in &sms {
            let text = k.module(sm).emit_checked().map_err(|e| format!("checker rejected {}: {e}", k.name()))?;
            let path = out.join(format!("{}.sm_{sm}.ptx", k.name()));
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            files += 1;
        }
    }
    println!("wrote {files} PTX files to {} in {:.1} ms", out.display(), t.elapsed().as_secs_f64() * 1e3);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::run;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn writes_every_variant_for_each_target() {
        let dir = std::env::temp_dir().join(format!("rayo-ptx-cli-{}", std::process::id()));
        let d = dir.to_str().unwrap();
        run(&args(&["--out", d, "--sm", "sm_80", "--sm", "90"])).unwrap();
        let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().into_string().unwrap()).collect();
        let n = rayo_ptx::kernels::all_variants().len();
        assert_eq!(files.len(), 2 * n);
        let gemm = std::fs::read_to_string(dir.join("gemm_tiled32.sm_90.ptx")).unwrap();
        assert!(gemm.contains(".target sm_90") && gemm.contains(".entry gemm_tiled32("));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_flags_are_errors() {
        assert!(run(&args(&[])).unwrap_err().contains("--out"));
        assert!(run(&args(&["--out"])).unwrap_err().contains("needs a value"));
        assert!(run(&args(&["--out", "/tmp/x", "--sm", "abc"])).unwrap_err().contains("not a target"));
        assert!(run(&args(&["--out", "/tmp/x", "--sm", "20"])).unwrap_err().contains("outside"));
        assert!(run(&args(&["--bogus"])).unwrap_err().contains("unknown flag"));
    }
}
