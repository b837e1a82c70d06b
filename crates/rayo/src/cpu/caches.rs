//! Cache sizes of this CPU (Linux sysfs), read once; GEMM's block sizes come from them.

use std::sync::OnceLock;

/// Data-cache sizes in bytes, per core for L1/L2 and for the whole chip for L3.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caches {
    pub l1d: usize,
    pub l2: usize,
    pub l3: usize,
}

impl Caches {
    /// Used where sysfs says nothing (other OSes, wasm): a common modern core.
    pub const FALLBACK: Caches = Caches { l1d: 32 << 10, l2: 512 << 10, l3: 8 << 20 };

    /// The sizes of this machine, read once per process.
    pub fn get() -> Caches {
        static C: OnceLock<Caches> = OnceLock::new();
        *C.get_or_init(|| read_sysfs().unwrap_or(Caches::FALLBACK))
    }
}

fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (num, mult) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().ok().map(|n| n * mult)
}

fn read_sysfs() -> Option<Caches> {
    let mut c = Caches::FALLBACK;
    let mut found = false;
    for i in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size")) else { break };
        let Some(size) = parse_size(&size) else { continue };
        match (level.trim(), kind.trim()) {
            ("1", "Data") => c.l1d = size,
            ("2", "Data" | "Unified") => c.l2 = size,
            ("3", "Data" | "Unified") => c.l3 = size,
            _ => continue,
        }
        found = true;
    }
    found.then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("48K\n"), Some(48 << 10));
        assert_eq!(parse_size("32M"), Some(32 << 20));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("x"), None);
        let c = Caches::get();
        assert!(c.l1d >= 1024 && c.l2 >= c.l1d, "{c:?}");
    }
}
