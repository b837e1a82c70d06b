//! A CUDA backend as one tensor-parallel rank ([`crate::shard`]). Its group's sums and gathers
//! run through NCCL on the device where every rank can ([`rayo::cuda::nccl`]: its library
//! loads, each rank has a GPU of its own, `RAYO_NCCL` is not off); else they meet in host
//! memory (each a copy of the rows to the host and back). Through NCCL a rank's steps are
//! recorded as CUDA graphs (NCCL's calls are captured with the kernels; a gather NCCL cannot
//! make, of parts of unequal lengths, is refused while recording, and that step then runs as
//! it comes); through the host they are not.

use super::{Cuda, CudaBuf};
use crate::collective::{parts_to_rows, Collective};
use crate::shard::Shard;
use crate::{Error, Result};
use rayo::cuda::nccl::{self, Communicator, NcclId};
use std::collections::hash_map::Entry;

impl Cuda {
    /// The same running `group`'s rank of a tensor-parallel world: a session on it takes that
    /// rank's part of a model ([`crate::shard::split`]). Every rank of the world must make its
    /// backend at once (they agree here on NCCL or the host for their collectives); its steps
    /// are recorded only when the collectives run through NCCL (a sum through the host waits
    /// for the other ranks on the CPU, which a recording cannot).
    pub fn with_group(mut self, group: Box<dyn Collective>) -> Cuda {
        self.nccl = self.nccl_world(&*group);
        self.group = Some(group);
        self.graphs &= self.nccl.is_some();
        self
    }

    /// A collective through the host, refused while a step records (it would wait for the
    /// other ranks on the CPU, and a replay would not run it): the step then runs unrecorded.
    fn host_collective(&mut self, what: &str) -> Result<()> {
        if self.capturing {
            self.host_refused = true;
            return Err(Error::backend("cuda", format!("a recorded step cannot hold {what} through the host")));
        }
        Ok(())
    }

    /// Whether the collectives run through NCCL (else through the host).
    pub fn sums_on_device(&self) -> bool {
        self.nccl.is_some()
    }

    /// An NCCL communicator for `group`'s rank, if every rank of the world can make one; the
    /// ranks decide together (rank 0 makes the world's id and says whether it could, every
    /// rank says whether its communicator came up), so all use NCCL or none does.
    fn nccl_world(&self, group: &dyn Collective) -> Option<Communicator> {
        let Shard { rank, world } = group.shard();
        if world < 2 {
            return None;
        }
        let host = |why: String| {
            if rank == 0 {
                log::warn!("tensor-parallel CUDA ranks: sums through the host: {why}");
            }
            None
        };
        // byte 0: whether rank 0 made an id; then the id
        let mut id = [0u8; 129];
        if rank == 0 {
            if rayo::Config::get().nccl {
                match nccl::unique_id() {
                    Ok(made) => {
                        id[0] = 1;
                        id[1..].copy_from_slice(&made.0);
                    }
                    Err(e) => log::warn!("tensor-parallel CUDA ranks: sums through the host: {e}"),
                }
            } else {
                log::info!("tensor-parallel CUDA ranks: sums through the host (RAYO_NCCL=0)");
            }
        }
        if let Err(e) = group.broadcast_bytes(&mut id) {
            return host(format!("the ranks could not share NCCL's id: {e}"));
        }
        if id[0] == 0 {
            return None;
        }
        let mut made = NcclId([0; 128]);
        made.0.copy_from_slice(&id[1..]);
        let comm = Communicator::new(&self.dev, &made, rank, world);
        let mut up = [f32::from(comm.is_ok())];
        if let Err(e) = &comm {
            log::warn!("tensor-parallel CUDA rank {rank}: NCCL: {e}");
        }
        if let Err(e) = group.all_reduce_sum(&mut up) {
            return host(format!("the ranks could not agree on NCCL: {e}"));
        }
        if up[0] != world as f32 {
            return host(format!("NCCL came up on {} of {world} ranks (two ranks on one GPU cannot share a world)", up[0]));
        }
        if rank == 0 {
            log::info!("tensor-parallel CUDA ranks: sums through NCCL ({})", nccl::library().unwrap_or_default());
        }
        comm.ok()
    }

    /// [`crate::Backend::all_reduce`]: through NCCL, or the host.
    pub(super) fn sum(&mut self, buf: &CudaBuf, len: usize) -> Result<()> {
        if self.nccl.is_some() {
            return self.with(&[], &[buf], |s, _, outs| {
                let comm = s.nccl.as_mut().expect("checked above");
                Ok(comm.all_reduce_sum(&s.dev, outs[0], len)?)
            });
        }
        if self.group.is_none() {
            return Err(Error::backend("cuda", "has no all-reduce (it runs no tensor-parallel rank)"));
        }
        self.host_collective("a sum")?;
        let g = self.group.as_ref().expect("checked above");
        let mut host = vec![0f32; len];
        self.dev.download_prefix(self.arena.get(buf)?, &mut host)?;
        g.all_reduce_sum(&mut host)?;
        self.with(&[], &[buf], |s, _, outs| Ok(s.dev.write_at(outs[0], 0, &host)?))
    }

    /// [`crate::Backend::all_gather_rows`]: through NCCL where the parts are of one length
    /// (NCCL gathers equal counts), or the host.
    pub(super) fn gather(&mut self, part: &CudaBuf, m: usize, width: usize, out: &CudaBuf) -> Result<()> {
        let g = self.group.as_ref().ok_or_else(|| Error::backend("cuda", "has no all-gather (it runs no tensor-parallel rank)"))?;
        let shard = g.shard();
        let world = shard.world;
        let w = shard.part(width).len();
        if self.nccl.is_some() && width % world == 0 {
            return self.with(&[part], &[out], |s, ins, outs| {
                let comm = s.nccl.as_mut().expect("checked above");
                if m == 1 {
                    // one row: the parts in rank order are the row
                    return Ok(comm.all_gather(&s.dev, ins[0], w, outs[0])?);
                }
                // rank r's m rows of w values, one rank after another; then each row's parts
                // to their columns
                let all = match s.gathered.entry(m * width) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(e) => e.insert(s.dev.zeros(m * width)?),
                };
                comm.all_gather(&s.dev, ins[0], m * w, all)?;
                for r in 0..world {
                    for i in 0..m {
                        s.dev.copy_within_device(all, (r * m + i) * w, outs[0], i * width + r * w, w)?;
                    }
                }
                Ok(())
            });
        }
        self.host_collective("a gather")?;
        let g = self.group.as_ref().expect("checked above");
        let mut mine = vec![0f32; m * w];
        self.dev.download_prefix(self.arena.get(part)?, &mut mine)?;
        let mut all = vec![0f32; m * width];
        g.all_gather(&mine, &mut all)?;
        let mut rows = vec![0f32; m * width];
        parts_to_rows(&all, m, width, world, &mut rows);
        self.with(&[], &[out], |s, _, outs| Ok(s.dev.write_at(outs[0], 0, &rows)?))
    }
}
