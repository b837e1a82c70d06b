//! Every kernel variant, emitted for sm_80 and sm_90, passes the checker and NVIDIA's `ptxas`;
//! the GEMM kernels use no local memory (no spills: ptxas -v reports 0 bytes, and the SASS
//! has no LDL/STL).
//!
//! `ptxas` is found through `RAYO_PTXAS` (scripts/test.sh sets it after installing the PyPI
//! wheel). Without it the test prints why it skips; with `RAYO_REQUIRE_PTXAS=1` it fails.

use rayo_ptx::kernels::{all_variants, hopper_variants, Kernel};
use std::path::PathBuf;
use std::process::Command;

fn tool(var: &str, name: &str) -> Option<PathBuf> {
    if let Ok(p) = std::env::var(var) {
        return Some(PathBuf::from(p));
    }
    // Fall back to the test script's virtual environment, if it exists.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = root.join(".venv-cuda/lib");
    let entries = std::fs::read_dir(venv).ok()?;
    for e in entries.flatten() {
        let p = e.path().join("site-packages/nvidia/cu13/bin").join(name);
        if p.exists() {
            return Some(p);
        }
    }
    None
}

fn required() -> bool {
    std::env::var("RAYO_REQUIRE_PTXAS").map(|v| v == "1").unwrap_or(false)
}

#[test]
fn every_variant_assembles_for_sm80_and_sm90() {
    let Some(ptxas) = tool("RAYO_PTXAS", "ptxas") else {
        assert!(!required(), "RAYO_REQUIRE_PTXAS=1 but no ptxas: set RAYO_PTXAS or run scripts/test.sh");
        println!("skip: no ptxas (set RAYO_PTXAS, or run scripts/test.sh which installs it from PyPI)");
        return;
    };
    let cuobjdump = tool("RAYO_CUOBJDUMP", "cuobjdump");
    let dir = std::env::temp_dir().join(format!("rayo-ptxas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kernels = all_variants();
    assert!(kernels.len() >= 26, "only {} variants", kernels.len());
    // ptxas is one process per module: the kernels split over the cores, each part in a thread
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (n, part) = (kernels.len(), kernels.len().div_ceil(threads));
    let checked: usize = std::thread::scope(|s| {
        // (each thread makes its own list: a kernel is not Sync)
        let parts: Vec<_> = (0..n)
            .step_by(part)
            .map(|from| {
                let (ptxas, cuobjdump, dir) = (&ptxas, cuobjdump.as_deref(), &dir);
                s.spawn(move || assemble(&all_variants()[from..(from + part).min(n)], ptxas, cuobjdump, dir))
            })
            .collect();
        parts.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).sum()
    });
    let _ = std::fs::remove_dir_all(&dir);
    println!("ptxas accepted {checked} kernels ({} variants x sm_80, sm_90)", kernels.len());
}

/// Assembles each of `kernels` for sm_80 and sm_90 with `ptxas` in `dir` (the GEMMs' SASS read
/// by `cuobjdump` where there is one): the number assembled.
fn assemble(kernels: &[Box<dyn Kernel>], ptxas: &std::path::Path, cuobjdump: Option<&std::path::Path>, dir: &std::path::Path) -> usize {
    let mut checked = 0;
    for kern in kernels {
        for sm in [80, 90] {
            kern.check(sm).unwrap_or_else(|e| panic!("{}: checker: {e}", kern.name()));
            let ptx = kern.emit_ptx_for(sm);
            let file = dir.join(format!("{}_sm{sm}.ptx", kern.name()));
            let cubin = file.with_extension("cubin");
            std::fs::write(&file, &ptx).unwrap();
            let out = Command::new(ptxas).arg(format!("-arch=sm_{sm}")).arg("-v").arg(&file).arg("-o").arg(&cubin).output().expect("run ptxas");
            let log = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "ptxas rejected {} for sm_{sm}:\n{log}", kern.name());
            if kern.name().starts_with("flash_") {
                assert!(log.contains("0 bytes spill stores"), "{} sm_{sm} spills:\n{log}", kern.name());
                let regs = log.lines().find(|l| l.contains("registers")).unwrap_or("").trim().to_string();
                println!("{} sm_{sm}: {regs}", kern.name());
            }
            if kern.name().starts_with("gemm_") {
                assert!(log.contains("0 bytes spill stores"), "{} sm_{sm} spills:\n{log}", kern.name());
                assert!(log.contains("0 bytes stack frame"), "{} sm_{sm} uses a stack frame:\n{log}", kern.name());
                if let Some(cuobjdump) = cuobjdump {
                    let sass = Command::new(cuobjdump).arg("-sass").arg(&cubin).output().expect("run cuobjdump");
                    assert!(sass.status.success(), "cuobjdump failed on {}", kern.name());
                    let sass = String::from_utf8_lossy(&sass.stdout);
                    let unit = if kern.name().contains("tf32mma") || kern.name().starts_with("gemm_f16") { "HMMA" } else { "FFMA" };
                    assert!(sass.contains(unit), "{}: no {unit} in SASS", kern.name());
                    assert!(!sass.contains("LDL") && !sass.contains("STL"), "{}: local memory in SASS", kern.name());
                }
                let regs = log.lines().find(|l| l.contains("registers")).unwrap_or("").trim().to_string();
                println!("{} sm_{sm}: {regs}", kern.name());
            }
            checked += 1;
        }
    }
    checked
}

/// The Hopper-only kernels (`wgmma`, `setmaxnreg`, TMA) assemble for sm_90a with no spills
/// and no serialized wgmma (ptxas' C7510/C7511 warnings), and their SASS has HGMMA.
#[test]
fn hopper_kernels_assemble_for_sm90a() {
    let Some(ptxas) = tool("RAYO_PTXAS", "ptxas") else {
        assert!(!required(), "RAYO_REQUIRE_PTXAS=1 but no ptxas: set RAYO_PTXAS or run scripts/test.sh");
        println!("skip: no ptxas (set RAYO_PTXAS, or run scripts/test.sh which installs it from PyPI)");
        return;
    };
    let cuobjdump = tool("RAYO_CUOBJDUMP", "cuobjdump");
    let dir = std::env::temp_dir().join(format!("rayo-ptxas-hopper-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kernels = hopper_variants();
    assert!(!kernels.is_empty());
    for kern in &kernels {
        assert_eq!(kern.target(90), "sm_90a", "{}", kern.name());
        kern.check(90).unwrap_or_else(|e| panic!("{}: checker: {e}", kern.name()));
        let file = dir.join(format!("{}.ptx", kern.name()));
        let cubin = file.with_extension("cubin");
        std::fs::write(&file, kern.emit_ptx_for(90)).unwrap();
        let out = Command::new(&ptxas).arg("-arch=sm_90a").arg("-v").arg(&file).arg("-o").arg(&cubin).output().expect("run ptxas");
        let log = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "ptxas rejected {} for sm_90a:\n{log}", kern.name());
        assert!(log.contains("0 bytes spill stores"), "{} spills:\n{log}", kern.name());
        assert!(
            !log.contains("C7510") && !log.contains("C7511") && !log.contains("C7508"),
            "{}: wgmma serialized or setmaxnreg ignored:\n{log}",
            kern.name()
        );
        if let Some(cuobjdump) = &cuobjdump {
            let sass = Command::new(cuobjdump).arg("-sass").arg(&cubin).output().expect("run cuobjdump");
            let sass = String::from_utf8_lossy(&sass.stdout);
            assert!(sass.contains("HGMMA"), "{}: no HGMMA in SASS", kern.name());
        }
        let regs = log.lines().find(|l| l.contains("registers")).unwrap_or("").trim().to_string();
        println!("{} sm_90a: {regs}", kern.name());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A broken module is rejected by ptxas with a line number: the tool really checks.
#[test]
fn ptxas_rejects_a_broken_module() {
    let Some(ptxas) = tool("RAYO_PTXAS", "ptxas") else {
        assert!(!required(), "RAYO_REQUIRE_PTXAS=1 but no ptxas");
        println!("skip: no ptxas");
        return;
    };
    let dir = std::env::temp_dir().join(format!("rayo-ptxas-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.ptx");
    let good = rayo_ptx::kernels::GemmKernel::naive(8, 8, 8).emit_ptx();
    std::fs::write(&file, good.replace("fma.rn.f32", "fma.rn.u32")).unwrap();
    let out = Command::new(&ptxas).arg("-arch=sm_90").arg(&file).arg("-o").arg(dir.join("bad.cubin")).output().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("error"));
}

/// A persistent kernel of a decoding step's kinds of phases (a norm and narrowing, products a
/// warp and a block per row with their block sums, the attention, a smaller block than the
/// kernel's) assembles: the device functions, their module-scope shared arrays and named
/// barriers, the calls and the grid barriers.
#[test]
fn a_persistent_kernel_assembles_for_sm90() {
    use rayo_ptx::kernels::{ActFormat, DecodeAttentionKernel, Epilogue, NarrowKernel, PersistentKernel, Phase, QFormat, QMatvecKernel, RopePairs};
    let Some(ptxas) = tool("RAYO_PTXAS", "ptxas") else {
        assert!(!required(), "RAYO_REQUIRE_PTXAS=1 but no ptxas: set RAYO_PTXAS or run scripts/test.sh");
        println!("skip: no ptxas (set RAYO_PTXAS, or run scripts/test.sh which installs it from PyPI)");
        return;
    };
    let narrow = NarrowKernel::new(true, ActFormat::Q8).unwrap();
    let qkv = QMatvecKernel::fused(QFormat::Q4_K, false, 3, Epilogue::Store).unwrap().with_activations(ActFormat::Q8).unwrap().per_block(true);
    let down = QMatvecKernel::fused(QFormat::Q4_K, false, 1, Epilogue::Add).unwrap().with_activations(ActFormat::Q8).unwrap();
    let attn = DecodeAttentionKernel::new(64, 8192, true, RopePairs::HalfSplit).unwrap();
    let built: Vec<(rayo_ptx::ptx::PtxKernel, rayo_ptx::kernels::LaunchConfig)> = vec![
        (narrow.build(90), narrow.launch(1)),
        (qkv.build(90), qkv.launch(3072, 1)),
        (attn.build(90), attn.launch(32)),
        (down.build(90), down.launch(2048, 1)),
    ];
    let mut phases: Vec<Phase> = built
        .iter()
        .map(|(k, c)| Phase {
            kernel: k,
            threads: c.block.0,
            grid: c.grid,
            args: k.params().iter().enumerate().map(|(i, _)| 0x7000_0000_0000 + 256 * i as u64).collect(),
        })
        .collect();
    // the same kernel again, with a smaller block than the persistent kernel's
    phases.push(Phase { kernel: &built[0].0, threads: 64, grid: (2, 1, 1), args: phases[0].args.clone() });
    let p = PersistentKernel::new(128, phases).unwrap().blocks_per_sm(2).sub_blocks(4).unwrap();
    let text = p.module_text("sm_90");
    assert!(text.contains(".minnctapersm 2") && text.contains(".maxntid 512, 1, 1"));
    assert_eq!(text.matches(".func ").count(), 5, "one device function per kernel and block size");
    let dir = std::env::temp_dir().join(format!("rayo-ptxas-persistent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("persistent.ptx");
    std::fs::write(&file, &text).unwrap();
    let out = Command::new(&ptxas).arg("-arch=sm_90").arg("-v").arg(&file).arg("-o").arg(file.with_extension("cubin")).output().expect("run ptxas");
    let log = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "ptxas rejected the persistent kernel:\n{log}\n{}", text.lines().take(400).collect::<Vec<_>>().join("\n"));
    println!("{}", log.lines().filter(|l| l.contains("registers") || l.contains("spill") || l.contains("stack")).collect::<Vec<_>>().join("\n"));
    // misuse: a block larger than the kernel's, values for other parameters
    let k = &built[1].0;
    assert!(PersistentKernel::new(128, vec![Phase { kernel: k, threads: 256, grid: (1, 1, 1), args: vec![0; k.params().len()] }]).is_err());
    assert!(PersistentKernel::new(128, vec![Phase { kernel: k, threads: 128, grid: (1, 1, 1), args: vec![0; 2] }]).is_err());
    assert!(PersistentKernel::new(128, vec![Phase { kernel: k, threads: 128, grid: (0, 1, 1), args: vec![0; k.params().len()] }]).is_err());
    assert!(PersistentKernel::new(100, vec![]).is_err());
    assert!(PersistentKernel::new(128, vec![]).unwrap().sub_blocks(8).is_err(), "8 sub-blocks need 17 barriers");
    assert!(PersistentKernel::new(256, vec![]).unwrap().sub_blocks(5).is_err(), "more than 1,024 threads");
}
