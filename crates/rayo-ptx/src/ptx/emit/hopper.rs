//! The text of Hopper's asynchronous instructions (`wgmma`, mbarriers, TMA, `setmaxnreg`; built
//! in `ptx/hopper.rs`).

use super::W;
use crate::ptx::hopper::{WgmmaA, WgmmaType};
use crate::ptx::instr::Op;

/// Writes one of Hopper's instructions (the caller passes no other).
pub(super) fn write(w: &mut W, op: &Op) {
    match op {
        Op::Wgmma(i) => {
            if let Some(m) = w.k.wgmma(*i) {
                w.s("wgmma.mma_async.sync.aligned.m64n");
                w.u(m.n as u64);
                w.c(b'k');
                w.u(m.ty.k() as u64);
                w.s(".f32.");
                w.s(m.ty.tag());
                w.c(b'.');
                w.s(m.ty.tag());
                w.c(b' ');
                w.regs(&m.d);
                w.s(", ");
                let regs_a = match &m.a {
                    WgmmaA::Desc(a) => {
                        w.reg(*a);
                        false
                    }
                    WgmmaA::Regs(a) => {
                        w.regs(a);
                        true
                    }
                };
                w.s(", ");
                w.reg(m.b);
                w.s(", ");
                w.reg(m.scale_d);
                // scale A and B by 1; the transpose flags (A's only from shared memory)
                w.s(match (m.ty, regs_a, m.trans_b) {
                    (WgmmaType::TF32, ..) => ", 1, 1",
                    (_, true, true) => ", 1, 1, 1",
                    (_, true, false) => ", 1, 1, 0",
                    (_, false, true) => ", 1, 1, 0, 1",
                    (_, false, false) => ", 1, 1, 0, 0",
                });
            }
        }
        Op::WgmmaFence => w.s("wgmma.fence.sync.aligned"),
        Op::WgmmaCommit => w.s("wgmma.commit_group.sync.aligned"),
        Op::WgmmaWait(n) => {
            w.s("wgmma.wait_group.sync.aligned ");
            w.u(*n as u64);
        }
        Op::MbarInit { addr, count } => {
            w.s("mbarrier.init.shared::cta.b64 ");
            w.addr(addr);
            w.s(", ");
            w.u(*count as u64);
        }
        Op::MbarArrive { addr, tx } => {
            w.s(if tx.is_some() { "mbarrier.arrive.expect_tx.shared::cta.b64 _, " } else { "mbarrier.arrive.shared::cta.b64 _, " });
            w.addr(addr);
            if let Some(tx) = tx {
                w.s(", ");
                w.u(*tx as u64);
            }
        }
        Op::MbarTryWait { p, addr, parity } => {
            w.s("mbarrier.try_wait.parity.shared::cta.b64 ");
            w.reg(*p);
            w.s(", ");
            w.addr(addr);
            w.then(parity);
        }
        Op::TmaLoad { dst, map, x, y, z, bar, multicast } => {
            w.s(if z.is_some() { "cp.async.bulk.tensor.3d" } else { "cp.async.bulk.tensor.2d" });
            w.s(".shared::cluster.global.mbarrier::complete_tx::bytes");
            w.s(if multicast.is_some() { ".multicast::cluster " } else { " " });
            w.addr(dst);
            w.s(", [");
            w.reg(*map);
            w.s(", {");
            w.op(x);
            w.s(", ");
            w.op(y);
            if let Some(z) = z {
                w.s(", ");
                w.op(z);
            }
            w.s("}], ");
            w.addr(bar);
            if let Some(m) = multicast {
                w.s(", ");
                w.reg(*m);
            }
        }
        Op::FenceProxyAsync => w.s("fence.proxy.async.shared::cta"),
        Op::MbarArriveRemote { addr } => {
            w.s("mbarrier.arrive.shared::cluster.b64 _, ");
            w.addr(addr);
        }
        Op::Mapa { d, a, rank } => {
            w.s("mapa.shared::cluster.u32 ");
            w.reg(*d);
            w.s(", ");
            w.reg(*a);
            w.then(rank);
        }
        Op::FenceMbarrierInit => w.s("fence.mbarrier_init.release.cluster"),
        Op::ClusterSync => w.s("barrier.cluster.arrive;\n\tbarrier.cluster.wait"),
        Op::SetMaxNReg { inc, n } => {
            w.s(if *inc { "setmaxnreg.inc.sync.aligned.u32 " } else { "setmaxnreg.dec.sync.aligned.u32 " });
            w.u(*n as u64);
        }
        _ => unreachable!("hopper::write takes only Hopper's instructions"),
    }
}
