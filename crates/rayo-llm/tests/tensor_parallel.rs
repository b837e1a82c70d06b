//! Tensor parallelism's split ([`rayo_llm::shard`]) on the CPU: the small models of every
//! architecture ([`tiny`]) cut over ranks that are threads of this process, whose combined
//! logits must be the whole model's; the worlds and files that cannot be split, as errors
//! naming the numbers; [`TensorParallel`] and [`TensorParallelBatch`] as one engine.

mod tiny;

use rayo::quant::{Activations, GgmlType};
use rayo_llm::collective::{Collective, LocalGroup};
use rayo_llm::cpu::Cpu;
use rayo_llm::shard::{self, Shard};
use rayo_llm::{
    BatchForward, BatchOptions, BatchSession, Forward, KvType, Logits, Model, Session, SessionOptions, SlotWork, StepOut, TensorParallel,
    TensorParallelBatch,
};
use tiny::*;

/// Each rank's logits for `tokens` (all of them in one forward, then again one token at a
/// time), `model` split over `world` ranks, each a thread with its CPU backend.
fn ranks_logits(model: &Model, world: usize, act: Activations, tokens: &[u32]) -> Vec<(Vec<f32>, Vec<f32>)> {
    std::thread::scope(|scope| {
        let ranks: Vec<_> = LocalGroup::new(world)
            .into_iter()
            .map(|group| {
                scope.spawn(move || {
                    let part = shard::split(model, group.shard()).unwrap();
                    let cpu = Cpu::new(part.file().clone(), 1).with_activations(act).with_group(Box::new(group));
                    let mut s = Session::new(&part, cpu, SessionOptions { kv_type: KvType::F32, ..SessionOptions::default() }).unwrap();
                    let all = s.forward(tokens, Logits::All).unwrap();
                    s.rewind(0);
                    let one: Vec<f32> = tokens.iter().flat_map(|&t| s.forward(&[t], Logits::Last).unwrap()).collect();
                    (all, one)
                })
            })
            .collect();
        ranks.into_iter().map(|r| r.join().unwrap()).collect()
    })
}

/// The whole (unsplit) model's logits for `tokens`, all of them in one forward.
fn whole_logits(model: &Model, act: Activations, tokens: &[u32]) -> Vec<f32> {
    let options = SessionOptions { kv_type: KvType::F32, ..SessionOptions::default() };
    let mut whole = Session::new(model, Cpu::new(model.file().clone(), 1).with_activations(act), options).unwrap();
    whole.forward(tokens, Logits::All).unwrap()
}

/// Every rank's logits (batched, and one token at a time) are rank 0's, and within `bound`
/// of `want` (the whole model's) relative to its largest; `bound(what)` for "batched" or
/// "one at a time".
fn assert_each_rank_is_the_whole(label: &str, ranks: &[(Vec<f32>, Vec<f32>)], want: &[f32], bound: impl Fn(&str) -> f32) {
    let scale = want.iter().fold(0f32, |a, b| a.max(b.abs()));
    for (rank, (all, one)) in ranks.iter().enumerate() {
        assert_eq!((all, one), (&ranks[0].0, &ranks[0].1), "{label}: rank {rank} of {} differs from rank 0", ranks.len());
        for (what, got) in [("batched", all), ("one at a time", one)] {
            let e = got.iter().zip(want).map(|(g, w)| (g - w).abs()).fold(0f32, f32::max) / scale;
            assert!(e <= bound(what), "{label}, {} ranks, {what}: {e}", ranks.len());
        }
    }
}

/// Tensor parallelism's split ([`shard`]): every architecture's model cut over 2 ranks (heads,
/// the MLP's width, the head's vocabulary rows; fused tensors part by part) gives each rank the
/// whole model's logits, within the rounding of partial sums added in another order: batched
/// and one token at a time, on f32 weights and on 8-bit ones with 8-bit activations (whose
/// blocks each rank's columns keep whole). Each rank's embedding table is its vocabulary rows
/// and a zero row. A world of 1 is the whole model, bit for bit.
#[test]
fn tensor_parallel_ranks_give_the_whole_model_s_logits() {
    let tokens: Vec<u32> = (0..12u32).map(|i| (i * 37 + 5) % 256).collect();
    let runs = [
        (Arch::Llama, GgmlType::F32),
        (Arch::Qwen2, GgmlType::F32),
        (Arch::Qwen3, GgmlType::F32),
        (Arch::Gemma3, GgmlType::F32),
        (Arch::Phi3, GgmlType::F32),
        (Arch::Llama3, GgmlType::F32),
        (Arch::Qwen3, GgmlType::Q8_0),
        (Arch::Gemma3, GgmlType::Q8_0),
    ];
    for (arch, ty) in runs {
        let m = model_of(arch, ty);
        let act = if ty == GgmlType::F32 { Activations::F32 } else { Activations::Quantized };
        let want = whole_logits(&m, act, &tokens);
        for world in [1, 2] {
            // each rank holds its rows of the embedding table (and a zero row), not all of them
            for rank in 0..world {
                let shard = Shard { rank, world };
                let part = shard::split(&m, shard).unwrap();
                let rows = part.file().tensor("token_embd.weight").unwrap().shape[1] as usize;
                let vocab = m.config().vocab_size;
                assert_eq!(rows, if world == 1 { vocab } else { shard.part(vocab).len() + 1 }, "{arch:?}: rank {rank} of {world}'s embedding rows");
            }
            let ranks = ranks_logits(&m, world, act, &tokens);
            let bound = |what: &str| if world == 1 && what == "batched" { 0.0 } else { 2e-5 };
            assert_each_rank_is_the_whole(&format!("{arch:?} {ty:?}"), &ranks, &want, bound);
        }
    }
}

/// `arch`'s small model with as many key/value heads as query heads ([`HEADS`]): each layer's
/// K and V rows (and biases) twice over, so a world of 4 ranks can split them.
fn model_of_4_kv_heads(arch: Arch) -> Model {
    let kv = KV_HEADS * arch.hd();
    let file = gguf(&Weights::random_of(arch), GgmlType::F32, |g, tensors| {
        g.set(format!("{}.attention.head_count_kv", arch.name()), HEADS as u32);
        for (name, rows, cols, v) in tensors.iter_mut() {
            let k_or_v = name.contains(".attn_k.") || name.contains(".attn_v.");
            if k_or_v && *rows == kv {
                *rows *= 2;
                *v = [v.as_slice(), v.as_slice()].concat();
            } else if k_or_v && *rows == 1 && *cols == kv {
                *cols *= 2;
                *v = [v.as_slice(), v.as_slice()].concat();
            }
        }
    });
    Model::from_file(file).unwrap()
}

/// A world of 4 ranks (each one query head and one key/value head, a quarter of the MLP's
/// width, the vocabulary's 257 rows as 64 + 64 + 64 + 65) gives each rank the whole model's
/// logits, batched and one token at a time, for the architectures whose K and V are tensors of
/// their own.
#[test]
fn four_ranks_give_the_whole_model_s_logits() {
    let tokens: Vec<u32> = (0..12u32).map(|i| (i * 53 + 11) % 256).collect();
    for arch in [Arch::Llama, Arch::Qwen2, Arch::Qwen3, Arch::Gemma3, Arch::Llama3] {
        let m = model_of_4_kv_heads(arch);
        assert_eq!(m.config().n_head_kv, HEADS, "{arch:?}");
        let want = whole_logits(&m, Activations::F32, &tokens);
        let parts: Vec<usize> = (0..4).map(|rank| Shard { rank, world: 4 }.part(m.config().vocab_size).len()).collect();
        assert_eq!(parts, [64, 64, 64, 65]);
        let ranks = ranks_logits(&m, 4, Activations::F32, &tokens);
        assert_each_rank_is_the_whole(&format!("{arch:?}"), &ranks, &want, |_| 2e-5);
    }
}

#[test]
fn models_that_ranks_cannot_split_are_errors_naming_the_numbers() {
    let m = model_of(Arch::Llama, GgmlType::F32);
    let err = |world: usize| shard::split(&m, Shard { rank: 0, world }).err().unwrap().to_string();
    assert!(err(3).contains("cannot split the 4 query heads evenly (worlds that can: 1, 2, 4)"), "{}", err(3));
    assert!(err(4).contains("cannot split the 2 key/value heads"), "{}", err(4));
    assert!(err(0).contains("0 ranks"), "{}", err(0));
    assert!(shard::split(&m, Shard { rank: 2, world: 2 }).err().unwrap().to_string().contains("rank 2 is not below the world size 2"));
    // 8-bit blocks of 32 values: llama's 32-wide attention output cut at column 16
    let q8 = model_of(Arch::Llama, GgmlType::Q8_0);
    let e = shard::split(&q8, Shard { rank: 0, world: 2 }).err().unwrap().to_string();
    assert!(e.contains("blk.0.attn_output.weight") && e.contains("Q8_0 blocks of 32 values") && e.contains("cut at column 16"), "{e}");
    // a rank's part runs only on a backend of that rank, and a whole model on none of several
    let part = shard::split(&m, Shard { rank: 1, world: 2 }).unwrap();
    assert_eq!(part.config().shard, Shard { rank: 1, world: 2 });
    assert_eq!((part.config().n_head, part.config().n_head_kv, part.config().n_ff), (HEADS / 2, KV_HEADS / 2, FF / 2));
    let e = Session::new(&part, Cpu::new(part.file().clone(), 1), SessionOptions::default()).err().unwrap().to_string();
    assert!(e.contains("the model is rank 1 of 2, but the cpu backend runs a whole model"), "{e}");
    let e = shard::split(&part, Shard { rank: 0, world: 2 }).err().unwrap().to_string();
    assert!(e.contains("already rank 1 of 2"), "{e}");
    let mut group = LocalGroup::new(2);
    let e =
        Session::new(&m, Cpu::new(m.file().clone(), 1).with_group(Box::new(group.remove(0))), SessionOptions::default()).err().unwrap().to_string();
    assert!(e.contains("the model is a whole model, but the cpu backend runs rank 0 of 2"), "{e}");
    // a rank's file with one of the two keys, or a rank past its world
    let edit = |rank: Option<u32>, world: Option<u32>| {
        model_error(move |g, _| {
            if let Some(r) = rank {
                g.set(shard::RANK_KEY, r);
            }
            if let Some(w) = world {
                g.set(shard::WORLD_KEY, w);
            }
        })
    };
    assert!(edit(Some(0), None).contains("rayo.tensor_parallel.world is missing"));
    assert!(edit(None, Some(2)).contains("rayo.tensor_parallel.rank is missing"));
    assert!(edit(Some(3), Some(2)).contains("rank 3 is not below the world size 2"));
    assert!(edit(Some(0), Some(2)).contains("output.weight is missing: rank 0 of 2"), "{}", edit(Some(0), Some(2)));
}

/// [`TensorParallel`]: a world of rank threads as one [`Forward`] gives the whole model's
/// logits and greedy tokens; an input it refuses leaves the world running.
#[test]
fn a_tensor_parallel_world_is_one_forward() {
    let m = model_of(Arch::Qwen3, GgmlType::Q8_0);
    let tokens: Vec<u32> = (0..12u32).map(|i| (i * 37 + 5) % 256).collect();
    let opts = SessionOptions { kv_type: KvType::F32, ..SessionOptions::default() };
    let mut world = TensorParallel::start(&m, 2, opts, |part, group| Ok(Cpu::new(part.file().clone(), 1).with_group(group))).unwrap();
    assert_eq!((world.world(), world.vocab(), world.context(), world.backend_name()), (2, VOCAB, CTX, "cpu"));
    let ranks = ranks_logits(&m, 2, Activations::Quantized, &tokens);
    assert_eq!(world.forward(&tokens, Logits::All).unwrap(), ranks[0].0);
    let mut whole = Session::new(&m, Cpu::new(m.file().clone(), 1), opts).unwrap();
    world.rewind(4);
    whole.forward(&tokens[..4], Logits::Last).unwrap();
    for _ in 0..6 {
        let (t, w) = (world.forward_greedy(&[7]).unwrap(), whole.forward_greedy(&[7]).unwrap());
        assert_eq!(t, w);
    }
    assert_eq!(world.position(), 10);
    let e = world.forward(&[1; 20], Logits::Last).unwrap_err().to_string();
    assert!(e.contains("20 tokens at position 10 do not fit the context of 24"), "{e}");
    assert!(world.forward(&[VOCAB as u32], Logits::Last).unwrap_err().to_string().contains("past the vocabulary"));
    assert_eq!(world.forward_top_k(&[3], 2).unwrap(), whole.forward_top_k(&[3], 2).unwrap());
    // a world the model's heads cannot be split into
    let e = TensorParallel::start(&m, 3, opts, |part, group| Ok(Cpu::new(part.file().clone(), 1).with_group(group))).err().unwrap().to_string();
    assert!(e.contains("cannot split the 4 query heads"), "{e}");
}

/// [`TensorParallelBatch`]: a world of rank threads as one [`BatchForward`] (what `rayo serve
/// --tensor-parallel` runs) gives a step of several sequences the whole model's logits; its
/// input checks run before any rank.
#[test]
fn a_tensor_parallel_world_runs_batched_steps() {
    let m = model_of(Arch::Llama, GgmlType::F32);
    let opts = BatchOptions { slots: 3, context: CTX, kv_type: KvType::F32, rows: 32 };
    let start = |part: &Model, group| Ok(Cpu::new(part.file().clone(), 1).with_activations(Activations::F32).with_group(group));
    let mut world = TensorParallelBatch::start(&m, 2, opts, start).unwrap();
    let mut whole = BatchSession::new(&m, Cpu::new(m.file().clone(), 1).with_activations(Activations::F32), opts).unwrap();
    assert_eq!((world.slots(), world.context(), world.vocab()), (3, CTX, VOCAB));
    let steps: [&[(usize, &[u32])]; 3] = [&[(0, &[1, 2, 3]), (2, &[9])], &[(0, &[4]), (1, &[5, 6]), (2, &[7])], &[(1, &[8])]];
    for items in steps {
        let work: Vec<SlotWork> = items.iter().map(|&(slot, tokens)| SlotWork { slot, tokens }).collect();
        let (got, want) = (world.step(&work).unwrap(), whole.step(&work).unwrap());
        for (g, w) in got.iter().zip(&want) {
            let e = g.iter().zip(w).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(e < 1e-4, "{e}");
        }
    }
    assert_eq!((world.position(0), world.position(1), world.position(2)), (4, 3, 2));
    world.rewind(0, 1);
    assert_eq!(world.position(0), 1);
    let e = world.step(&[SlotWork { slot: 3, tokens: &[1] }]).unwrap_err().to_string();
    assert!(e.contains("slot 3 named, the batch has 3 slots"), "{e}");
    let e = world.step(&[SlotWork { slot: 1, tokens: &[1; 40] }]).unwrap_err().to_string();
    assert!(e.contains("do not fit the context") || e.contains("past the 32 a step runs"), "{e}");
    // the world still runs after refusing them
    let best = world.step_best(&[SlotWork { slot: 2, tokens: &[3] }], &[Some(2)]).unwrap();
    assert!(matches!(&best[0], StepOut::Best(Ok(b)) if b.len() == 2));
}
