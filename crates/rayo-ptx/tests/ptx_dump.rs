//! Writes every kernel's PTX to a directory (`RAYO_PTX_DUMP`), for byte-identity checks of a
//! refactor: dump before, dump after, `diff -r`. Ignored: run it by hand,
//! `RAYO_PTX_DUMP=/tmp/ptx-before cargo test -p rayo-ptx --release --test ptx_dump -- --ignored`.

use rayo_ptx::kernels::{
    all_variants, hopper_variants, ActFormat, DequantF16Kernel, DequantTKernel, EmbedKernel, Epilogue, Kernel, QFormat, QMatvecKernel,
};

/// Every variant of the format-specialised kernels (the sweep has one representative of each).
fn format_variants() -> Vec<Box<dyn Kernel>> {
    let mut v: Vec<Box<dyn Kernel>> = vec![];
    for fmt in QFormat::ALL {
        v.push(Box::new(EmbedKernel::new(fmt)));
        v.push(Box::new(DequantTKernel::new(fmt)));
        v.push(Box::new(DequantF16Kernel::new(fmt)));
        for norm in [false, true] {
            for (mats, epi) in [
                (1, Epilogue::Store),
                (2, Epilogue::Store),
                (3, Epilogue::Store),
                (1, Epilogue::Add),
                (2, Epilogue::Add),
                (3, Epilogue::Add),
                (2, Epilogue::Swiglu),
            ] {
                for wide in [false, true] {
                    for act in [ActFormat::F32, ActFormat::F16, ActFormat::Q8] {
                        let k = QMatvecKernel::fused(fmt, norm, mats, epi).and_then(|k| k.per_block(wide).with_activations(act));
                        v.extend(k.map(|k| Box::new(k) as Box<dyn Kernel>));
                    }
                }
            }
        }
    }
    v
}

#[test]
#[ignore = "a tool, not a test: RAYO_PTX_DUMP=DIR cargo test -p rayo-ptx --release --test ptx_dump -- --ignored writes every kernel's PTX, to diff -r before and after a change"]
fn dump_every_kernel() {
    let dir = std::path::PathBuf::from(std::env::var("RAYO_PTX_DUMP").expect("set RAYO_PTX_DUMP to a directory"));
    std::fs::create_dir_all(&dir).unwrap();
    let mut n = 0;
    let mut names = std::collections::HashSet::new();
    for (set, kernels, sms) in
        [("all", all_variants(), &[80, 90][..]), ("hopper", hopper_variants(), &[90][..]), ("formats", format_variants(), &[80, 90][..])]
    {
        for k in kernels {
            for &sm in sms {
                let file = format!("{set}-sm{sm}-{}.ptx", k.name());
                if names.insert(file.clone()) {
                    std::fs::write(dir.join(&file), k.emit_ptx_for(sm)).unwrap();
                    n += 1;
                }
            }
        }
    }
    println!("{n} PTX files written to {}", dir.display());
}
