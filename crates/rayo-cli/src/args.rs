//! Command-line flags of `rayo bench` (hand-parsed: no dependency for a handful of flags).

pub struct BenchArgs {
    pub ops: Vec<String>,
    pub sizes: Vec<usize>,
    pub backends: Vec<String>,
    pub threads: Vec<usize>,
    pub json: bool,
    pub quick: bool,
}

impl BenchArgs {
    pub fn parse(argv: &[String]) -> Result<BenchArgs, String> {
        let mut a = BenchArgs { ops: vec![], sizes: vec![], backends: vec![], threads: vec![], json: false, quick: false };
        let mut it = argv.iter();
        while let Some(flag) = it.next() {
            let mut value = || it.next().cloned().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--op" => a.ops.push(value()?),
                "--size" => a.sizes.push(parse_size(&value()?)?),
                "--backend" => a.backends.push(value()?.to_ascii_lowercase()),
                "--threads" => {
                    let v = value()?;
                    a.threads.push(v.parse().map_err(|_| format!("--threads {v}: not a number"))?)
                }
                "--json" => a.json = true,
                "--quick" => a.quick = true,
                other => return Err(format!("unknown flag {other}")),
            }
        }
        Ok(a)
    }
}

/// `1000`, `100K`, `10M`, `1e6`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim().to_ascii_uppercase();
    let (num, mul) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 1_000.0),
        Some('M') => (&t[..t.len() - 1], 1_000_000.0),
        _ => (&t[..], 1.0),
    };
    let v: f64 = num.parse().map_err(|_| format!("--size {s}: not a size"))?;
    if v < 0.0 || !v.is_finite() {
        return Err(format!("--size {s}: not a size"));
    }
    Ok((v * mul).round() as usize)
}
