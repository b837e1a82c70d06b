//! PTX written from Rust, no dependencies. (Filled in by the rayo-ptx work.)
