//! The GGUF reader on arbitrary bytes: `Ok` or `Err`, never a panic, a read out of bounds or an
//! allocation sized by an unchecked length (libFuzzer's -rss_limit_mb and -malloc_limit_mb catch
//! those). A file that parses must hand out every tensor's bytes, and rewrite and re-read to the
//! same tensors.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rayo::gguf::{GgufFile, GgufWriter};

fuzz_target!(|data: &[u8]| {
    let Ok(f) = GgufFile::from_bytes(data.to_vec()) else { return };
    let mut w = GgufWriter::new();
    *w.metadata_mut() = f.metadata().clone();
    for t in f.tensors() {
        let d = f.tensor_data(t).expect("a parsed file's tensors lie inside it");
        assert_eq!(d.len() as u64, t.bytes);
        // Names of 64 bytes or more are legal to read but not to write (llama.cpp's limit).
        if w.add_tensor(&t.name, t.ty, &t.shape, d).is_err() {
            return;
        }
    }
    // general.alignment was checked by the reader, so the writer takes it.
    let bytes = w.write_to(Vec::new()).expect("what was read can be written");
    let g = GgufFile::from_bytes(bytes).expect("what was written can be read");
    let names = |f: &GgufFile| f.tensors().iter().map(|t| (t.name.clone(), t.ty, t.shape.clone(), t.bytes)).collect::<Vec<_>>();
    assert_eq!(names(&f), names(&g));
});
