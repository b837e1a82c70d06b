//! NCCL through `rayo::cuda::nccl`, its library opened at run time. Without the library (CI):
//! every entry point is an error naming what was tried, never a panic. With it and a device
//! (the GPU machine; `RAYO_NCCL_LIBRARY` can point at PyTorch's `libnccl.so.2`): a world of
//! one rank sums and gathers on the device, in place and by length; two ranks, on two GPUs
//! where the machine has them (else both on one, which NCCL refuses: both ranks get the error,
//! neither waits). `RAYO_REQUIRE_NCCL=1` turns a missing library into a failure; without it a
//! test that needs one prints a `SKIP nccl:` line.
#![cfg(feature = "cuda")]

use rayo::cuda::nccl::{self, Communicator};
use rayo::cuda::{CudaDevice, DeviceBuffer, Expr};
use rayo::Error;

mod cuda_support;
use cuda_support::*;

/// The library, or a skip line (a failure under `RAYO_REQUIRE_NCCL=1`).
fn library(test: &str) -> bool {
    match nccl::library() {
        Ok(path) => {
            println!("nccl: {path}, version {}", nccl::version().unwrap());
            true
        }
        Err(e) => {
            assert!(std::env::var("RAYO_REQUIRE_NCCL").map(|v| v != "1").unwrap_or(true), "RAYO_REQUIRE_NCCL=1 but {e}");
            println!("SKIP nccl: {test} ({e})");
            false
        }
    }
}

#[test]
fn a_missing_library_is_an_error_naming_what_was_tried() {
    match nccl::unique_id() {
        Ok(_) => println!("nccl present: {}", nccl::library().unwrap()),
        Err(Error::NoDevice { api, reason }) => {
            assert_eq!(api, "nccl");
            assert!(reason.contains("tried") && reason.contains("RAYO_NCCL_LIBRARY"), "{reason}");
            assert!(nccl::version().is_err() && nccl::library().is_err());
            println!("no NCCL, as an error: {reason}");
        }
        Err(other) => panic!("expected NoDevice, got {other}"),
    }
}

#[test]
fn a_world_of_one_sums_and_gathers_on_the_device() {
    let Some(dev) = device("nccl world of one") else { return };
    if !library("a_world_of_one_sums_and_gathers_on_the_device") {
        return;
    }
    let id = nccl::unique_id().unwrap();
    let mut comm = Communicator::new(dev, &id, 0, 1).unwrap();
    assert_eq!((comm.rank(), comm.world()), (0, 1));
    let x: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5 - 3.0).collect();
    // the sum of one rank is its values: the first 999, the last one left as it was
    let mut buf = dev.upload(&x).unwrap();
    comm.all_reduce_sum(dev, &mut buf, 999).unwrap();
    assert_eq!(dev.download(&buf).unwrap(), x);
    let mut out = dev.upload(&vec![f32::NAN; 1200]).unwrap();
    comm.all_gather(dev, &buf, 700, &mut out).unwrap();
    let got = dev.download(&out).unwrap();
    assert_eq!(&got[..700], &x[..700]);
    assert!(got[700..].iter().all(|v| v.is_nan()), "past the gathered values: untouched");
    // lengths past the buffers: errors, nothing queued
    assert!(matches!(comm.all_reduce_sum(dev, &mut buf, 1001), Err(Error::LengthMismatch { .. })));
    assert!(matches!(comm.all_gather(dev, &buf, 1201, &mut out), Err(Error::LengthMismatch { .. })));
    // another device value's buffers (another stream): refused
    let other = CudaDevice::new().unwrap();
    let mut foreign = other.upload(&x).unwrap();
    assert!(matches!(comm.all_reduce_sum(&other, &mut foreign, 10), Err(Error::ForeignBuffer { .. })));
    // a rank past its world
    assert!(Communicator::new(dev, &id, 1, 1).is_err());
    recorded_sum(dev, &mut comm, 1, &x);
}

/// A step with a sum in it (`2x`, summed over the world, then `+ 1`), run once as it comes,
/// then recorded as a CUDA graph and replayed on new inputs: the replay's values are the
/// world's sum, as a tensor-parallel rank's recorded step needs; the recording cannot become
/// a persistent kernel (a collective is not a kernel), and says so. `x` is this rank's input;
/// every rank of the `world` adds the same.
fn recorded_sum(dev: &CudaDevice, comm: &mut Communicator, world: usize, x: &[f32]) {
    let n = x.len();
    let (mut input, mut y, mut z) = (dev.upload(x).unwrap(), dev.zeros(n).unwrap(), dev.zeros(n).unwrap());
    let twice = Expr::input(0).add(Expr::input(0));
    let plus_one = Expr::input(0).add(Expr::constant(1.0));
    let mut step = |input: &DeviceBuffer, y: &mut DeviceBuffer, z: &mut DeviceBuffer| {
        dev.elementwise(&twice, &[input], y).unwrap();
        comm.all_reduce_sum(dev, y, n).unwrap();
        dev.elementwise(&plus_one, &[y], z).unwrap();
    };
    step(&input, &mut y, &mut z);
    dev.begin_capture().unwrap();
    step(&input, &mut y, &mut z);
    let g = dev.end_capture().unwrap();
    for round in 1..=3 {
        let new: Vec<f32> = x.iter().map(|v| v * round as f32 - 0.25).collect();
        dev.write(&mut input, &new).unwrap();
        dev.write(&mut z, &vec![f32::NAN; n]).unwrap();
        // SAFETY: every buffer the recording used (`input`, `y`, `z`) is alive and owned here.
        unsafe { g.replay().unwrap() };
        let got = dev.download(&z).unwrap();
        let want: Vec<f32> = new.iter().map(|v| (v + v) * world as f32 + 1.0).collect();
        assert_eq!(got, want, "round {round} of the recorded sum over {world} ranks");
    }
    let e = dev.persistent(&g, 256, 1, None).err().expect("a collective is not a kernel");
    assert!(e.to_string().contains("a collective"), "{e}");
    println!("nccl: a recorded sum over {world} ranks replayed");
}

#[test]
fn two_ranks_sum_on_two_gpus_and_are_refused_on_one() {
    let Some(_) = device("nccl two ranks") else { return };
    if !library("two_ranks_sum_on_two_gpus_and_are_refused_on_one") {
        return;
    }
    let gpus = rayo::cuda::device_count();
    let id = nccl::unique_id().unwrap();
    let ranks: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || -> rayo::Result<Vec<f32>> {
                let dev = CudaDevice::with_ordinal(rank % gpus)?;
                let mut comm = Communicator::new(&dev, &id, rank, 2)?;
                let mut buf = dev.upload(&[1.0 + rank as f32, -0.0, 1e30 * rank as f32])?;
                comm.all_reduce_sum(&dev, &mut buf, 3)?;
                let summed = dev.download(&buf)?;
                if gpus >= 2 {
                    // every rank adds the same inputs, so the world's sum is 2× its own
                    recorded_sum(&dev, &mut comm, 2, &[0.5, -3.0, 7.25, 1e-3]);
                }
                Ok(summed)
            })
        })
        .collect();
    let got: Vec<_> = ranks.into_iter().map(|t| t.join().unwrap()).collect();
    if gpus >= 2 {
        for g in got {
            assert_eq!(g.unwrap(), vec![3.0, -0.0, 1e30]);
        }
        println!("nccl: 2 ranks on 2 GPUs summed");
    } else {
        for g in &got {
            match g {
                Ok(v) => println!("nccl: 2 ranks on one GPU summed (this NCCL allows it): {v:?}"),
                Err(e) => println!("nccl: 2 ranks on one GPU refused: {e}"),
            }
        }
        assert!(got.iter().all(Result::is_ok) || got.iter().all(Result::is_err), "{got:?}");
    }
}
