//! A recorded step as one persistent kernel ([`rayo_ptx::kernels::PersistentKernel`]): the
//! kernels a recording ([`Replay`]) launches become the phases of one resident grid, a
//! grid-wide barrier where each launch boundary was, so that a step pays one launch and the
//! barriers instead of a launch per kernel.
//!
//! While the stream records, every kernel launch is also kept here with its parameter values
//! ([`Observed`]); any other work (a copy, a fill, a collective) marks the recording as not
//! convertible. [`CudaDevice::persistent`] then cuts the launches into runs the persistent kernel
//! can hold (1-D blocks of at most its threads, no tensor map) and keeps the others as plain
//! launches between them, in the recorded order.

use super::capture::Replay;
use super::device::CudaDevice;
use super::ffi::{self, drv, Arg, Loaded};
use crate::error::{Error, Result};
use cudarc::driver::{CudaFunction, CudaSlice};
use rayo_ptx::kernels::{LaunchConfig, PersistentKernel, Phase};
use std::sync::atomic::{AtomicU32, Ordering};

/// A kernel launch queued while the stream recorded: the kernel, its grid and its parameters'
/// values (device addresses as they were, which the recording holds too).
#[derive(Clone)]
pub(crate) struct Observed {
    loaded: Loaded,
    cfg: LaunchConfig,
    values: Vec<u64>,
}

impl CudaDevice {
    /// Queues `k` with `args` (checked against its parameters, [`ffi::launch`]); while the
    /// stream records, also keeps the launch for [`CudaDevice::persistent`].
    pub(crate) fn queue(&self, k: &Loaded, cfg: LaunchConfig, args: &mut [Arg]) -> Result<()> {
        ffi::launch(&self.stream, k, cfg, args)?;
        let mut observed = self.observed.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(Ok(list)) = observed.as_mut() {
            if args.iter().any(|a| matches!(a, Arg::Map(_))) {
                *observed = Some(Err(format!("{} takes a tensor map", k.name)));
            } else {
                let values = ffi::arg_values(&self.stream, args).0;
                list.push(Observed { loaded: k.clone(), cfg, values });
            }
        }
        Ok(())
    }

    /// Notes work other than a kernel (`what`) queued while the stream records: the recording
    /// then stays a graph.
    pub(crate) fn queued_other(&self, what: &str) {
        let mut observed = self.observed.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(observed.as_ref(), Some(Ok(_))) {
            *observed = Some(Err(format!("the recording queues {what}, not only kernels")));
        }
    }

    /// The recording `r` as persistent kernels and the launches between them: blocks of `subs`
    /// sub-blocks of `threads` threads (a multiple of 32; each sub-block takes the phases'
    /// blocks of its own), and `blocks_per_sm` resident blocks an SM (the registers limited so
    /// that they fit), or as many as fit. An error, and nothing made, when the recording holds
    /// work other than kernels, no run of at least two launches fits, or the module does not
    /// load.
    pub fn persistent(&self, r: &Replay, threads: u32, subs: u32, blocks_per_sm: Option<u32>) -> Result<PersistentStep> {
        let err = |message: String| Error::Device { api: "cuda", message: format!("persistent step: {message}") };
        let launches = r.launches.as_ref().map_err(|why| err(why.clone()))?;
        // (a sub-block's copy of the dynamic shared memory is not made: with sub-blocks, none)
        let fits = |o: &Observed| {
            o.cfg.block.0 <= threads && o.cfg.block.0 % 32 == 0 && o.cfg.block.1 == 1 && o.cfg.block.2 == 1 && (subs == 1 || o.cfg.shared_bytes == 0)
        };
        let mut pieces = Vec::new();
        let mut i = 0;
        while i < launches.len() {
            let run = launches[i..].iter().take_while(|o| fits(o)).count();
            if run >= 2 {
                pieces.push(self.persistent_run(&launches[i..i + run], threads, subs, blocks_per_sm, pieces.len()).map_err(|e| err(e.to_string()))?);
                i += run;
            } else {
                let o = &launches[i];
                pieces.push(Piece::Launch { func: o.loaded.func.clone(), cfg: o.cfg, values: o.values.clone() });
                i += 1;
            }
        }
        let phases = pieces.iter().map(|p| if let Piece::Persistent { phases, .. } = p { *phases } else { 0 }).sum();
        if phases == 0 {
            return Err(err(format!("no run of two or more of the {} launches fits blocks of {threads} threads", launches.len())));
        }
        Ok(PersistentStep { device: self.id(), pieces, launches: launches.len(), phases })
    }

    fn persistent_run(&self, run: &[Observed], threads: u32, subs: u32, blocks_per_sm: Option<u32>, index: usize) -> Result<Piece> {
        let phases: Vec<Phase> =
            run.iter().map(|o| Phase { kernel: &o.loaded.kernel, threads: o.cfg.block.0, grid: o.cfg.grid, args: o.values.clone() }).collect();
        let device = |message| Error::Device { api: "cuda", message };
        let mut kernel = PersistentKernel::new(threads, phases).and_then(|k| k.sub_blocks(subs)).map_err(device)?;
        if let Some(b) = blocks_per_sm {
            kernel = kernel.blocks_per_sm(b);
        }
        // the module's target: an architecture-specific one (sm_90a) if a phase needs it
        let target =
            run.iter().map(|o| o.loaded.target.to_string()).max_by_key(|t| t.ends_with('a')).unwrap_or_else(|| format!("sm_{}", self.ptx_target()));
        let text = kernel.module_text(&target);
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(text))
            .map_err(|e| Error::Device { api: "cuda", message: format!("loading persistent kernel {index} ({} phases): {e}", run.len()) })?;
        let func = module.load_function(PersistentKernel::NAME).map_err(drv)?;
        let shared = run.iter().map(|o| o.cfg.shared_bytes).max().unwrap_or(0);
        if shared > 48 * 1024 {
            ffi::allow_dynamic_shared(&func, shared)?;
        }
        let block = threads * subs;
        let fit = func.occupancy_max_active_blocks_per_multiprocessor(block, shared as usize, None).map_err(drv)?;
        let per_sm = blocks_per_sm.map_or(fit, |b| b.min(fit));
        if per_sm == 0 {
            return Err(Error::Device { api: "cuda", message: format!("persistent kernel {index}: no block of {block} threads fits an SM") });
        }
        let grid = per_sm * self.info().multiprocessors;
        self.check_not_capturing("persistent step")?;
        let barrier = self.stream.alloc_zeros::<u8>(PersistentKernel::BARRIER_BYTES).map_err(drv)?;
        log::info!("cuda: persistent kernel {index}: {} phases, {grid} blocks of {subs} x {threads} threads ({per_sm} an SM)", run.len());
        Ok(Piece::Persistent {
            func,
            cfg: LaunchConfig { grid: (grid, 1, 1), block: (block, 1, 1), shared_bytes: shared },
            barrier,
            phases: run.len(),
            epoch: AtomicU32::new(0),
        })
    }
}

/// One piece of a [`PersistentStep`].
enum Piece {
    /// A run of launches as one cooperative grid, its barrier's state.
    Persistent { func: CudaFunction, cfg: LaunchConfig, barrier: CudaSlice<u8>, phases: usize, epoch: AtomicU32 },
    /// A launch the persistent kernel cannot hold, as recorded.
    Launch { func: CudaFunction, cfg: LaunchConfig, values: Vec<u64> },
}

/// A recorded step as persistent kernels and the launches between them
/// ([`CudaDevice::persistent`]), replayed in the recorded order.
pub struct PersistentStep {
    device: u64,
    pieces: Vec<Piece>,
    launches: usize,
    phases: usize,
}

impl PersistentStep {
    /// Launches of the recording, and how many of them run as phases of persistent kernels.
    pub fn launches(&self) -> usize {
        self.launches
    }
    pub fn phases(&self) -> usize {
        self.phases
    }
    /// Launches a replay makes.
    pub fn pieces(&self) -> usize {
        self.pieces.len()
    }

    /// Queues the step on `dev`'s stream (the device the recording was made on).
    ///
    /// # Safety
    /// As [`Replay::replay`]: every buffer the recording used must still be alive, since the
    /// kernels hold their addresses. And one thread at a time replays a step (its launches are
    /// numbered in the order they are queued).
    pub unsafe fn replay(&self, dev: &CudaDevice) -> Result<()> {
        dev.check_owner("persistent step", self.device)?;
        for p in &self.pieces {
            match p {
                Piece::Persistent { func, cfg, barrier, epoch, .. } => {
                    use cudarc::driver::DevicePtr;
                    let (bar, _sync) = barrier.device_ptr(&dev.stream);
                    // launches in queue order, each numbered: the barrier's count goes on from
                    // where the one before left it (a launch the driver refused counts none)
                    let e = epoch.load(Ordering::Acquire);
                    // SAFETY: the entry takes a u64, the barrier's word (alive with `self`, zero
                    // before launch 0), and a u32, this launch's number; its phases' values are
                    // the recorded launches', whose memory the caller keeps alive. Cooperative:
                    // every block is resident, so no barrier waits on a block that never runs.
                    unsafe { ffi::launch_values(&dev.stream, func, *cfg, &mut [bar, u64::from(e)], true)? };
                    epoch.store(e.wrapping_add(1), Ordering::Release);
                }
                Piece::Launch { func, cfg, values } => {
                    let mut values = values.clone();
                    // SAFETY: the values are the recorded launch's, checked then against the
                    // kernel's parameters; their memory the caller keeps alive.
                    unsafe { ffi::launch_values(&dev.stream, func, *cfg, &mut values, false)? }
                }
            }
        }
        Ok(())
    }
}
