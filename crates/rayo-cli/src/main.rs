//! `rayo`: what this machine has (`rayo info`), how fast each backend is (`rayo bench`), the
//! PTX rayo generates (`rayo ptx`), what a GGUF model file holds (`rayo gguf`), and a model
//! rewritten in another format (`rayo quantize`), and a language model run on rayo's kernels
//! (`rayo generate`, `rayo chat`, `rayo tokenize`, `rayo bench --model`). `rayo --help`, `rayo <command> --help` for the flags.

mod args;
mod bench;
mod gguf;
mod info;
mod json;
mod llm;
mod out;
mod ptx;
mod quantize;
mod synth;

use args::{Cli, Command};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Usage errors (a bad flag or value) print clap's message and exit with status 2;
    // `--help` and `--version` exit with 0.
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info => info::run(),
        Command::Bench(a) => bench::run(&a),
        Command::Ptx(a) => ptx::run(&a),
        Command::Gguf(a) => gguf::run(&a),
        Command::Quantize(a) => quantize::run(&a),
        Command::Generate(a) => llm::generate(&a),
        Command::Chat(a) => llm::chat(&a),
        Command::Tokenize(a) => llm::tokenize(&a),
        Command::Synth(a) => synth::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            out::errln!("rayo: {e}");
            ExitCode::FAILURE
        }
    }
}
