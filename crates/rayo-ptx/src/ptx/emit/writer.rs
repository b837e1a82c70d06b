//! The byte writer PTX text goes through ([`W`]) and the padded tables it copies short pieces
//! from (opcodes, types, register sigils, specials): one fixed-size store each, cut to its
//! length, with no `fmt` and no intermediate strings.

use crate::ptx::instr::*;
use crate::ptx::kernel::PtxKernel;
use crate::ptx::types::{PtxType, Special};

/// A short string padded with zeros to `N` bytes, and its length.
#[derive(Clone, Copy)]
pub(super) struct Pad<const N: usize> {
    pub(super) b: [u8; N],
    pub(super) n: usize,
}

pub(super) const fn pad<const N: usize>(s: &str) -> Pad<N> {
    let s = s.as_bytes();
    assert!(s.len() <= N);
    let mut b = [0u8; N];
    let mut i = 0;
    while i < s.len() {
        b[i] = s[i];
        i += 1;
    }
    Pad { b, n: s.len() }
}

pub(super) const fn table<const N: usize, const M: usize>(f: [&str; M]) -> [Pad<N>; M] {
    let mut t = [Pad { b: [0; N], n: 0 }; M];
    let mut i = 0;
    while i < M {
        t[i] = pad(f[i]);
        i += 1;
    }
    t
}

macro_rules! each_type {
    ($f:expr) => {{
        use PtxType::*;
        [$f(Pred), $f(B16), $f(B32), $f(B64), $f(U16), $f(U32), $f(U64), $f(S16), $f(S32), $f(S64), $f(F16), $f(F32), $f(F64)]
    }};
}

/// `.f32`, by `PtxType as usize`.
pub(super) const DOTTED: [Pad<8>; 13] = table(each_type!(PtxType::dotted));
/// `%f`, by `PtxType as usize`.
pub(super) const SIGIL: [Pad<4>; 13] = table(each_type!(PtxType::reg_sigil));
/// Every binary op, in declaration order (`BinOp as usize`).
pub(super) const BIN_OPS: [BinOp; 14] = {
    use BinOp::*;
    [Add, Sub, Mul, MulHi, MulWide, Div, Rem, Min, Max, And, Or, Xor, Shl, Shr]
};
/// `BinOp::opcode`: `[op][float]`.
pub(super) const BIN_OPC: [[Pad<16>; 2]; 14] = {
    let mut t = [[Pad { b: [0; 16], n: 0 }; 2]; 14];
    let mut i = 0;
    while i < 14 {
        t[i] = [pad(BIN_OPS[i].opcode(PtxType::U32)), pad(BIN_OPS[i].opcode(PtxType::F32))];
        i += 1;
    }
    t
};
/// Every unary op, in declaration order (`UnOp as usize`).
pub(super) const UN_OPS: [UnOp; 9] = {
    use UnOp::*;
    [Neg, Abs, Not, Sqrt, Rcp, Rsqrt, Ex2, Lg2, Tanh]
};
/// `UnOp::opcode`: `[op][ty == f32]`.
pub(super) const UN_OPC: [[Pad<16>; 2]; 9] = {
    let mut t = [[Pad { b: [0; 16], n: 0 }; 2]; 9];
    let mut i = 0;
    while i < 9 {
        t[i] = [pad(UN_OPS[i].opcode(PtxType::F64)), pad(UN_OPS[i].opcode(PtxType::F32))];
        i += 1;
    }
    t
};
/// `ld.global`, `st.shared`, ... by `Space as usize`.
pub(super) const LD: [Pad<16>; 5] = table(["ld.global", "ld.shared", "ld.param", "ld.local", "ld.const"]);
pub(super) const ST: [Pad<16>; 5] = table(["st.global", "st.shared", "st.param", "st.local", "st.const"]);
/// `Special::name`, by `Special as usize`.
pub(super) const SPECIAL: [Pad<16>; 17] = {
    use Special::*;
    table([
        TidX.name(),
        TidY.name(),
        TidZ.name(),
        NtidX.name(),
        NtidY.name(),
        CtaidX.name(),
        CtaidY.name(),
        CtaidZ.name(),
        NctaidX.name(),
        NctaidY.name(),
        LaneId.name(),
        WarpId.name(),
        SmId.name(),
        Clock64.name(),
        ClusterCtaRank.name(),
        ClusterIdX.name(),
        NclusterIdX.name(),
    ])
};
/// `00` .. `99`.
pub(super) const DIGITS2: [[u8; 2]; 100] = {
    let mut t = [[0u8; 2]; 100];
    let mut i = 0;
    while i < 100 {
        t[i] = [b'0' + (i / 10) as u8, b'0' + (i % 10) as u8];
        i += 1;
    }
    t
};

/// Bytes gathered on the stack before they go to the output in one copy.
pub(super) const CAP: usize = 1024;

/// The PTX text being written: a stack buffer in front of `out`, and the kernel whose names it
/// refers to. Every method is inlined into the emitting loop, so the fill level stays in a
/// register instead of a `Vec`'s length in memory.
pub(super) struct W<'a> {
    b: [u8; CAP],
    n: usize,
    out: &'a mut Vec<u8>,
    pub(super) k: &'a PtxKernel,
    /// Writing the kernel as a device function of a persistent kernel ([`super::device_function`]):
    /// its block's threads. Then the block and grid indices and sizes and the thread's index
    /// read the function's parameters (`%vsp`), shared arrays are the sub-block's copies
    /// (`%vsh`), and its block barriers are the sub-block's named barrier of that many threads.
    pub(super) func: Option<u32>,
}

/// Moves the gathered bytes to the output.
#[cold]
#[inline(never)]
pub(super) fn spill(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(b);
}

impl<'a> W<'a> {
    pub(super) fn new(out: &'a mut Vec<u8>, k: &'a PtxKernel) -> W<'a> {
        W { b: [0; CAP], n: 0, out, k, func: None }
    }
    /// Makes room for `m` more bytes (`m <= CAP`).
    #[inline(always)]
    pub(super) fn room(&mut self, m: usize) {
        if self.n + m > CAP {
            spill(self.out, &self.b[..self.n]);
            self.n = 0;
        }
    }
    pub(super) fn finish(self) {
        self.out.extend_from_slice(&self.b[..self.n]);
    }
    #[inline(always)]
    pub(super) fn s(&mut self, s: &str) {
        let s = s.as_bytes();
        if s.len() > CAP {
            self.room(CAP);
            self.out.extend_from_slice(s);
            return;
        }
        self.room(s.len());
        self.b[self.n..self.n + s.len()].copy_from_slice(s);
        self.n += s.len();
    }
    #[inline(always)]
    pub(super) fn c(&mut self, c: u8) {
        self.room(1);
        self.b[self.n] = c;
        self.n += 1;
    }
    /// One `N`-byte store, then only the piece's length counted (no copy loop, no `memcpy`).
    #[inline(always)]
    pub(super) fn pad<const N: usize>(&mut self, p: &Pad<N>) {
        self.room(N);
        self.b[self.n..self.n + N].copy_from_slice(&p.b);
        self.n += p.n;
    }
    #[inline(always)]
    pub(super) fn ty(&mut self, t: PtxType) {
        self.pad(&DOTTED[t as usize]);
    }
    #[inline(always)]
    pub(super) fn u(&mut self, v: u64) {
        self.room(20);
        let (b, n) = (&mut self.b, self.n);
        self.n += if v < 10 {
            b[n] = b'0' + v as u8;
            1
        } else if v < 100 {
            b[n..n + 2].copy_from_slice(&DIGITS2[v as usize]);
            2
        } else if v < 1000 {
            b[n] = b'0' + (v / 100) as u8;
            b[n + 1..n + 3].copy_from_slice(&DIGITS2[(v % 100) as usize]);
            3
        } else if v < 10000 {
            b[n..n + 2].copy_from_slice(&DIGITS2[(v / 100) as usize]);
            b[n + 2..n + 4].copy_from_slice(&DIGITS2[(v % 100) as usize]);
            4
        } else {
            digits(&mut b[n..n + 20], v)
        };
    }
    #[inline(always)]
    pub(super) fn i(&mut self, v: i64) {
        if v < 0 {
            self.c(b'-');
        }
        self.u(v.unsigned_abs());
    }
    pub(super) fn hex(&mut self, v: u64, digits: u32) {
        const H: &[u8; 16] = b"0123456789ABCDEF";
        self.room(16);
        for k in (0..digits).rev() {
            self.b[self.n] = H[((v >> (4 * k)) & 15) as usize];
            self.n += 1;
        }
    }
    #[inline(always)]
    pub(super) fn reg(&mut self, r: Reg) {
        self.pad(&SIGIL[r.ty as usize]);
        self.u(r.index as u64);
    }
    pub(super) fn name(&mut self, n: crate::ptx::Name) {
        let s = self.k.resolve(n);
        self.s(s);
    }
    #[inline(always)]
    pub(super) fn op(&mut self, o: &Operand) {
        match *o {
            Operand::Reg(r) => self.reg(r),
            Operand::Int(v) => self.i(v),
            Operand::F32(v) => {
                self.s("0f");
                self.hex(v.to_bits() as u64, 8);
            }
            Operand::F64(v) => {
                self.s("0d");
                self.hex(v.to_bits(), 16);
            }
            Operand::Special(s) => match (self.func, virtual_special(s)) {
                (Some(_), Some(i)) => {
                    self.s("%vsp");
                    self.u(i as u64);
                }
                _ => self.pad(&SPECIAL[s as usize]),
            },
            Operand::Symbol(n) => match (self.func, self.k.shared.iter().position(|s| s.name == n)) {
                // the sub-block's copy of the array (`%vsh`, see `device_function`)
                (Some(_), Some(i)) => {
                    self.s("%vsh");
                    self.u(i as u64);
                }
                _ => self.name(n),
            },
        }
    }
    /// `, a`
    #[inline(always)]
    pub(super) fn then(&mut self, o: &Operand) {
        self.s(", ");
        self.op(o);
    }
    #[inline(always)]
    pub(super) fn addr(&mut self, a: &Addr) {
        self.c(b'[');
        self.op(&a.base);
        if a.offset != 0 {
            self.c(b'+');
            self.i(a.offset);
        }
        self.c(b']');
    }
    /// `{a, b, c, d}` or a single item.
    #[inline(always)]
    pub(super) fn list<T>(&mut self, xs: &[T], mut f: impl FnMut(&mut Self, &T)) {
        if let [x] = xs {
            return f(self, x);
        }
        self.c(b'{');
        for (i, x) in xs.iter().enumerate() {
            if i > 0 {
                self.s(", ");
            }
            f(self, x);
        }
        self.c(b'}');
    }
    #[inline(always)]
    /// `x, y, z` and the line's end (a directive's three dimensions).
    pub(super) fn dims(&mut self, (x, y, z): (u32, u32, u32)) {
        self.u(x as u64);
        self.s(", ");
        self.u(y as u64);
        self.s(", ");
        self.u(z as u64);
        self.c(b'\n');
    }
    pub(super) fn regs(&mut self, rs: &[Reg]) {
        self.list(rs, |w, r| w.reg(*r));
    }
    /// `opcode.ty d`
    #[inline(always)]
    pub(super) fn head(&mut self, opc: &Pad<16>, ty: PtxType, d: Reg) {
        self.pad(opc);
        self.ty(ty);
        self.c(b' ');
        self.reg(d);
    }
}

/// Writes the decimal digits of `v` at the start of `out` (20 bytes hold any u64); returns how
/// many.
#[inline(never)]
pub(super) fn digits(out: &mut [u8], v: u64) -> usize {
    let n = v.checked_ilog10().unwrap_or(0) as usize + 1;
    let mut v = v;
    for d in out[..n].iter_mut().rev() {
        *d = b'0' + (v % 10) as u8;
        v /= 10;
    }
    n
}

/// Appends the decimal digits of `v`.
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    let mut b = [0u8; 20];
    let n = digits(&mut b, v);
    out.extend_from_slice(&b[..n]);
}

/// Bytes written by this module are ASCII and the names' UTF-8, so this never loses anything.
pub(crate) fn into_string(v: Vec<u8>) -> String {
    String::from_utf8(v).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A special register a device function reads from its parameters (the phase's virtual block
/// and grid, [`super::device_function`]): its index among `%vsp0..`, the order of
/// [`VIRTUAL_SPECIALS`].
pub(super) fn virtual_special(s: Special) -> Option<usize> {
    VIRTUAL_SPECIALS.iter().position(|&v| v == s)
}

/// The block index, the grid, the block's size and the thread's index as a device function
/// receives them.
pub(super) const VIRTUAL_SPECIALS: [Special; 8] =
    [Special::CtaidX, Special::CtaidY, Special::CtaidZ, Special::NctaidX, Special::NctaidY, Special::NtidX, Special::NtidY, Special::TidX];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ptx::types::Space;

    /// The padded tables spell what the named functions spell, entry by entry.
    #[test]
    fn tables_match_their_functions() {
        const SPACES: [Space; 5] = [Space::Global, Space::Shared, Space::Param, Space::Local, Space::Const];
        let text = |p: &[u8], n: usize| String::from_utf8(p[..n].to_vec()).unwrap();
        for t in PtxType::ALL {
            assert_eq!(text(&DOTTED[t as usize].b, DOTTED[t as usize].n), t.dotted());
            assert_eq!(text(&SIGIL[t as usize].b, SIGIL[t as usize].n), t.reg_sigil());
            for (i, op) in BIN_OPS.iter().enumerate() {
                assert_eq!(*op as usize, i);
                let p = &BIN_OPC[i][t.is_float() as usize];
                assert_eq!(text(&p.b, p.n), op.opcode(t));
            }
            for (i, op) in UN_OPS.iter().enumerate() {
                assert_eq!(*op as usize, i);
                let p = &UN_OPC[i][(t == PtxType::F32) as usize];
                assert_eq!(text(&p.b, p.n), op.opcode(t));
            }
        }
        for (i, s) in SPACES.iter().enumerate() {
            assert_eq!(*s as usize, i);
            assert_eq!(text(&LD[i].b, LD[i].n), format!("ld.{}", s.name()));
            assert_eq!(text(&ST[i].b, ST[i].n), format!("st.{}", s.name()));
        }
        use Special::*;
        for s in [
            TidX, TidY, TidZ, NtidX, NtidY, CtaidX, CtaidY, CtaidZ, NctaidX, NctaidY, LaneId, WarpId, SmId, Clock64, ClusterCtaRank, ClusterIdX,
            NclusterIdX,
        ] {
            assert_eq!(text(&SPECIAL[s as usize].b, SPECIAL[s as usize].n), s.name());
        }
        let k = PtxKernel::new("t");
        for v in [0u64, 7, 10, 99, 100, 101, 999, 1000, 3968, 9999, 10000, 65535, 1 << 40, u64::MAX] {
            let mut out = vec![];
            put_u64(&mut out, v);
            assert_eq!(String::from_utf8(out).unwrap(), v.to_string());
            let mut out = vec![];
            let mut w = W::new(&mut out, &k);
            w.u(v);
            w.finish();
            assert_eq!(String::from_utf8(out).unwrap(), v.to_string());
        }
    }
}
