//! A recorded chain of launches replayed as one persistent kernel
//! ([`rayo::cuda::CudaDevice::persistent`]) gives the recording's bits: phases whose blocks
//! read what other blocks of the phase before wrote (a row-wise softmax and norm after
//! element-wise ops over many blocks), replayed again after the inputs change. A recording
//! with work other than kernels stays a graph, with an error that says why.
#![cfg(feature = "cuda")]

use rayo::cuda::{CudaDevice, DeviceBuffer, Expr};

mod cuda_support;
use cuda_support::*;

const ROWS: usize = 37;
const COLS: usize = 2_711;

/// The chain: element-wise over the whole input, a softmax per row, element-wise again, an
/// RMSNorm per row.
fn chain(
    dev: &CudaDevice,
    x: &DeviceBuffer,
    gamma: &DeviceBuffer,
    a: &mut DeviceBuffer,
    s: &mut DeviceBuffer,
    b: &mut DeviceBuffer,
    out: &mut DeviceBuffer,
) {
    let e = Expr::input(0).mul(Expr::input(0)).add(Expr::input(0));
    dev.elementwise(&e, &[x], a).unwrap();
    dev.softmax_rows(a, ROWS, COLS, s).unwrap();
    let e2 = Expr::input(0).mul(Expr::input(1)).add(Expr::input(1));
    dev.elementwise(&e2, &[s, x], b).unwrap();
    dev.rms_norm_rows(b, gamma, ROWS, COLS, 1e-5, out).unwrap();
}

#[test]
fn a_persistent_replay_gives_the_recordings_bits() {
    let Some(dev) = fresh_device("a_persistent_replay_gives_the_recordings_bits") else { return };
    let n = ROWS * COLS;
    let mut rng = Rng(0x9e37_79b9);
    let x = dev.upload(&rng.vec(n, -3.0, 3.0)).unwrap();
    let mut x = x;
    let gamma = dev.upload(&rng.vec(COLS, 0.5, 1.5)).unwrap();
    let (mut a, mut s, mut b, mut out) = (poisoned(&dev, n), poisoned(&dev, n), poisoned(&dev, n), poisoned(&dev, n));
    // once as it comes (loads the kernels), then recorded
    chain(&dev, &x, &gamma, &mut a, &mut s, &mut b, &mut out);
    dev.begin_capture().unwrap();
    chain(&dev, &x, &gamma, &mut a, &mut s, &mut b, &mut out);
    let g = dev.end_capture().unwrap();
    // one sub-block a block (as many blocks as fit, and one an SM: the virtual blocks dealt
    // over fewer real ones), then 2 and 4 sub-blocks side by side, each with its own shared
    // arrays and barriers
    for (subs, per_sm) in [(1, None), (1, Some(1)), (2, None), (4, Some(1))] {
        let p = dev.persistent(&g, 256, subs, per_sm).unwrap();
        println!("{subs} sub-blocks, {per_sm:?} an SM: {} launches, {} as phases, {} pieces", p.launches(), p.phases(), p.pieces());
        assert_eq!(p.phases(), p.launches(), "every launch of the chain fits blocks of 256");
        assert_eq!(p.pieces(), 1);
        for round in 0..3 {
            dev.write(&mut x, &rng.vec(n, -3.0, 3.0)).unwrap();
            // SAFETY: every buffer the recording used is alive (all of this test's, still owned).
            unsafe { g.replay().unwrap() };
            let want = dev.download(&out).unwrap();
            dev.write(&mut out, &vec![f32::NAN; n]).unwrap();
            // SAFETY: as above.
            unsafe { p.replay(&dev).unwrap() };
            let got = dev.download(&out).unwrap();
            let same = got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits());
            assert!(same, "{subs} sub-blocks, round {round}: the persistent replay's bits differ from the graph's");
        }
    }
    // blocks of 128 hold none of these 256-thread launches
    let e = dev.persistent(&g, 128, 1, None).err().expect("no launch fits 128 threads");
    assert!(e.to_string().contains("no run"), "{e}");
    // work other than kernels: a graph only
    dev.begin_capture().unwrap();
    chain(&dev, &x, &gamma, &mut a, &mut s, &mut b, &mut out);
    dev.copy_within_device(&a, 0, &mut s, 0, 16).unwrap();
    let g2 = dev.end_capture().unwrap();
    let e = dev.persistent(&g2, 256, 1, None).err().expect("a copy is not a kernel");
    assert!(e.to_string().contains("a copy on the device"), "{e}");
}
