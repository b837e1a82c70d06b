//! The CUDA backend's recorded steps (CUDA graphs): a one-token step, and a step of `n`
//! one-token rows of as many sequences per `n`, recorded once and replayed. Every recording
//! references only memory the backend owns and is dropped before any of it is freed or
//! replaced ([`Cuda::drop_recording`]).

use super::context::no_context;
use super::Cuda;
use crate::Result;
use rayo::cuda::{PersistentStep, Replay};
use std::collections::HashMap;

/// The recorded steps: the one-token step ([`crate::Backend::one_token_step`]) and the steps of `n`
/// one-token rows by `n` ([`crate::Backend::one_token_rows_step`]).
#[derive(Default)]
pub(super) struct Recordings {
    pub(super) one: Option<Replay>,
    /// The one-token step as a persistent kernel (`RAYO_CUDA_PERSISTENT`), replayed instead of
    /// `one` when it could be made.
    one_persistent: Option<PersistentStep>,
    rows: HashMap<usize, Replay>,
}

/// Threads a block of the persistent step: the decoding products' and the attention's block.
const PERSISTENT_THREADS: u32 = 128;

impl Recordings {
    pub(super) fn clear(&mut self) {
        self.one_persistent = None;
        self.one = None;
        self.rows.clear();
    }
}

impl Cuda {
    /// [`crate::Backend::one_token_step`]: the first step runs as it comes, the second is recorded, the
    /// later ones replay the recording.
    pub(super) fn recorded_step(&mut self, ops: &mut dyn FnMut(&mut Self) -> Result<()>) -> Result<()> {
        if let Some(g) = &self.graph.one {
            // SAFETY: the recording references only memory this backend owns: its weights
            // (kept by name while it lives), arena buffers (never freed while it lives), its
            // spares (never freed), and its context and scratch, whose replacement drops the
            // recording first (`drop_recording`). Nothing was allocated while it recorded (the
            // device refuses to). The positions and ids it reads are what `StepInputs::write`
            // last wrote, bounded there: ids below the vocabulary (checked against the
            // embedding table's rows when recorded), a position below the inputs' positions
            // even for an empty write; the recorded step is one row, and its launches checked
            // that the cache and RoPE's table hold every position the inputs can name
            // (`cuda/ops/args.rs`). The persistent form runs the same launches with the same
            // values, and is dropped with the recording.
            return unsafe {
                match &self.graph.one_persistent {
                    Some(p) => p.replay(&self.dev),
                    None => g.replay(),
                }
                .map_err(crate::Error::from)
            };
        }
        if !self.graphs || !self.stepped_once {
            self.stepped_once = true;
            return ops(self);
        }
        self.ops = 0;
        let g = match self.record(ops) {
            Ok(g) => self.graph.one.insert(g),
            // a step that cannot be recorded because it holds a collective through the host (a
            // rank's gather of parts of unequal length) runs as it comes, from now on if it runs
            // so (an error of the step itself is returned, and the next step is recorded
            // again); any other refusal while recording (an allocation, a host read, a
            // recording inside the recording) is the caller's error
            Err(why) if !std::mem::take(&mut self.host_refused) => return Err(why),
            Err(why) => {
                let ran = ops(self);
                if ran.is_ok() {
                    log::warn!("cuda: the one-token step cannot be recorded ({why}); it runs as it comes");
                    self.graphs = false;
                }
                return ran;
            }
        };
        let knobs = rayo::Config::get();
        if let Some(blocks) = knobs.cuda_persistent {
            match self.dev.persistent(g, PERSISTENT_THREADS, knobs.cuda_persistent_subs, (blocks > 0).then_some(blocks)) {
                Ok(p) => {
                    log::info!("cuda: the one-token step is {} launches: {} of its {} as persistent kernels", p.pieces(), p.phases(), p.launches());
                    self.graph.one_persistent = Some(p);
                }
                Err(e) => log::warn!("cuda: the one-token step stays a graph: {e}"),
            }
        }
        // SAFETY: as above: the recording was just made over this backend's memory.
        unsafe {
            match &self.graph.one_persistent {
                Some(p) => p.replay(&self.dev),
                None => g.replay(),
            }
            .map_err(crate::Error::from)
        }
    }

    /// [`crate::Backend::one_token_rows_step`]: as [`Cuda::recorded_step`], a recording per row count.
    pub(super) fn recorded_rows_step(&mut self, rows: usize, ops: &mut dyn FnMut(&mut Self) -> Result<()>) -> Result<()> {
        // a recording per row count, of a pass whose every row is its own sequence's one token
        // (it reads each row's slot and position from the inputs; one row would be baked in)
        let c = self.context.as_ref().ok_or_else(no_context)?;
        if rows < 2 || c.inputs.one_token_rows(&self.dev, rows).is_err() || c.inputs.rows() != rows {
            return ops(self);
        }
        if let Some(g) = self.graph.rows.get(&rows) {
            // SAFETY: as `one_token_step`'s: the recording references only this backend's
            // memory, dropped with it (`drop_recording` clears every recording). The ids,
            // positions and slots it reads are the `rows` rows `StepInputs::write_segments`
            // last wrote (checked just above: one-token rows, exactly `rows` of them), each id
            // below the vocabulary, each position below the inputs' positions and each slot
            // below the cache's slots, bounded there; its launches checked that the caches hold
            // every slot and position the inputs can name (`cuda/ops/args.rs`).
            return unsafe { g.replay().map_err(crate::Error::from) };
        }
        if !self.graphs || self.rows_stepped.insert(rows) {
            return ops(self);
        }
        match self.record(ops) {
            Ok(g) => {
                let g = self.graph.rows.entry(rows).or_insert(g);
                // SAFETY: as above: the recording was just made over this backend's memory,
                // for the inputs checked above.
                unsafe { g.replay().map_err(crate::Error::from) }
            }
            Err(why) => {
                // (something of the pass still had to grow): this time without a recording
                log::warn!("cuda: a step of {rows} rows was not recorded ({why}); run as it comes");
                self.rows_stepped.remove(&rows);
                ops(self)
            }
        }
    }

    /// `ops` recorded, not run: the recording, or why none was made (the recording's own error
    /// or the step's; nothing of it ran on the device either way).
    fn record(&mut self, ops: &mut dyn FnMut(&mut Self) -> Result<()>) -> Result<Replay> {
        self.host_refused = false;
        self.dev.begin_capture()?;
        self.capturing = true;
        let recorded = ops(self);
        self.capturing = false;
        let ended = self.dev.end_capture();
        recorded?;
        Ok(ended?)
    }
}
