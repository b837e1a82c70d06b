//! What rank 0 sends a rank of another process, as bytes ([`crate::rendezvous`]'s frames
//! carry them): the engine to make ([`Spec`]), the engine's shape back, and every call. All
//! numbers little endian; a payload that is cut short, too long or holds an unknown kind is
//! an error, never a wrong call.

use super::{Call, Shape};
use crate::backend::KvType;
use crate::batch_session::BatchOptions;
use crate::model::Model;
use crate::session::{Logits, SessionOptions};
use crate::{Error, Result};

/// The engine every rank makes: a session of one sequence, or of many.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Spec {
    One(SessionOptions),
    Many(BatchOptions),
}

#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn n(&mut self, v: usize) -> &mut Self {
        self.0.extend((v as u64).to_le_bytes());
        self
    }
    fn tokens(&mut self, t: &[u32]) -> &mut Self {
        self.n(t.len());
        t.iter().for_each(|x| self.0.extend(x.to_le_bytes()));
        self
    }
}

struct In<'a> {
    p: &'a [u8],
    what: &'static str,
}

impl<'a> In<'a> {
    fn short(&self) -> Error {
        Error::TensorParallel(format!("rendezvous: a {} cut short", self.what))
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.p.len() < n {
            return Err(self.short());
        }
        let (a, b) = self.p.split_at(n);
        self.p = b;
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn n(&mut self) -> Result<usize> {
        let b = self.take(8)?;
        let v = u64::from_le_bytes(b.try_into().expect("8 bytes"));
        usize::try_from(v).map_err(|_| self.short())
    }
    fn tokens(&mut self) -> Result<Vec<u32>> {
        let n = self.n()?;
        let bytes = self.take(n.checked_mul(4).ok_or_else(|| self.short())?)?;
        Ok(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
    fn kv(&mut self) -> Result<KvType> {
        match self.u8()? {
            0 => Ok(KvType::F16),
            1 => Ok(KvType::F32),
            k => Err(self.bad(k)),
        }
    }
    fn bad(&self, kind: u8) -> Error {
        Error::TensorParallel(format!("rendezvous: a {} of unknown kind {kind}", self.what))
    }
    /// The payload must end here.
    fn end<T>(&self, v: T) -> Result<T> {
        if self.p.is_empty() {
            Ok(v)
        } else {
            Err(Error::TensorParallel(format!("rendezvous: a {} with {} bytes too many", self.what, self.p.len())))
        }
    }
}

fn kv(k: KvType) -> u8 {
    match k {
        KvType::F16 => 0,
        KvType::F32 => 1,
    }
}

/// What says two processes opened the same model: its shape and its file's layout.
fn model_print(model: &Model) -> String {
    let c = model.config();
    let f = model.file();
    format!(
        "{}, {} layers, {} wide, MLP {}, {} heads ({} KV), {} tokens, {} tensors, data at byte {}",
        c.arch.name,
        c.n_layer,
        c.n_embd,
        c.n_ff,
        c.n_head,
        c.n_head_kv,
        c.vocab_size,
        f.tensors().len(),
        f.data_offset()
    )
}

/// Rank 0's welcome: its model's print and the engine every rank makes.
pub(crate) fn welcome(model: &Model, spec: Spec) -> Vec<u8> {
    let print = model_print(model);
    let mut o = Out::default();
    o.n(print.len());
    o.0.extend(print.as_bytes());
    o.0.extend(spec.encode());
    o.0
}

/// The engine rank 0's welcome asks for, once its model is seen to be `model`.
pub(crate) fn check_welcome(model: &Model, p: &[u8]) -> Result<Spec> {
    let mut i = In { p, what: "welcome" };
    let n = i.n()?;
    let theirs = String::from_utf8_lossy(i.take(n)?).into_owned();
    let mine = model_print(model);
    if theirs != mine {
        return Err(Error::TensorParallel(format!("rank 0 runs another model ({theirs}) than this rank ({mine}): give every rank the same file")));
    }
    Spec::decode(i.p)
}

impl Spec {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut o = Out::default();
        match self {
            Spec::One(s) => o.u8(0).n(s.context).u8(kv(s.kv_type)).n(s.batch).n(s.logit_rows),
            Spec::Many(b) => o.u8(1).n(b.slots).n(b.context).u8(kv(b.kv_type)).n(b.rows),
        };
        o.0
    }

    pub(crate) fn decode(p: &[u8]) -> Result<Spec> {
        let mut i = In { p, what: "engine" };
        let s = match i.u8()? {
            0 => Spec::One(SessionOptions { context: i.n()?, kv_type: i.kv()?, batch: i.n()?, logit_rows: i.n()? }),
            1 => Spec::Many(BatchOptions { slots: i.n()?, context: i.n()?, kv_type: i.kv()?, rows: i.n()? }),
            k => return Err(i.bad(k)),
        };
        i.end(s)
    }
}

impl Shape {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut o = Out::default();
        o.n(self.context).n(self.slots).n(self.rows);
        o.0.extend(self.backend.as_bytes());
        o.0
    }

    /// A rank's shape (its backend's name as it sent it).
    pub(crate) fn decode(p: &[u8]) -> Result<(usize, usize, usize, String)> {
        let mut i = In { p, what: "engine shape" };
        let (context, slots, rows) = (i.n()?, i.n()?, i.n()?);
        Ok((context, slots, rows, String::from_utf8_lossy(i.p).into_owned()))
    }
}

impl Call {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut o = Out::default();
        match self {
            Call::Forward(t, which) => o.u8(0).u8(matches!(which, Logits::All) as u8).tokens(t),
            Call::Greedy(t) => o.u8(1).tokens(t),
            Call::TopK(t, k) => o.u8(2).n(*k).tokens(t),
            Call::Rewind(pos) => o.u8(3).n(*pos),
            Call::Step(items, best) => {
                o.u8(4).n(items.len());
                for ((slot, t), b) in items.iter().zip(best) {
                    // a wish for the best k: k + 1; none: 0
                    o.n(*slot).n(b.map_or(0, |k| k + 1)).tokens(t);
                }
                &mut o
            }
            Call::RewindSlot(slot, pos) => o.u8(5).n(*slot).n(*pos),
        };
        o.0
    }

    pub(crate) fn decode(p: &[u8]) -> Result<Call> {
        let mut i = In { p, what: "call" };
        let c = match i.u8()? {
            0 => {
                let which = if i.u8()? == 1 { Logits::All } else { Logits::Last };
                Call::Forward(i.tokens()?, which)
            }
            1 => Call::Greedy(i.tokens()?),
            2 => {
                let k = i.n()?;
                Call::TopK(i.tokens()?, k)
            }
            3 => Call::Rewind(i.n()?),
            4 => {
                let n = i.n()?;
                // each item takes at least 24 bytes: a count past that is a lie, not an allocation
                if n > i.p.len() / 24 {
                    return Err(i.short());
                }
                let (mut items, mut best) = (Vec::with_capacity(n), Vec::with_capacity(n));
                for _ in 0..n {
                    let slot = i.n()?;
                    best.push(i.n()?.checked_sub(1));
                    items.push((slot, i.tokens()?));
                }
                Call::Step(items, best)
            }
            5 => Call::RewindSlot(i.n()?, i.n()?),
            k => return Err(i.bad(k)),
        };
        i.end(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_and_specs_come_back_as_sent_and_bad_bytes_are_errors() {
        let calls = [
            Call::Forward(vec![1, 2, 3], Logits::All),
            Call::Forward(vec![7], Logits::Last),
            Call::Greedy(vec![u32::MAX]),
            Call::TopK(vec![5, 6], 40),
            Call::Rewind(9),
            Call::Step(vec![(0, vec![1, 2]), (3, vec![4])], vec![None, Some(0)]),
            Call::RewindSlot(2, 17),
        ];
        for c in &calls {
            let bytes = c.encode();
            assert_eq!(&Call::decode(&bytes).unwrap(), c);
            // every cut is an error, and so is a byte too many
            for n in 0..bytes.len() {
                assert!(Call::decode(&bytes[..n]).is_err(), "{bytes:?} cut to {n}");
            }
            let mut long = bytes.clone();
            long.push(0);
            assert!(Call::decode(&long).unwrap_err().to_string().contains("1 bytes too many"));
        }
        assert!(Call::decode(&[9]).unwrap_err().to_string().contains("call of unknown kind 9"));
        // a step that claims 2^40 items in a few bytes
        let mut lie = vec![4];
        lie.extend((1u64 << 40).to_le_bytes());
        assert!(Call::decode(&lie).unwrap_err().to_string().contains("cut short"));
        for s in [
            Spec::One(SessionOptions { context: 512, kv_type: KvType::F32, batch: 64, logit_rows: 3 }),
            Spec::Many(BatchOptions { slots: 4, context: 1024, kv_type: KvType::F16, rows: 256 }),
        ] {
            assert_eq!(Spec::decode(&s.encode()).unwrap(), s);
        }
        let shape = Shape { context: 512, backend: "cuda", slots: 4, rows: 256 };
        assert_eq!(Shape::decode(&shape.encode()).unwrap(), (512, 4, 256, "cuda".to_string()));
    }
}
