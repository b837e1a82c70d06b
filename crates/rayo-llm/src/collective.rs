//! The collective operations of a tensor-parallel world ([`crate::shard`]): an all-reduce
//! (sum) and an all-gather over host memory, and [`LocalGroup`], a world of ranks that are
//! threads of one process (the CPU backend's ranks, and the test of the split's arithmetic).
//!
//! Every rank calls the same collectives in the same order. A rank whose handle is dropped
//! (its session ended or failed) breaks the group: the others' next collective is an error
//! naming it, never a wait for a rank that will not come.

use crate::shard::Shard;
use crate::{Error, Result};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// One rank's side of a world's collective operations.
pub trait Collective: Send {
    /// This rank and the world's size.
    fn shard(&self) -> Shard;
    /// `data` summed value by value over every rank, into every rank's `data`: the same bits
    /// on every rank (the sum in rank order). Every rank passes the same length.
    fn all_reduce_sum(&self, data: &mut [f32]) -> Result<()>;
    /// Every rank's `part`, in rank order, into every rank's `out`, whose length must be the
    /// parts' total.
    fn all_gather(&self, part: &[f32], out: &mut [f32]) -> Result<()>;

    /// Rank 0's `bytes` into every rank's `bytes` (every rank passes the same length): how a
    /// backend hands its ranks something made once, such as an NCCL world's id. Through
    /// [`Collective::all_gather`] of the bytes as f32 bit patterns, which a gather moves
    /// unchanged.
    fn broadcast_bytes(&self, bytes: &mut [u8]) -> Result<()> {
        let Shard { rank, world } = self.shard();
        let words = bytes.len().div_ceil(4);
        let mut padded = bytes.to_vec();
        padded.resize(words * 4, 0);
        let part: Vec<f32> = if rank == 0 {
            padded.chunks_exact(4).map(|c| f32::from_bits(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect()
        } else {
            vec![0.0; words]
        };
        let mut all = vec![0f32; words * world];
        self.all_gather(&part, &mut all)?;
        let got: Vec<u8> = all[..words].iter().flat_map(|x| x.to_bits().to_le_bytes()).collect();
        bytes.copy_from_slice(&got[..bytes.len()]);
        Ok(())
    }
}

/// A world of ranks in one process: [`LocalGroup::new`] makes one handle per rank, each to be
/// moved to the thread that runs that rank.
pub struct LocalGroup {
    rank: usize,
    shared: Arc<Shared>,
}

struct Shared {
    world: usize,
    state: Mutex<Round>,
    changed: Condvar,
}

/// The collective in progress.
struct Round {
    /// Counts finished rounds: a rank waits for it to move on.
    done: u64,
    /// What each rank brought to this round (`None`: not yet).
    parts: Vec<Option<(Op, Vec<f32>)>>,
    /// The finished round's result, until every rank has taken it.
    result: Option<Arc<Vec<f32>>>,
    /// Ranks that have taken `result`.
    taken: usize,
    /// Why the group is broken: a rank left, or the ranks asked for different operations.
    broken: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Sum,
    Gather,
}

impl LocalGroup {
    /// One handle per rank of a world of `world` (at least 1).
    pub fn new(world: usize) -> Vec<LocalGroup> {
        let world = world.max(1);
        let round = Round { done: 0, parts: vec![None; world], result: None, taken: 0, broken: None };
        let shared = Arc::new(Shared { world, state: Mutex::new(round), changed: Condvar::new() });
        (0..world).map(|rank| LocalGroup { rank, shared: Arc::clone(&shared) }).collect()
    }

    fn lock(&self) -> MutexGuard<'_, Round> {
        // a rank that panicked while holding the lock left the round as it was: go on (the
        // panicking rank's handle is dropped, which breaks the group)
        self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn broken(why: &str) -> Error {
        Error::TensorParallel(format!("group: {why}"))
    }

    /// Brings `data` to a round of `op`; returns the round's result.
    fn round(&self, op: Op, data: &[f32]) -> Result<Arc<Vec<f32>>> {
        let sh = &*self.shared;
        let mut st = self.lock();
        // the previous round's result must be taken by every rank before this one starts
        while st.result.is_some() && st.broken.is_none() {
            st = sh.changed.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if let Some(why) = &st.broken {
            return Err(Self::broken(why));
        }
        st.parts[self.rank] = Some((op, data.to_vec()));
        let round = st.done;
        if st.parts.iter().all(Option::is_some) {
            let parts: Vec<(Op, Vec<f32>)> = st.parts.iter_mut().map(|p| p.take().expect("checked above")).collect();
            if let Some((r, (other, _))) = parts.iter().enumerate().find(|(_, (o, _))| *o != op) {
                st.broken = Some(format!("rank {} asked for {op:?} while rank {r} asked for {other:?}", self.rank));
                sh.changed.notify_all();
                return Err(Self::broken(st.broken.as_deref().unwrap_or_default()));
            }
            let result = match op {
                Op::Gather => parts.into_iter().flat_map(|(_, v)| v).collect(),
                Op::Sum => {
                    let n = parts[0].1.len();
                    if let Some((r, (_, v))) = parts.iter().enumerate().find(|(_, (_, v))| v.len() != n) {
                        st.broken = Some(format!("rank 0 summed {n} values, rank {r} {}", v.len()));
                        sh.changed.notify_all();
                        return Err(Self::broken(st.broken.as_deref().unwrap_or_default()));
                    }
                    let mut sum = parts[0].1.clone();
                    for (_, v) in &parts[1..] {
                        for (s, x) in sum.iter_mut().zip(v) {
                            *s += x;
                        }
                    }
                    sum
                }
            };
            st.result = Some(Arc::new(result));
            st.done += 1;
            sh.changed.notify_all();
        } else {
            while st.done == round && st.broken.is_none() {
                st = sh.changed.wait(st).unwrap_or_else(|p| p.into_inner());
            }
            if st.done == round {
                return Err(Self::broken(st.broken.as_deref().unwrap_or_default()));
            }
        }
        let result = Arc::clone(st.result.as_ref().expect("set when the round finished"));
        st.taken += 1;
        if st.taken == sh.world {
            st.result = None;
            st.taken = 0;
            sh.changed.notify_all();
        }
        Ok(result)
    }
}

impl Collective for LocalGroup {
    fn shard(&self) -> Shard {
        Shard { rank: self.rank, world: self.shared.world }
    }

    fn all_reduce_sum(&self, data: &mut [f32]) -> Result<()> {
        let sum = self.round(Op::Sum, data)?;
        data.copy_from_slice(&sum);
        Ok(())
    }

    fn all_gather(&self, part: &[f32], out: &mut [f32]) -> Result<()> {
        let all = self.round(Op::Gather, part)?;
        if all.len() != out.len() {
            return Err(Self::broken(&format!("the parts hold {} values, rank {}'s output room {}", all.len(), self.rank, out.len())));
        }
        out.copy_from_slice(&all);
        Ok(())
    }
}

/// Rows from an all-gather of row parts: `all` holds every rank's part one after the other
/// (rank r: `m` rows of [`Shard::part`]`(width)` values, a world of `world`); `out` gets `m`
/// whole rows of `width` values, each the ranks' parts in rank order.
pub(crate) fn parts_to_rows(all: &[f32], m: usize, width: usize, world: usize, out: &mut [f32]) {
    let mut at = 0;
    for rank in 0..world {
        let cols = Shard { rank, world }.part(width);
        for i in 0..m {
            out[i * width + cols.start..i * width + cols.end].copy_from_slice(&all[at..at + cols.len()]);
            at += cols.len();
        }
    }
}

impl Drop for LocalGroup {
    fn drop(&mut self) {
        let mut st = self.lock();
        if st.broken.is_none() && self.shared.world > 1 {
            st.broken = Some(format!("rank {} left", self.rank));
        }
        self.shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bit patterns arithmetic would change (a signaling and a quiet NaN, -0, a denormal),
    /// then bytes of an odd count.
    fn bytes() -> Vec<u8> {
        let mut b: Vec<u8> = [0x7F80_0001u32, 0xFFC0_0000, 0x8000_0000, 1].iter().flat_map(|x| x.to_le_bytes()).collect();
        b.extend(0..=200u8);
        b
    }

    #[test]
    fn a_broadcast_gives_every_rank_rank_0_s_bytes_unchanged() {
        for world in 1..=3 {
            let threads: Vec<_> = LocalGroup::new(world)
                .into_iter()
                .map(|g| {
                    std::thread::spawn(move || {
                        let mut b = if g.shard().rank == 0 { bytes() } else { vec![7; bytes().len()] };
                        g.broadcast_bytes(&mut b).unwrap();
                        b
                    })
                })
                .collect();
            for t in threads {
                assert_eq!(t.join().unwrap(), bytes(), "world {world}");
            }
        }
    }

    #[test]
    fn sums_and_gathers_are_every_rank_s_in_rank_order() {
        for world in 1..=4 {
            let threads: Vec<_> = LocalGroup::new(world)
                .into_iter()
                .map(|g| {
                    std::thread::spawn(move || {
                        let r = g.shard().rank as f32;
                        let mut results = Vec::new();
                        for round in 0..50 {
                            let mut v = vec![r + round as f32, 10.0 * r];
                            g.all_reduce_sum(&mut v).unwrap();
                            let mut all = vec![0.0; world * (1 + world) / 2];
                            let part: Vec<f32> = (0..=g.shard().rank).map(|i| 100.0 * r + i as f32).collect();
                            g.all_gather(&part, &mut all).unwrap();
                            results.push((v, all));
                        }
                        results
                    })
                })
                .collect();
            let sum_r = (0..world).sum::<usize>() as f32;
            let want_all: Vec<f32> = (0..world).flat_map(|r| (0..=r).map(move |i| 100.0 * r as f32 + i as f32)).collect();
            for t in threads {
                for (round, (v, all)) in t.join().unwrap().into_iter().enumerate() {
                    assert_eq!(v, vec![sum_r + (world * round) as f32, 10.0 * sum_r]);
                    assert_eq!(all, want_all);
                }
            }
        }
    }

    #[test]
    fn a_rank_that_leaves_or_disagrees_is_an_error_for_the_others() {
        let mut g = LocalGroup::new(3);
        let left = g.pop().unwrap();
        drop(left);
        let waiting: Vec<_> = g.into_iter().map(|g| std::thread::spawn(move || g.all_reduce_sum(&mut [1.0]).unwrap_err().to_string())).collect();
        for w in waiting {
            assert!(w.join().unwrap().contains("rank 2 left"));
        }
        let [a, b]: [LocalGroup; 2] = LocalGroup::new(2).try_into().ok().unwrap();
        let t = std::thread::spawn(move || a.all_gather(&[1.0], &mut [0.0; 2]).map_err(|e| e.to_string()));
        let e = b.all_reduce_sum(&mut [1.0]).unwrap_err().to_string();
        assert!(e.contains("asked for"), "{e}");
        assert!(t.join().unwrap().unwrap_err().contains("asked for"));
    }
}
