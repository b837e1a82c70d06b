//! PTX scalar types, state spaces and special registers.

use core::fmt;

/// A PTX fundamental type (the ones rayo's kernels use).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PtxType {
    Pred,
    B16,
    B32,
    B64,
    U16,
    U32,
    U64,
    S16,
    S32,
    S64,
    F16,
    F32,
    F64,
}

/// The broad class of a type, used by the checker's compatibility rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeClass {
    Pred,
    Bits,
    Unsigned,
    Signed,
    Float,
}

impl PtxType {
    /// All types, in declaration order.
    pub const ALL: [PtxType; 13] = [
        PtxType::Pred,
        PtxType::B16,
        PtxType::B32,
        PtxType::B64,
        PtxType::U16,
        PtxType::U32,
        PtxType::U64,
        PtxType::S16,
        PtxType::S32,
        PtxType::S64,
        PtxType::F16,
        PtxType::F32,
        PtxType::F64,
    ];

    /// Size in bits (a predicate counts as 1).
    pub const fn bits(self) -> u32 {
        use PtxType::*;
        match self {
            Pred => 1,
            B16 | U16 | S16 | F16 => 16,
            B32 | U32 | S32 | F32 => 32,
            B64 | U64 | S64 | F64 => 64,
        }
    }

    /// Size in bytes of one element in memory.
    pub fn bytes(self) -> u32 {
        self.bits().div_ceil(8)
    }

    pub const fn class(self) -> TypeClass {
        use PtxType::*;
        match self {
            Pred => TypeClass::Pred,
            B16 | B32 | B64 => TypeClass::Bits,
            U16 | U32 | U64 => TypeClass::Unsigned,
            S16 | S32 | S64 => TypeClass::Signed,
            F16 | F32 | F64 => TypeClass::Float,
        }
    }

    pub const fn is_float(self) -> bool {
        matches!(self.class(), TypeClass::Float)
    }

    pub const fn is_int(self) -> bool {
        matches!(self.class(), TypeClass::Unsigned | TypeClass::Signed)
    }

    /// The PTX spelling without the dot: `f32`, `u64`, `pred`.
    pub const fn name(self) -> &'static str {
        use PtxType::*;
        match self {
            Pred => "pred",
            B16 => "b16",
            B32 => "b32",
            B64 => "b64",
            U16 => "u16",
            U32 => "u32",
            U64 => "u64",
            S16 => "s16",
            S32 => "s32",
            S64 => "s64",
            F16 => "f16",
            F32 => "f32",
            F64 => "f64",
        }
    }

    /// The spelling with its dot: `.f32`.
    pub const fn dotted(self) -> &'static str {
        use PtxType::*;
        match self {
            Pred => ".pred",
            B16 => ".b16",
            B32 => ".b32",
            B64 => ".b64",
            U16 => ".u16",
            U32 => ".u32",
            U64 => ".u64",
            S16 => ".s16",
            S32 => ".s32",
            S64 => ".s64",
            F16 => ".f16",
            F32 => ".f32",
            F64 => ".f64",
        }
    }

    /// `%` and the register prefix, e.g. `%rd`.
    pub(crate) const fn reg_sigil(self) -> &'static str {
        use PtxType::*;
        match self {
            Pred => "%p",
            B16 => "%bh",
            B32 => "%b",
            B64 => "%bd",
            U16 => "%uh",
            U32 => "%r",
            U64 => "%rd",
            S16 => "%sh",
            S32 => "%s",
            S64 => "%sd",
            F16 => "%h",
            F32 => "%f",
            F64 => "%fd",
        }
    }

    /// Register-name prefix for virtual registers of this type (`%f7`, `%rd3`, ...).
    pub(crate) const fn reg_prefix(self) -> &'static str {
        use PtxType::*;
        match self {
            Pred => "p",
            B16 => "bh",
            B32 => "b",
            B64 => "bd",
            U16 => "uh",
            U32 => "r",
            U64 => "rd",
            S16 => "sh",
            S32 => "s",
            S64 => "sd",
            F16 => "h",
            F32 => "f",
            F64 => "fd",
        }
    }

    /// The type of the same class and twice the width (`mul.wide`), if there is one.
    pub fn widened(self) -> Option<PtxType> {
        use PtxType::*;
        Some(match self {
            U16 => U32,
            U32 => U64,
            S16 => S32,
            S32 => S64,
            B16 => B32,
            B32 => B64,
            _ => return None,
        })
    }

    /// Whether a register of type `reg` may be an operand of an instruction of type `self`:
    /// the same type; or the same size when either is a bit type; or the same size when both are
    /// integers (signed and unsigned mix). Floats never mix with integers.
    pub fn accepts(self, reg: PtxType) -> bool {
        if self == reg {
            return true;
        }
        if self == PtxType::Pred || reg == PtxType::Pred || self.bits() != reg.bits() {
            return false;
        }
        let (a, b) = (self.class(), reg.class());
        a == TypeClass::Bits || b == TypeClass::Bits || (self.is_int() && reg.is_int())
    }
}

impl fmt::Display for PtxType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A PTX state space for loads, stores and atomics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Space {
    Global,
    Shared,
    Param,
    Local,
    Const,
}

impl Space {
    pub fn name(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Shared => "shared",
            Space::Param => "param",
            Space::Local => "local",
            Space::Const => "const",
        }
    }
}

/// Special (read-only) registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Special {
    TidX,
    TidY,
    TidZ,
    NtidX,
    NtidY,
    CtaidX,
    CtaidY,
    CtaidZ,
    NctaidX,
    NctaidY,
    LaneId,
    WarpId,
    SmId,
    Clock64,
    /// The block's rank in its cluster (sm_90).
    ClusterCtaRank,
    ClusterIdX,
    NclusterIdX,
}

impl Special {
    pub const fn name(self) -> &'static str {
        use Special::*;
        match self {
            TidX => "%tid.x",
            TidY => "%tid.y",
            TidZ => "%tid.z",
            NtidX => "%ntid.x",
            NtidY => "%ntid.y",
            CtaidX => "%ctaid.x",
            CtaidY => "%ctaid.y",
            CtaidZ => "%ctaid.z",
            NctaidX => "%nctaid.x",
            NctaidY => "%nctaid.y",
            LaneId => "%laneid",
            WarpId => "%warpid",
            SmId => "%smid",
            Clock64 => "%clock64",
            ClusterCtaRank => "%cluster_ctarank",
            ClusterIdX => "%clusterid.x",
            NclusterIdX => "%nclusterid.x",
        }
    }

    /// The type the register reads as.
    pub fn ty(self) -> PtxType {
        match self {
            Special::Clock64 => PtxType::U64,
            _ => PtxType::U32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compatibility_rules() {
        assert!(PtxType::F32.accepts(PtxType::F32));
        assert!(PtxType::B32.accepts(PtxType::F32));
        assert!(PtxType::F32.accepts(PtxType::B32));
        assert!(PtxType::U32.accepts(PtxType::S32));
        assert!(!PtxType::F32.accepts(PtxType::U32));
        assert!(!PtxType::U32.accepts(PtxType::U64));
        assert!(!PtxType::Pred.accepts(PtxType::B32));
        assert_eq!(PtxType::S32.widened(), Some(PtxType::S64));
        assert_eq!(PtxType::F32.bytes(), 4);
        // the emitter's tables and the register counts index by `ty as usize`
        for (i, t) in PtxType::ALL.iter().enumerate() {
            assert_eq!(*t as usize, i);
        }
    }
}
