//! `--tensor-parallel N` alone, as processes: this process is rank 0 and starts ranks 1 to
//! N-1 itself, each a process of this same binary with this command's flags and `--rank R
//! --rendezvous 127.0.0.1:PORT` added (what a launcher on several hosts gives by hand). One
//! process per GPU is how NCCL expects its ranks: the default on cuda where each rank has a
//! GPU of its own; elsewhere `--rank-processes` asks for it (else the ranks are threads of
//! this process, [`crate::llm::Ranks`]).
//!
//! The ranks it starts print nothing on stdout (rank 0 does the command's work) and their
//! stderr is this one's. Each ends when rank 0 closes its link; [`reap`] waits for them when
//! the command is done and ends any that are left.

use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The ranks this process started, until [`reap`].
static STARTED: Mutex<Vec<Child>> = Mutex::new(Vec::new());

/// How long [`reap`] waits for the ranks to end on their own once rank 0 is done.
const REAP_WAIT: Duration = Duration::from_secs(10);

/// Starts ranks 1 to `world - 1` at a free local port; returns the rendezvous address, where
/// this process (rank 0) then listens. The ranks retry connecting until rank 0 listens (the
/// rendezvous's wait), so they may start first. A rank that cannot be started is an error
/// naming it, after the ones started before it are ended.
pub fn start(world: usize) -> Result<String, String> {
    // A port the system has free now: rank 0 binds it again when it hosts, a moment later.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("a local port for the ranks to meet at: {e}"))?
        .port();
    let addr = format!("127.0.0.1:{port}");
    let exe = std::env::current_exe().map_err(|e| format!("this program's path, to start its ranks: {e}"))?;
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    for rank in 1..world {
        let child = Command::new(&exe)
            .args(&args)
            .args(["--rank", &rank.to_string(), "--rendezvous", &addr])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn();
        match child {
            Ok(c) => STARTED.lock().unwrap_or_else(|p| p.into_inner()).push(c),
            Err(e) => {
                end_all();
                return Err(format!("starting rank {rank} of {world} ({}): {e}", exe.display()));
            }
        }
    }
    Ok(addr)
}

/// Waits (up to [`REAP_WAIT`] in all) for the ranks this process started to end, then ends
/// those left: the command is done, and a rank without its rank 0 has nothing to do. After a
/// failed command (`done` false) it ends them at once: they may still be waiting for a rank 0
/// that never came.
pub fn reap(done: bool) {
    let deadline = if done { Instant::now() + REAP_WAIT } else { Instant::now() };
    let mut started = STARTED.lock().unwrap_or_else(|p| p.into_inner());
    for c in started.iter_mut() {
        while Instant::now() < deadline && matches!(c.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    drop(started);
    end_all();
}

/// Ends (and waits for) every rank still running.
fn end_all() {
    let mut started = STARTED.lock().unwrap_or_else(|p| p.into_inner());
    for mut c in started.drain(..) {
        if matches!(c.try_wait(), Ok(None)) {
            let _ = c.kill();
        }
        let _ = c.wait();
    }
}
