//! The PTX builder: types, registers, instructions, kernels, modules, the checker and the emitter.

mod check;
mod emit;
mod hopper;
mod instr;
mod kernel;
mod module;
mod names;
mod types;

pub use check::{check_kernel, CheckError};
pub use hopper::{Wgmma, WgmmaA, WgmmaType};
pub use instr::{Addr, AtomOp, BinOp, Cmp, Few, Inst, Mma, MmaKind, Op, Operand, Reg, Regs, ShflMode, UnOp, VoteMode};
pub use kernel::{Param, PtxKernel, SharedDecl};
pub use module::PtxModule;
pub use names::Name;
pub use types::{PtxType, Space, Special, TypeClass};
