//! The committed llama.cpp references (tests/data/, scripts/ref/llm-refs.sh) are whole and
//! consistent with each other, so that a parity test reading them cannot pass on a truncated
//! or mismatched file.

mod llama_ref;

use llama_ref::*;

#[test]
fn greedy_files_cover_every_prompt() {
    let prompts = prompts();
    assert_eq!(prompts.len(), 8);
    assert!(prompts.iter().any(|p| p.contains("<|im_start|>")), "a ChatML prompt");
    for ty in TYPES.iter().flat_map(|t| SETTINGS.map(|s| format!("{t}{s}"))) {
        let ty = ty.as_str();
        let g = greedy(ty);
        assert_eq!(g.len(), prompts.len(), "{ty}");
        for (k, (g, p)) in g.iter().zip(&prompts).enumerate() {
            let at = format!("greedy-{ty}.txt prompt {k}");
            assert_eq!((g.index, &g.prompt), (k, p), "{at}");
            assert!(!g.prompt_ids.is_empty() && g.gen_ids.len() <= 32, "{at}");
            // 32 tokens, or fewer and then the end-of-generation token that stopped it.
            assert_eq!(g.eog.is_none(), g.gen_ids.len() == 32, "{at}");
            assert_eq!(g.gap.len(), g.gen_ids.len() + g.eog.is_some() as usize, "{at}");
            assert!(g.gap.iter().all(|x| *x >= 0.0), "{at}");
            assert!(g.prompt_ids.iter().chain(&g.gen_ids).chain(&g.eog).all(|&id| (id as usize) < VOCAB), "{at}");
            assert_eq!(g.gen_ids.is_empty(), g.text.is_empty(), "{at}");
        }
        // The tokenizer is the same in every variant.
        let first: Vec<_> = greedy("Q4_1").into_iter().map(|g| g.prompt_ids).collect();
        assert_eq!(g.iter().map(|g| g.prompt_ids.clone()).collect::<Vec<_>>(), first, "{ty}");
    }
    // Spot check against llama-tokenize: "The capital of France is".
    assert_eq!(greedy("Q4_1")[0].prompt_ids, [504, 3575, 282, 4649, 314]);
}

#[test]
fn forced_files_cover_every_position() {
    let ids = forced_ids();
    assert!(ids.len() >= 256, "{}", ids.len());
    for ty in TYPES.iter().flat_map(|t| SETTINGS.map(|s| format!("{t}{s}"))) {
        let ty = ty.as_str();
        let f = forced(ty);
        assert_eq!(f.len(), ids.len(), "forced-{ty}.txt");
        for (i, (p, &id)) in f.iter().zip(&ids).enumerate() {
            let at = format!("forced-{ty}.txt position {i}");
            assert_eq!((p.pos, p.id), (i, id), "{at}");
            assert_eq!(p.top.len(), 32, "{at}");
            assert_eq!(p.top[0].0, p.top1, "{at}");
            assert!(p.top.windows(2).all(|w| w[0].1 >= w[1].1) && p.top[0].1 <= 0.0, "{at}");
            let mass: f64 = p.top.iter().map(|t| (t.1 as f64).exp()).sum();
            assert!(mass <= 1.0 + 1e-3, "{at}: mass {mass}");
            assert!(p.top.iter().all(|t| (t.0 as usize) < VOCAB), "{at}");
        }
    }
}

/// Qwen2.5-Coder-0.5B's references (scripts/ref/llm-refs.sh qwen2): every prompt, every
/// position of its own forced-ids file, both llama.cpp settings.
#[test]
fn qwen2_files_cover_every_prompt_and_position() {
    let prompts = prompts();
    let ids = forced_ids_of(QWEN2);
    assert!(ids.len() >= 256 && ids.iter().all(|&id| (id as usize) < QWEN2_VOCAB), "{}", ids.len());
    assert_ne!(ids, forced_ids(), "Qwen2's tokenizer is not SmolLM2's");
    for s in SETTINGS {
        let ty = format!("{QWEN2}{s}");
        let g = greedy(&ty);
        assert_eq!(g.len(), prompts.len(), "{ty}");
        for (k, (g, p)) in g.iter().zip(&prompts).enumerate() {
            let at = format!("greedy-{ty}.txt prompt {k}");
            assert_eq!((g.index, &g.prompt), (k, p), "{at}");
            assert!(!g.prompt_ids.is_empty() && g.gen_ids.len() <= 32, "{at}");
            assert_eq!(g.eog.is_none(), g.gen_ids.len() == 32, "{at}");
            assert_eq!(g.gap.len(), g.gen_ids.len() + g.eog.is_some() as usize, "{at}");
            assert!(g.prompt_ids.iter().chain(&g.gen_ids).chain(&g.eog).all(|&id| (id as usize) < QWEN2_VOCAB), "{at}");
        }
        let f = forced(&ty);
        assert_eq!(f.len(), ids.len(), "forced-{ty}.txt");
        for (i, (p, &id)) in f.iter().zip(&ids).enumerate() {
            let at = format!("forced-{ty}.txt position {i}");
            assert_eq!((p.pos, p.id, p.top.len()), (i, id, 32), "{at}");
            assert_eq!(p.top[0].0, p.top1, "{at}");
            assert!(p.top.windows(2).all(|w| w[0].1 >= w[1].1) && p.top[0].1 <= 0.0, "{at}");
            assert!(p.top.iter().all(|t| (t.0 as usize) < QWEN2_VOCAB), "{at}");
        }
    }
    // The ChatML prompt's special tokens are single ids (<|im_start|> 151644, <|im_end|> 151645).
    let chat = greedy(QWEN2).into_iter().find(|g| g.prompt.starts_with("<|im_start|>")).unwrap();
    assert_eq!(chat.prompt_ids[0], 151644);
    assert_eq!(chat.prompt_ids.iter().filter(|&&id| id == 151645).count(), 2);
}
