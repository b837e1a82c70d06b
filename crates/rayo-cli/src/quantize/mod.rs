//! `rayo quantize IN OUT TYPE`: llama.cpp's per-tensor choice of type ([`mix`]).

pub mod mix;
