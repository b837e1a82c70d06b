//! A persistent kernel: a recorded chain of launches run as one grid that stays resident.
//!
//! Each launch of the chain becomes a *phase*. Its kernel is emitted once as a `.func`
//! ([`PtxKernel::emit_device_function`]), and the entry calls it for every block of the phase's
//! grid, dealing those virtual blocks over its own blocks. A block is `S` sub-blocks of the
//! phases' threads side by side ([`PersistentKernel::sub_blocks`]); sub-block `s` of block `b`
//! takes virtual blocks `bS + s`, `bS + s + GS`, … of a grid of `G` blocks. A grid-wide
//! barrier separates two phases, as the launch boundary did: the later phase sees every write
//! of the earlier ones. The parameters are the values the launches were recorded with, written
//! into the code as immediates, so the entry takes only the barrier's word and the launch's
//! number.
//!
//! Measured on an H200 (`docs/perf/issue30.md`), a decoding step this way is 0.6–0.85× the
//! speed of the same launches in a CUDA graph with programmatic dependent launch: a grid
//! barrier costs more than the launch boundary it replaces.
//!
//! The grid must be resident as a whole (a cooperative launch): a block that waits at a
//! barrier for a block that never runs would wait forever.

use crate::ptx::{PtxKernel, PtxType};
use std::collections::HashSet;
use std::fmt::Write;

/// One launch of the chain: its kernel, block of threads, grid, and parameter values in the
/// kernel's order (pointers and u64 as they are; 32-bit values, f32 bits included, in the low
/// word).
#[derive(Debug, Clone)]
pub struct Phase<'a> {
    pub kernel: &'a PtxKernel,
    pub threads: u32,
    pub grid: (u32, u32, u32),
    pub args: Vec<u64>,
}

impl Phase<'_> {
    /// Blocks of its grid (checked by [`PersistentKernel::new`] to fit 32 bits).
    fn blocks(&self) -> u32 {
        self.grid.0 * self.grid.1 * self.grid.2
    }
}

/// A chain of phases as one persistent kernel of `threads` threads a block.
#[derive(Debug, Clone)]
pub struct PersistentKernel<'a> {
    threads: u32,
    phases: Vec<Phase<'a>>,
    /// `.minnctapersm`: ptxas keeps the registers few enough for this many blocks an SM.
    min_blocks: Option<u32>,
    /// Sub-blocks of `threads` threads a block, each taking virtual blocks of its own.
    subs: u32,
}

impl<'a> PersistentKernel<'a> {
    /// The entry's name.
    pub const NAME: &'static str = "rayo_persistent";
    /// Bytes of the barrier's state the entry takes (`bar`: the arrivals, zero before the first
    /// launch; launch `epoch` (0, 1, 2, … in order, wrapping) finds `epoch ·` its arrivals there).
    pub const BARRIER_BYTES: usize = 4;

    /// An error naming the phase for a phase the kernel cannot run: a block of more than
    /// `threads` threads or of other than 1-D, a thread count not a multiple of 32, an empty
    /// grid, a parameter that is not a scalar of 32 or 64 bits, or a value count other than
    /// the kernel's parameters.
    pub fn new(threads: u32, phases: Vec<Phase<'a>>) -> Result<PersistentKernel<'a>, String> {
        if threads == 0 || threads % 32 != 0 || threads > 1024 {
            return Err(format!("a persistent kernel's block of {threads} threads is not a multiple of 32 up to 1024"));
        }
        for (i, p) in phases.iter().enumerate() {
            let name = p.kernel.name();
            if p.threads == 0 || p.threads > threads || p.threads % 32 != 0 {
                return Err(format!("phase {i} ({name}): a block of {} threads does not fit {threads} (or is not whole warps)", p.threads));
            }
            if p.grid.0 == 0 || p.grid.1 == 0 || p.grid.2 == 0 {
                return Err(format!("phase {i} ({name}): empty grid {:?}", p.grid));
            }
            if p.args.len() != p.kernel.params().len() {
                return Err(format!("phase {i} ({name}): {} values for {} parameters", p.args.len(), p.kernel.params().len()));
            }
            if let Some(q) = p.kernel.params().iter().find(|q| q.bytes > 0 || scalar_bits(q.ty).is_none()) {
                return Err(format!("phase {i} ({name}): parameter {} is not a 32- or 64-bit scalar", p.kernel.resolve(q.name)));
            }
            let blocks = p.grid.0 as u64 * p.grid.1 as u64 * p.grid.2 as u64;
            if blocks > u32::MAX as u64 {
                return Err(format!("phase {i} ({name}): {blocks} blocks do not fit 32 bits"));
            }
        }
        Ok(PersistentKernel { threads, phases, min_blocks: None, subs: 1 })
    }

    /// The same kernel with registers for `blocks` resident blocks an SM (`.minnctapersm`):
    /// the phase that needs the most registers no longer sets how many blocks fit.
    pub fn blocks_per_sm(mut self, blocks: u32) -> Self {
        self.min_blocks = Some(blocks.max(1));
        self
    }

    /// The same kernel with `subs` sub-blocks of its threads a block (1 to 7: each takes virtual
    /// blocks of its own, with its own copy of the shared arrays and two named barriers, of
    /// the 16 a block has): more warps in flight for as many blocks at the grid's barriers.
    pub fn sub_blocks(mut self, subs: u32) -> Result<Self, String> {
        if !(1..=7).contains(&subs) || self.threads * subs > 1024 {
            return Err(format!("{subs} sub-blocks of {} threads: 1 to 7, of at most 1,024 threads in all", self.threads));
        }
        self.subs = subs;
        Ok(self)
    }

    pub fn threads(&self) -> u32 {
        self.threads
    }
    pub fn phases(&self) -> &[Phase<'a>] {
        &self.phases
    }

    /// The module: `.version 8.0`, `target`, each phase's kernel once as a device function,
    /// then the entry [`PersistentKernel::NAME`] (parameters `bar`, `.u64`, and `epoch`, `.u32`:
    /// see [`PersistentKernel::BARRIER_BYTES`]).
    pub fn module_text(&self, target: &str) -> String {
        let mut out = format!(
            "//\n// Generated by rayo-ptx: a persistent kernel of {} phases\n//\n\n.version 8.0\n.target {target}\n.address_size 64\n\n",
            self.phases.len()
        );
        let mut emitted = HashSet::new();
        for p in &self.phases {
            if emitted.insert((p.kernel.name().to_string(), p.threads)) {
                out.push_str(&p.kernel.emit_device_function(p.threads, self.subs));
                out.push('\n');
            }
        }
        self.entry(&mut out);
        out
    }

    fn entry(&self, o: &mut String) {
        let n = Self::NAME;
        let (q, subs) = (self.threads, self.subs);
        let _ = write!(o, ".visible .entry {n}(\n\t.param .u64 bar,\n\t.param .u32 epoch\n)\n.maxntid {}, 1, 1\n", q * subs);
        if let Some(b) = self.min_blocks {
            let _ = writeln!(o, ".minnctapersm {b}");
        }
        o.push_str("{\n");
        o.push_str("\t.reg .pred %p<4>;\n\t.reg .u32 %r<24>;\n\t.reg .u64 %rd<4>;\n\t.reg .f32 %f<2>;\n\n");
        // %r20 the thread, %r0 its index in its sub-block %r16, %r18 / %r19 the sub-block's
        // barriers (in a phase, at the end of a virtual block), %r1 the block, %r2 the grid,
        // %r17 the stride of the virtual blocks, %r3 the sub-block's virtual block, %r4..%r7
        // its x / y·z / y / z
        let _ = writeln!(
            o,
            "\tld.param.u64 %rd0, [bar];\n\tmov.u32 %r20, %tid.x;\n\trem.u32 %r0, %r20, {q};\n\tdiv.u32 %r16, %r20, {q};\n\tadd.u32 %r18, %r16, 1;\n\tadd.u32 %r19, %r16, {};\n\tmov.u32 %r1, %ctaid.x;\n\tmov.u32 %r2, %nctaid.x;\n\tmul.lo.u32 %r17, %r2, {subs};\n\tmad.lo.u32 %r21, %r1, {subs}, %r16;",
            1 + subs
        );
        // %r12: the arrivals the next barrier waits for, from this launch's first: the blocks
        // that had work in a phase arrive after it (min(its blocks / subs, the grid))
        o.push_str("\tmov.u32 %r13, 0;\n");
        for p in &self.phases[..self.phases.len().saturating_sub(1)] {
            let _ = writeln!(o, "\tmin.u32 %r14, %r2, {};\n\tadd.u32 %r13, %r13, %r14;", p.blocks().div_ceil(subs));
        }
        o.push_str("\tld.param.u32 %r15, [epoch];\n\tmul.lo.u32 %r12, %r15, %r13;\n");
        for (i, p) in self.phases.iter().enumerate() {
            let (gx, gy, gz) = p.grid;
            let total = p.blocks();
            let _ = writeln!(o, "\n\t// phase {i}: {} over {gx} x {gy} x {gz} blocks of {}", p.kernel.name(), p.threads);
            let _ = writeln!(o, "\tsetp.lt.u32 %p1, %r0, {};", p.threads);
            if i > 0 {
                let before = self.phases[i - 1].blocks().div_ceil(subs);
                arrive(o, before);
                wait(o, i, before);
            }
            let _ = writeln!(o, "\tmov.u32 %r3, %r21;");
            let _ = writeln!(o, "$P{i}_loop:");
            let _ = writeln!(o, "\tsetp.ge.u32 %p0, %r3, {total};");
            let _ = writeln!(o, "\t@%p0 bra $P{i}_end;");
            let _ = writeln!(o, "\t@!%p1 bra $P{i}_next;");
            self.call(o, p);
            let _ = writeln!(o, "$P{i}_next:");
            // the sub-block's shared arrays are its next virtual block's (a kernel with none
            // needs no barrier between them)
            if !p.kernel.shared.is_empty() {
                let _ = writeln!(o, "\tbar.sync %r19, {q};");
            }
            o.push_str("\tadd.u32 %r3, %r3, %r17;\n");
            let _ = writeln!(o, "\tbra.uni $P{i}_loop;");
            let _ = writeln!(o, "$P{i}_end:");
        }
        o.push_str("\tret;\n}\n");
    }
}

impl PersistentKernel<'_> {
    /// The call of phase `p`'s device function for virtual block `%r3`, with the virtual
    /// specials, the sub-block and its barrier, and the recorded parameter values.
    fn call(&self, o: &mut String, p: &Phase) {
        let (gx, gy, _) = p.grid;
        let _ = writeln!(o, "\trem.u32 %r4, %r3, {gx};\n\tdiv.u32 %r5, %r3, {gx};\n\trem.u32 %r6, %r5, {gy};\n\tdiv.u32 %r7, %r5, {gy};");
        o.push_str("\t{\n");
        // ctaid x y z, nctaid x y, ntid x y, tid x; the sub-block, its barrier
        let specials = [
            ("%r4", None),
            ("%r6", None),
            ("%r7", None),
            ("", Some(gx)),
            ("", Some(gy)),
            ("", Some(p.threads)),
            ("", Some(1)),
            ("%r0", None),
            ("%r16", None),
            ("%r18", None),
        ];
        let mut names = Vec::new();
        for (j, (reg, imm)) in specials.iter().enumerate() {
            let _ = writeln!(o, "\t.param .u32 v{j};");
            match imm {
                Some(v) => {
                    let _ = writeln!(o, "\tmov.u32 %r8, {v};\n\tst.param.u32 [v{j}], %r8;");
                }
                None => {
                    let _ = writeln!(o, "\tst.param.u32 [v{j}], {reg};");
                }
            }
            names.push(format!("v{j}"));
        }
        for (j, (q, &v)) in p.kernel.params().iter().zip(&p.args).enumerate() {
            let bits = scalar_bits(q.ty).expect("checked in new");
            let ty = q.ty.dotted();
            let _ = writeln!(o, "\t.param {ty} a{j};");
            match (q.ty, bits) {
                (PtxType::F32, _) => {
                    let _ = writeln!(o, "\tmov.f32 %f0, 0f{:08X};\n\tst.param.f32 [a{j}], %f0;", v as u32);
                }
                (_, 64) => {
                    let _ = writeln!(o, "\tmov.u64 %rd1, {v};\n\tst.param{ty} [a{j}], %rd1;");
                }
                _ => {
                    let _ = writeln!(o, "\tmov.u32 %r8, {};\n\tst.param{ty} [a{j}], %r8;", v as u32);
                }
            }
            names.push(format!("a{j}"));
        }
        let _ = writeln!(o, "\tcall {}, ({});", p.kernel.device_function_name(p.threads), names.join(", "));
        o.push_str("\t}\n");
    }
}

/// The first half of the grid-wide barrier before a phase, whose phase before it the first
/// `worked` blocks had work in: thread 0 of each of those adds one to the arrivals, releasing
/// the block's writes (which the block's barrier ordered before it). See [`wait`].
fn arrive(o: &mut String, worked: u32) {
    let _ = write!(
        o,
        "\tbar.sync 0;
\tsetp.ne.u32 %p2, %r20, 0;
\tsetp.ge.or.u32 %p2, %r1, {worked}, %p2;
\t@!%p2 red.release.gpu.global.add.u32 [%rd0], 1;
"
    );
}

/// The second half: thread 0 of every block waits, acquiring, until the arrivals reach the
/// barrier's target; then the block goes on. Every write of the phases before is seen by every
/// block after it. The count only grows (a launch's number sets where it starts), so no one
/// resets it while another still reads it.
fn wait(o: &mut String, i: usize, worked: u32) {
    let _ = write!(
        o,
        "\tmin.u32 %r14, %r2, {worked};
\tadd.u32 %r12, %r12, %r14;
\tsetp.ne.u32 %p2, %r20, 0;
\t@%p2 bra $B{i}_done;
$B{i}_wait:
\tld.acquire.gpu.global.u32 %r10, [%rd0];
\tsub.u32 %r9, %r10, %r12;
\tsetp.lt.s32 %p3, %r9, 0;
\t@%p3 bra $B{i}_wait;
$B{i}_done:
\tbar.sync 0;
"
    );
}

/// 32 or 64 for the scalar parameter types a phase may take.
fn scalar_bits(ty: PtxType) -> Option<u32> {
    match ty {
        PtxType::U32 | PtxType::S32 | PtxType::B32 | PtxType::F32 => Some(32),
        PtxType::U64 | PtxType::S64 | PtxType::B64 => Some(64),
        _ => None,
    }
}
