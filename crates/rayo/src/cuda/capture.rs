//! Stream capture: the work queued between [`CudaDevice::begin_capture`] and
//! [`CudaDevice::end_capture`] recorded as a graph ([`Replay`]) and replayed with one driver
//! call (what [`GraphBuilder`](super::GraphBuilder) builds on, and an engine's recorded step).

use super::device::CudaDevice;
use super::ffi::drv;
use crate::error::{Error, Result};
use cudarc::driver::sys;
use std::sync::atomic::Ordering;

/// A captured stream of work (one decoding step), replayed with one driver call.
pub struct Replay {
    pub(super) graph: cudarc::driver::CudaGraph,
    /// The kernels it launches, in order, with their parameters, or why it is more than
    /// kernels (what [`CudaDevice::persistent`] is made from).
    pub(super) launches: std::result::Result<Vec<super::persistent::Observed>, String>,
}

impl Replay {
    /// Queues the captured work again.
    ///
    /// # Safety
    /// Every device buffer the captured work used must still be alive (the graph holds their
    /// addresses, not the buffers): replaying after one was dropped reads or writes freed
    /// device memory. So must every NCCL communicator whose collectives it recorded, and
    /// every other rank of their worlds must replay its own recording of the same collectives
    /// (else the sum waits on the device for ranks that never come).
    pub unsafe fn replay(&self) -> Result<()> {
        self.graph.launch().map_err(drv)
    }
}

impl CudaDevice {
    /// Starts recording this device's stream: the work queued until [`CudaDevice::end_capture`]
    /// is recorded, not run. Kernels must be loaded and buffers allocated before (a pass run
    /// once uncaptured does both): meanwhile every allocation on this device is an error, and
    /// so is a second recording.
    pub fn begin_capture(&self) -> Result<()> {
        if self.capturing.swap(true, Ordering::AcqRel) {
            return Err(Error::Device { api: "cuda", message: "begin_capture: the stream is already recording".into() });
        }
        *self.observed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Ok(Vec::new()));
        let begun = self.stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).map_err(drv);
        if begun.is_err() {
            self.capturing.store(false, Ordering::Release);
        }
        begun
    }

    /// Ends the recording (see [`CudaDevice::begin_capture`]) as an instantiated graph.
    pub fn end_capture(&self) -> Result<Replay> {
        let flags = sys::CUgraphInstantiate_flags::CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
        let ended = self.stream.end_capture(flags).map_err(drv);
        self.capturing.store(false, Ordering::Release);
        let launches = self.observed.lock().unwrap_or_else(|p| p.into_inner()).take().unwrap_or_else(|| Err("nothing observed".into()));
        let graph = ended?.ok_or(Error::Device { api: "cuda", message: "stream capture produced no graph".into() })?;
        graph.upload().map_err(drv)?;
        Ok(Replay { graph, launches })
    }
}
