//! A test-only engine fault: [`FaultAfter`] wraps an engine and fails every step after the
//! first `n`, as a sticky device fault would (a CUDA illegal address poisons the context). `rayo
//! serve` wraps its engine in one when `RAYO_TEST_ENGINE_FAULT=N` is set, so that the tests of
//! the real binary (tests/serve/test_server.py) can watch `/health` turn 503 and the server exit.

use rayo_llm::batch::{BatchForward, SlotWork, StepOut};

/// The environment variable that makes `rayo serve` fail every engine step after the first N.
pub const FAULT_ENV: &str = "RAYO_TEST_ENGINE_FAULT";

/// `inner`, failing every step after the first `ok` (see the module's documentation).
pub struct FaultAfter {
    pub inner: Box<dyn BatchForward>,
    pub ok: usize,
    steps: usize,
}

impl FaultAfter {
    pub fn new(inner: Box<dyn BatchForward>, ok: usize) -> FaultAfter {
        FaultAfter { inner, ok, steps: 0 }
    }

    fn check(&mut self) -> rayo_llm::Result<()> {
        self.steps += 1;
        if self.steps > self.ok {
            return Err(rayo_llm::Error::Batch(format!("{FAULT_ENV}: a fault injected at step {} (after {} good ones)", self.steps, self.ok)));
        }
        Ok(())
    }
}

impl BatchForward for FaultAfter {
    fn slots(&self) -> usize {
        self.inner.slots()
    }
    fn context(&self) -> usize {
        self.inner.context()
    }
    fn vocab(&self) -> usize {
        self.inner.vocab()
    }
    fn position(&self, slot: usize) -> usize {
        self.inner.position(slot)
    }
    fn rewind(&mut self, slot: usize, pos: usize) {
        self.inner.rewind(slot, pos)
    }
    fn step(&mut self, work: &[SlotWork]) -> rayo_llm::Result<Vec<Vec<f32>>> {
        self.check()?;
        self.inner.step(work)
    }
    fn step_best(&mut self, work: &[SlotWork], best: &[Option<usize>]) -> rayo_llm::Result<Vec<StepOut>> {
        self.check()?;
        self.inner.step_best(work, best)
    }
    fn backend_name(&self) -> &'static str {
        self.inner.backend_name()
    }
}
