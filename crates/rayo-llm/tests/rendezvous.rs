//! A tensor-parallel world of processes ([`rayo_llm::rendezvous`]): rank 0 hosts at a TCP
//! address ([`TensorParallel::host`], [`TensorParallelBatch::host`]), every other rank joins
//! it ([`serve_rank`]). Here the other ranks are threads that reach rank 0 only through their
//! sockets, as a process would (crates/rayo-cli/tests/llm.rs runs real processes). The world
//! must give the same bits as the same world of threads, and every way a rendezvous goes
//! wrong must be an error that names it, never a wait that does not end.

mod tiny;

use rayo::quant::GgmlType;
use rayo_llm::cpu::Cpu;
use rayo_llm::{
    serve_rank, BatchForward, BatchOptions, Forward, KvType, Logits, Model, Rendezvous, SessionOptions, Shard, SlotWork, TensorParallel,
    TensorParallelBatch,
};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tiny::*;

/// A free port on this host's loopback (as a launcher would pick one).
fn address() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    format!("127.0.0.1:{}", l.local_addr().unwrap().port())
}

fn rv(addr: &str, rank: usize, world: usize, wait_s: u64) -> Rendezvous {
    Rendezvous { addr: addr.into(), shard: Shard { rank, world }, wait: Duration::from_secs(wait_s) }
}

fn cpu(part: &Model, group: Box<dyn rayo_llm::collective::Collective>) -> rayo_llm::Result<Cpu> {
    Ok(Cpu::new(part.file().clone(), 1).with_group(group))
}

/// Ranks 1.. of a world of `world` at `addr`, each on its own thread with its own copy of the
/// model `model_of(arch, ty)` (as a process opens its own file).
fn join_all(arch: Arch, ty: GgmlType, addr: &str, world: usize) -> Vec<JoinHandle<rayo_llm::Result<()>>> {
    (1..world)
        .map(|rank| {
            let rv = rv(addr, rank, world, 20);
            std::thread::spawn(move || serve_rank(&model_of(arch, ty), &rv, cpu))
        })
        .collect()
}

/// A world of 2 processes gives the world of 2 threads' logits bit for bit (rank 0 sums the
/// parts in rank order, as the threads do), one sequence and batched; when rank 0 is done
/// the other ranks end cleanly.
#[test]
fn a_world_of_processes_gives_the_world_of_threads_logits() {
    let m = model_of(Arch::Qwen3, GgmlType::Q8_0);
    let tokens: Vec<u32> = (0..12u32).map(|i| (i * 37 + 5) % 256).collect();
    let opts = SessionOptions { kv_type: KvType::F32, ..SessionOptions::default() };
    let mut threads = TensorParallel::start(&m, 2, opts, cpu).unwrap();
    let addr = address();
    let others = join_all(Arch::Qwen3, GgmlType::Q8_0, &addr, 2);
    let mut procs = TensorParallel::host(&m, &rv(&addr, 0, 2, 20), opts, cpu).unwrap();
    assert_eq!((procs.world(), procs.context(), procs.backend_name()), (2, CTX, "cpu"));
    assert_eq!(procs.forward(&tokens, Logits::All).unwrap(), threads.forward(&tokens, Logits::All).unwrap());
    procs.rewind(4);
    threads.rewind(4);
    for t in [7, 9, 11] {
        assert_eq!(procs.forward_greedy(&[t]).unwrap(), threads.forward_greedy(&[t]).unwrap());
    }
    assert_eq!(procs.forward_top_k(&[3], 3).unwrap(), threads.forward_top_k(&[3], 3).unwrap());
    // refused before any rank runs: the world goes on
    assert!(procs.forward(&[VOCAB as u32], Logits::Last).unwrap_err().to_string().contains("past the vocabulary"));
    assert_eq!(procs.forward(&[5], Logits::Last).unwrap(), threads.forward(&[5], Logits::Last).unwrap());
    drop(procs);
    for o in others {
        o.join().unwrap().unwrap();
    }

    let m = model_of(Arch::Llama, GgmlType::F32);
    let opts = BatchOptions { slots: 2, context: CTX, kv_type: KvType::F32, rows: 32 };
    let addr = address();
    let others = join_all(Arch::Llama, GgmlType::F32, &addr, 3);
    let mut procs = TensorParallelBatch::host(&m, &rv(&addr, 0, 3, 20), opts, cpu);
    // llama's tiny model has 4 heads: a world of 3 cannot split it, on either side
    assert!(procs.as_ref().err().unwrap().to_string().contains("cannot split the 4 query heads"));
    for o in others {
        assert!(o.join().unwrap().unwrap_err().to_string().contains("cannot split"));
    }
    let others = join_all(Arch::Llama, GgmlType::F32, &addr, 2);
    procs = TensorParallelBatch::host(&m, &rv(&addr, 0, 2, 20), opts, cpu);
    let mut procs = procs.unwrap();
    let mut threads = TensorParallelBatch::start(&m, 2, opts, cpu).unwrap();
    let steps: [&[(usize, &[u32])]; 2] = [&[(0, &[1, 2, 3]), (1, &[9])], &[(0, &[4]), (1, &[5, 6])]];
    for items in steps {
        let work: Vec<SlotWork> = items.iter().map(|&(slot, tokens)| SlotWork { slot, tokens }).collect();
        assert_eq!(procs.step(&work).unwrap(), threads.step(&work).unwrap());
    }
    procs.rewind(1, 1);
    assert_eq!(procs.position(1), 1);
    drop(procs);
    for o in others {
        o.join().unwrap().unwrap();
    }
}

/// Every way a rendezvous fails is an error naming what went wrong, within the wait given.
#[test]
fn a_rendezvous_that_goes_wrong_is_an_error_that_names_it() {
    let m = model_of(Arch::Qwen3, GgmlType::Q8_0);
    let opts = SessionOptions::default();

    // nobody comes: rank 0 names the missing ranks and how to start them
    let addr = address();
    let t = Instant::now();
    let e = TensorParallel::host(&m, &rv(&addr, 0, 2, 1), opts, cpu).err().unwrap().to_string();
    assert!(e.contains(&format!("waited 1 s at {addr} for ranks [1] of 2")) && e.contains("--rank"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10));
    // no rank 0
    let e = serve_rank(&m, &rv(&addr, 1, 2, 1), cpu).unwrap_err().to_string();
    assert!(e.contains(&format!("rank 1 found no rank 0 at {addr} within 1 s")), "{e}");
    // a world of one process, a rank past the world
    assert!(serve_rank(&m, &rv(&addr, 2, 2, 1), cpu).unwrap_err().to_string().contains("rank 2 of a world of 2"));
    assert!(serve_rank(&m, &rv(&addr, 0, 2, 1), cpu).unwrap_err().to_string().contains("rank 0 hosts the world"));

    // a stranger that connects first, says nothing rayo's, and goes: dropped; the world meets
    let addr = address();
    let stranger = {
        let addr = addr.clone();
        std::thread::spawn(move || loop {
            if let Ok(mut s) = TcpStream::connect(&addr) {
                let _ = s.write_all(b"GET / HTTP/1.1\r\n\r\n");
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        })
    };
    let later = {
        let addr = addr.clone();
        std::thread::spawn(move || {
            stranger.join().unwrap();
            serve_rank(&model_of(Arch::Qwen3, GgmlType::Q8_0), &rv(&addr, 1, 2, 20), cpu)
        })
    };
    let mut w = TensorParallel::host(&m, &rv(&addr, 0, 2, 20), opts, cpu).unwrap();
    w.forward(&[1, 2], Logits::Last).unwrap();
    drop(w);
    later.join().unwrap().unwrap();

    // a rank on another model: both sides say so
    let addr = address();
    let t = {
        let addr = addr.clone();
        std::thread::spawn(move || serve_rank(&model_of(Arch::Llama, GgmlType::F32), &rv(&addr, 1, 2, 20), cpu))
    };
    let e = TensorParallel::host(&m, &rv(&addr, 0, 2, 20), opts, cpu).err().unwrap().to_string();
    assert!(e.contains("rank 1 failed") && e.contains("another model"), "{e}");
    assert!(t.join().unwrap().unwrap_err().to_string().contains("give every rank the same file"));

    // a rank that greets and then goes away: rank 0's first call fails, it does not hang
    let addr = address();
    let ghost = {
        let addr = addr.clone();
        std::thread::spawn(move || loop {
            if let Ok(mut s) = TcpStream::connect(&addr) {
                let mut hello = vec![1u8];
                hello.extend(16u32.to_le_bytes());
                hello.extend(b"rayo-tp1");
                hello.extend(1u32.to_le_bytes());
                hello.extend(2u32.to_le_bytes());
                s.write_all(&hello).unwrap();
                // the welcome comes; then this "rank" is gone without a word
                let mut head = [0u8; 5];
                s.read_exact(&mut head).unwrap();
                let mut welcome = vec![0u8; u32::from_le_bytes(head[1..].try_into().unwrap()) as usize];
                s.read_exact(&mut welcome).unwrap();
                return head[0];
            }
            std::thread::sleep(Duration::from_millis(10));
        })
    };
    let e = TensorParallel::host(&m, &rv(&addr, 0, 2, 20), opts, cpu).err().unwrap().to_string();
    assert!(e.contains("rank 1 hung up"), "{e}");
    assert_eq!(ghost.join().unwrap(), 2, "the welcome's tag");
}
