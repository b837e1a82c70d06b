//! A world of tensor-parallel ranks in several processes, on one host or on many: the ranks
//! find each other at a TCP address any launcher can give (`--rank`, `--tensor-parallel`,
//! `--rendezvous HOST:PORT`), and `TcpGroup` is their [`Collective`] over those links.
//!
//! Rank 0 listens at the address and every other rank connects to it (a star): rank 0 sums
//! and gathers the parts in rank order and sends the result back, so every rank gets the same
//! bits as [`crate::collective::LocalGroup`]'s. The same link carries rank 0's calls to the
//! rank ([`crate::tensor_parallel`]); the two never overlap, since a rank reads its next call
//! only when it has answered the last, and answers only when its collectives are done.
//!
//! On the wire every message is a frame: a tag byte, the payload's length (u32, little
//! endian) and the payload. A peer that hangs up, sends a frame of the wrong kind or length,
//! or greets wrongly is an error naming the rank and the numbers, never a wait that does not
//! end: a rank that goes away closes its links, and the others' next read fails.

use crate::collective::Collective;
use crate::shard::Shard;
use crate::{Error, Result};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Where a rank of a world of processes meets the others.
#[derive(Clone, Debug)]
pub struct Rendezvous {
    /// `HOST:PORT`: rank 0 listens there, the others connect.
    pub addr: String,
    /// This process's rank and the world's size.
    pub shard: Shard,
    /// How long rank 0 waits for every rank to connect, and a rank for rank 0 to listen.
    pub wait: Duration,
}

/// What a frame holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Tag {
    /// A rank to rank 0: [`MAGIC`], its rank, the world's size.
    Hello = 1,
    /// Rank 0 to a rank: the engine to make ([`crate::tensor_parallel`]).
    Welcome,
    /// A rank to rank 0: its engine is made (its shape), or the error that stopped it.
    Ready,
    /// Rank 0 to a rank: a call to run.
    Call,
    /// A rank to rank 0: the call ran.
    Answer,
    /// A rank to rank 0: the error that ended it (instead of a part or an answer).
    Failed,
    /// A rank's part of a sum, or of a gather.
    Sum,
    Gather,
    /// Rank 0 to a rank: a collective's result.
    Result,
}

impl Tag {
    fn from_u8(b: u8) -> Option<Tag> {
        use Tag::*;
        [Hello, Welcome, Ready, Call, Answer, Failed, Sum, Gather, Result].into_iter().find(|t| *t as u8 == b)
    }
}

/// The greeting's first bytes (and the wire's version).
const MAGIC: &[u8; 8] = b"rayo-tp1";

/// The largest frame a peer may send (a call of a long prompt, or a gather of logits, is far
/// below it): a length past it is an error, not an allocation.
const MAX_FRAME: usize = 1 << 30;

/// A link to another rank: one TCP connection.
pub(crate) struct Link {
    stream: TcpStream,
    /// The rank at the other end.
    pub(crate) peer: usize,
}

fn io_error(what: String, e: std::io::Error) -> Error {
    Error::TensorParallel(format!("rendezvous: {what}: {e}"))
}

fn wire_error(what: String) -> Error {
    Error::TensorParallel(format!("rendezvous: {what}"))
}

impl Link {
    /// A second handle to the same connection (the call loop and the collectives each hold
    /// one; see the module's note on why they never overlap).
    pub(crate) fn try_clone(&self) -> Result<Link> {
        let stream = self.stream.try_clone().map_err(|e| io_error(format!("rank {}'s link", self.peer), e))?;
        Ok(Link { stream, peer: self.peer })
    }

    pub(crate) fn send(&mut self, tag: Tag, payload: &[u8]) -> Result<()> {
        let len = u32::try_from(payload.len()).ok().filter(|&n| n as usize <= MAX_FRAME);
        let len =
            len.ok_or_else(|| wire_error(format!("a frame of {} bytes to rank {}, past the {MAX_FRAME} a frame holds", payload.len(), self.peer)))?;
        let mut head = [0u8; 5];
        head[0] = tag as u8;
        head[1..].copy_from_slice(&len.to_le_bytes());
        (self.stream.write_all(&head).and_then(|()| self.stream.write_all(payload)).and_then(|()| self.stream.flush()))
            .map_err(|e| io_error(format!("sending to rank {}", self.peer), e))
    }

    /// The next frame: its tag and payload.
    pub(crate) fn recv(&mut self) -> Result<(Tag, Vec<u8>)> {
        let mut head = [0u8; 5];
        self.stream.read_exact(&mut head).map_err(|e| match e.kind() {
            ErrorKind::UnexpectedEof => wire_error(format!("rank {} hung up", self.peer)),
            ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted => wire_error(format!("rank {} hung up ({e})", self.peer)),
            _ => io_error(format!("reading from rank {}", self.peer), e),
        })?;
        let tag = Tag::from_u8(head[0]).ok_or_else(|| wire_error(format!("rank {} sent a frame of unknown kind {}", self.peer, head[0])))?;
        let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_FRAME {
            return Err(wire_error(format!("rank {} sent a frame of {len} bytes, past the {MAX_FRAME} a frame holds", self.peer)));
        }
        let mut payload = vec![0u8; len];
        self.stream.read_exact(&mut payload).map_err(|e| io_error(format!("reading {len} bytes from rank {}", self.peer), e))?;
        Ok((tag, payload))
    }

    /// The next frame, which must be `want` (a [`Tag::Failed`] frame is the peer's error).
    pub(crate) fn expect(&mut self, want: Tag) -> Result<Vec<u8>> {
        match self.recv()? {
            (t, p) if t == want => Ok(p),
            (Tag::Failed, p) => Err(wire_error(format!("rank {} failed: {}", self.peer, String::from_utf8_lossy(&p)))),
            (t, _) => Err(wire_error(format!("rank {} sent {t:?} where {want:?} was due", self.peer))),
        }
    }

    /// Ends the connection for every handle to it: the peer's next read fails.
    pub(crate) fn hang_up(&self) {
        let _ = self.stream.shutdown(Shutdown::Both);
    }
}

impl Rendezvous {
    fn check(&self) -> Result<()> {
        let Shard { rank, world } = self.shard;
        if world < 2 || rank >= world {
            return Err(wire_error(format!("rank {rank} of a world of {world}: a world of processes has at least 2 ranks, numbered from 0")));
        }
        Ok(())
    }

    /// Rank 0's side: listens at the address until every other rank has connected and
    /// greeted (a connection that does not greet as a rank of this world is dropped, logged);
    /// the links in rank order (ranks 1, 2, ...). Errors: an address that cannot be listened
    /// at, two ranks of the same number, ranks missing after `wait`.
    pub(crate) fn host(&self) -> Result<Vec<Link>> {
        self.check()?;
        let world = self.shard.world;
        let listener = TcpListener::bind(&self.addr).map_err(|e| io_error(format!("rank 0 cannot listen at {}", self.addr), e))?;
        listener.set_nonblocking(true).map_err(|e| io_error("a listener that waits".into(), e))?;
        let deadline = Instant::now() + self.wait;
        let mut links: Vec<Option<Link>> = (1..world).map(|_| None).collect();
        while links.iter().any(Option::is_none) {
            match listener.accept() {
                Ok((stream, from)) => match greeted(stream, world, self.wait) {
                    Ok(link) if links[link.peer - 1].is_some() => {
                        return Err(wire_error(format!("two processes say they are rank {} (the second from {from})", link.peer)));
                    }
                    Ok(link) => {
                        let r = link.peer;
                        links[r - 1] = Some(link);
                    }
                    Err(e) => log::warn!("tensor-parallel rendezvous: dropped a connection from {from}: {e}"),
                },
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let missing: Vec<usize> = links.iter().enumerate().filter(|(_, l)| l.is_none()).map(|(i, _)| i + 1).collect();
                        return Err(wire_error(format!(
                            "rank 0 waited {} s at {} for ranks {missing:?} of {world}: start them with --rank R --rendezvous {}",
                            self.wait.as_secs(),
                            self.addr,
                            self.addr
                        )));
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(io_error(format!("rank 0 accepting at {}", self.addr), e)),
            }
        }
        Ok(links.into_iter().map(|l| l.expect("every rank connected")).collect())
    }

    /// A rank's side (rank 1 and up): connects to rank 0 (trying again until `wait` has
    /// passed, as rank 0 may not listen yet) and greets it.
    pub(crate) fn join(&self) -> Result<Link> {
        self.check()?;
        let Shard { rank, world } = self.shard;
        if rank == 0 {
            return Err(wire_error("rank 0 hosts the world; it does not join it".into()));
        }
        let deadline = Instant::now() + self.wait;
        let stream = loop {
            let tried = self.addr.to_socket_addrs().map_err(|e| io_error(format!("rank {rank}: the address {}", self.addr), e)).and_then(|mut a| {
                let at = a.next().ok_or_else(|| wire_error(format!("rank {rank}: the address {} names no host", self.addr)))?;
                TcpStream::connect_timeout(&at, Duration::from_secs(5)).map_err(|e| io_error(format!("rank {rank} connecting to {}", self.addr), e))
            });
            match tried {
                Ok(s) => break s,
                Err(e) if Instant::now() >= deadline => {
                    return Err(wire_error(format!("rank {rank} found no rank 0 at {} within {} s ({e})", self.addr, self.wait.as_secs())))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        let _ = stream.set_nodelay(true);
        let mut link = Link { stream, peer: 0 };
        let mut hello = MAGIC.to_vec();
        hello.extend((rank as u32).to_le_bytes());
        hello.extend((world as u32).to_le_bytes());
        link.send(Tag::Hello, &hello)?;
        Ok(link)
    }
}

/// A connection's greeting, read within `wait`: a link to the rank it names.
fn greeted(stream: TcpStream, world: usize, wait: Duration) -> Result<Link> {
    let io = |e| io_error("a greeting".into(), e);
    stream.set_nonblocking(false).map_err(io)?;
    // a peer that connects and says nothing is dropped, not waited for
    stream.set_read_timeout(Some(wait.min(Duration::from_secs(10)))).map_err(io)?;
    let _ = stream.set_nodelay(true);
    let mut link = Link { stream, peer: usize::MAX };
    let p = link.expect(Tag::Hello)?;
    if p.len() != MAGIC.len() + 8 || &p[..MAGIC.len()] != MAGIC {
        return Err(wire_error("a greeting that is not rayo's".into()));
    }
    let n = |i: usize| u32::from_le_bytes(p[MAGIC.len() + i..MAGIC.len() + i + 4].try_into().expect("4 bytes")) as usize;
    let (rank, their_world) = (n(0), n(4));
    if their_world != world || rank == 0 || rank >= world {
        return Err(wire_error(format!("a rank {rank} of a world of {their_world} greeted rank 0 of a world of {world}")));
    }
    link.stream.set_read_timeout(None).map_err(io)?;
    link.peer = rank;
    Ok(link)
}

/// The collectives of a world of processes over its rendezvous links: rank 0 holds a link to
/// every rank, every other rank one to rank 0.
pub(crate) struct TcpGroup {
    shard: Shard,
    links: Vec<std::sync::Mutex<Link>>,
}

impl TcpGroup {
    /// Rank 0's group (`links`: ranks 1, 2, ... in order) or a rank's (`links`: its link to
    /// rank 0).
    pub(crate) fn new(shard: Shard, links: Vec<Link>) -> TcpGroup {
        TcpGroup { shard, links: links.into_iter().map(std::sync::Mutex::new).collect() }
    }

    fn link(&self, i: usize) -> std::sync::MutexGuard<'_, Link> {
        self.links[i].lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Brings `data` to a round of `op`; the round's result (every rank's, in rank order, for
    /// a gather; their sum for a sum).
    fn round(&self, op: Tag, data: &[f32]) -> Result<Vec<f32>> {
        if self.shard.rank != 0 {
            let mut l = self.link(0);
            l.send(op, &le_bytes(data))?;
            let p = l.expect(Tag::Result)?;
            return floats(&p, 0);
        }
        let mut out = data.to_vec();
        let broken = |e: Error| {
            // the others' next reads fail rather than wait for a round that will not end
            self.hang_up();
            e
        };
        for i in 0..self.links.len() {
            let mut l = self.link(i);
            let p = l.expect(op).map_err(broken)?;
            let part = floats(&p, l.peer).map_err(broken)?;
            match op {
                Tag::Sum if part.len() != data.len() => {
                    return Err(broken(wire_error(format!("rank 0 summed {} values, rank {} {}", data.len(), l.peer, part.len()))))
                }
                Tag::Sum => out.iter_mut().zip(&part).for_each(|(s, x)| *s += x),
                _ => out.extend(part),
            }
        }
        let result = le_bytes(&out);
        for i in 0..self.links.len() {
            self.link(i).send(Tag::Result, &result).map_err(broken)?;
        }
        Ok(out)
    }

    /// Ends every link (the group is broken for every rank).
    pub(crate) fn hang_up(&self) {
        for i in 0..self.links.len() {
            self.link(i).hang_up();
        }
    }
}

/// f32 values as a frame's bytes (little endian on every host).
fn le_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// f32 values from a frame's bytes.
fn floats(p: &[u8], peer: usize) -> Result<Vec<f32>> {
    if p.len() % 4 != 0 {
        return Err(wire_error(format!("rank {peer} sent {} bytes, not whole f32 values", p.len())));
    }
    Ok(p.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

impl Collective for TcpGroup {
    fn shard(&self) -> Shard {
        self.shard
    }

    fn all_reduce_sum(&self, data: &mut [f32]) -> Result<()> {
        let sum = self.round(Tag::Sum, data)?;
        if sum.len() != data.len() {
            return Err(wire_error(format!("rank {} summed {} values, rank 0 returned {}", self.shard.rank, data.len(), sum.len())));
        }
        data.copy_from_slice(&sum);
        Ok(())
    }

    fn all_gather(&self, part: &[f32], out: &mut [f32]) -> Result<()> {
        let all = self.round(Tag::Gather, part)?;
        if all.len() != out.len() {
            return Err(wire_error(format!("the parts hold {} values, rank {}'s output room {}", all.len(), self.shard.rank, out.len())));
        }
        out.copy_from_slice(&all);
        Ok(())
    }
}

impl Drop for TcpGroup {
    fn drop(&mut self) {
        // a rank whose engine is gone (ended or failed) breaks the group, as LocalGroup's do
        self.hang_up();
    }
}
