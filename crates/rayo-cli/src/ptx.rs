//! `rayo ptx --out DIR [--sm 80] [--sm 90]`: writes the PTX of every kernel variant (rayo-ptx's,
//! and the fused element-wise kernel of every op), one file per kernel and target, after the
//! checker has accepted it.

use crate::args::PtxArgs;
use crate::out::outln;
use rayo_ptx::kernels::Kernel;

pub fn run(args: &PtxArgs) -> Result<(), String> {
    let out = &args.out;
    let sms = if args.sms.is_empty() { vec![80, 90] } else { args.sms.clone() };
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let t = std::time::Instant::now();
    let mut files = 0;
    for k in variants() {
        for &sm in &sms {
            let text = k.module(sm).emit_checked().map_err(|e| format!("checker rejected {}: {e}", k.name()))?;
            let path = out.join(format!("{}.sm_{sm}.ptx", k.name()));
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            files += 1;
        }
    }
    outln!("wrote {files} PTX files to {} in {:.1} ms", out.display(), t.elapsed().as_secs_f64() * 1e3);
    Ok(())
}

/// rayo-ptx's kernels, and (with CUDA support) the fused element-wise kernel of every op.
fn variants() -> Vec<Box<dyn Kernel>> {
    #[allow(unused_mut)]
    let mut v = rayo_ptx::kernels::all_variants();
    #[cfg(feature = "cuda")]
    v.extend(rayo::cuda::elementwise_variants().into_iter().map(|k| Box::new(k) as Box<dyn Kernel>));
    v
}

#[cfg(test)]
mod tests {
    use super::run;
    use crate::args::PtxArgs;

    #[test]
    fn writes_every_variant_for_each_target() {
        let dir = std::env::temp_dir().join(format!("rayo-ptx-cli-{}", std::process::id()));
        run(&PtxArgs { out: dir.clone(), sms: vec![80, 90] }).unwrap();
        let files: Vec<String> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.file_name().into_string().unwrap()).collect();
        let n = super::variants().len();
        assert_eq!(files.len(), 2 * n);
        // Every file is one entry for its target, named after the file.
        for f in &files {
            let (stem, sm) = f.strip_suffix(".ptx").and_then(|s| s.rsplit_once(".sm_")).unwrap_or_else(|| panic!("{f}"));
            let text = std::fs::read_to_string(dir.join(f)).unwrap();
            assert!(text.contains(&format!(".target sm_{sm}")) && text.contains(&format!(".entry {stem}(")), "{f}");
        }
        assert!(files.iter().any(|f| f.starts_with("gemm_tiled") && f.ends_with(".sm_90.ptx")), "{files:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_unwritable_directory_is_an_error() {
        let file = std::env::temp_dir().join(format!("rayo-ptx-cli-file-{}", std::process::id()));
        std::fs::write(&file, b"").unwrap();
        let e = run(&PtxArgs { out: file.clone(), sms: vec![90] }).unwrap_err();
        assert!(e.contains(&file.display().to_string()), "{e}");
        std::fs::remove_file(&file).unwrap();
    }
}
