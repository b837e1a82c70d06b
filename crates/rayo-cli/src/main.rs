//! `rayo`: what this machine has (`rayo info`) and how fast each backend is (`rayo bench`).

mod args;
mod bench;
mod info;
mod ptx;

use std::process::ExitCode;

const USAGE: &str = "\
usage: rayo info
       rayo ptx --out DIR [--sm 80] [--sm 90]
       rayo bench [--op NAME]... [--size N]... [--backend NAME]... [--threads N]... [--json] [--quick]

wgpu:      rayo bench --backend wgpu [--op add|relu|gelu|sum|dot|softmax|matmul|fused3|unfused3|...]
           (a roundtrip row and a device-resident row per op)
bench ops: stream_copy stream_triad add sub mul div scale axpy add_alloc dot sum max min argmax
           norm_l1 norm_l2 relu leaky_relu elu selu sigmoid tanh swish gelu mish hardswish
           clip abs sqrt exp ln softmax log_softmax
backends:  scalar sse2 avx2 avx512 neon simd128 (default: the best this CPU has); cuda (ops:
           gemm gemm_tf32 gemm_blocked8 gemm_split8 gemm_tiled add sigmoid fused sum dot max softmax
           log_softmax layernorm rmsnorm roundtrip_add graph_chain transfer ptxgen)";

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = match argv.first().map(String::as_str) {
        Some("info") => info::run(),
        Some("ptx") => ptx::run(&argv[1..]),
        Some("bench") => args::BenchArgs::parse(&argv[1..]).and_then(|a| bench::run(&a)),
        Some("-h") | Some("--help") | Some("help") => {
            println!("{USAGE}");
            Ok(())
        }
        _ => Err(format!("unknown or missing command\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rayo: {e}");
            ExitCode::from(2)
        }
    }
}
