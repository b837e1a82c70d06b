//! A CUDA backend as one tensor-parallel rank ([`crate::shard`]): its group's sums and
//! gathers meet in host memory (each a copy of the rows to the host and back), so a rank's steps
//! are not recorded as CUDA graphs. NCCL, on the device and recordable, is not wired in yet.

use super::{Cuda, CudaBuf};
use crate::collective::{parts_to_rows, Collective};
use crate::{Error, Result};

impl Cuda {
    /// The same running `group`'s rank of a tensor-parallel world: a session on it takes that
    /// rank's part of a model ([`crate::shard::split`]). The group's collectives meet on the
    /// host (each all-reduce a copy of the sums' rows to the host and back), so this backend's
    /// steps are not recorded.
    pub fn with_group(mut self, group: Box<dyn Collective>) -> Cuda {
        self.group = Some(group);
        self.graphs = false;
        self
    }

    /// [`crate::Backend::all_reduce`] through the host.
    pub(super) fn sum_on_host(&mut self, buf: &CudaBuf, len: usize) -> Result<()> {
        let g = self.group.as_ref().ok_or_else(|| Error::backend("cuda", "has no all-reduce (it runs no tensor-parallel rank)"))?;
        let mut host = vec![0f32; len];
        self.dev.download_prefix(self.arena.get(buf)?, &mut host)?;
        g.all_reduce_sum(&mut host)?;
        self.with(&[], &[buf], |s, _, outs| Ok(s.dev.write_at(outs[0], 0, &host)?))
    }

    /// [`crate::Backend::all_gather_rows`] through the host.
    pub(super) fn gather_on_host(&mut self, part: &CudaBuf, m: usize, width: usize, out: &CudaBuf) -> Result<()> {
        let g = self.group.as_ref().ok_or_else(|| Error::backend("cuda", "has no all-gather (it runs no tensor-parallel rank)"))?;
        let world = g.shard().world;
        let mut mine = vec![0f32; m * g.shard().part(width).len()];
        self.dev.download_prefix(self.arena.get(part)?, &mut mine)?;
        let mut all = vec![0f32; m * width];
        g.all_gather(&mine, &mut all)?;
        let mut rows = vec![0f32; m * width];
        parts_to_rows(&all, m, width, world, &mut rows);
        self.with(&[], &[out], |s, _, outs| Ok(s.dev.write_at(outs[0], 0, &rows)?))
    }
}
