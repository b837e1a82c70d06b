//! The LLM engine's errors: rayo's own (kernels, devices, buffers, GGUF files) wrapped, and
//! those of language models, each naming what went wrong with its numbers.

/// What can go wrong loading or running a model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// rayo's: a kernel, a device, a buffer, a GGUF file, a bad argument to an op.
    #[error(transparent)]
    Rayo(#[from] rayo::Error),
    /// A metadata key that is missing, or whose value has the wrong type or range.
    #[error("metadata key {key} {problem}")]
    Metadata { key: String, problem: String },
    /// An architecture this engine does not run.
    #[error("architecture `{arch}` is not supported (supported: {})", known.join(", "))]
    UnsupportedArchitecture { arch: String, known: Vec<&'static str> },
    /// Hyperparameters that contradict each other, or sizes computed from them that overflow.
    #[error("{what}")]
    Hyperparameters { what: String },
    /// A tensor that is missing, or whose shape or bytes contradict the metadata.
    #[error("tensor {name} {problem}")]
    Tensor { name: String, problem: String },
    /// `tokens` tokens at position `pos` do not fit a context of `context` positions.
    #[error("{tokens} tokens at position {pos} do not fit the context of {context} positions")]
    ContextFull { tokens: usize, pos: usize, context: usize },
    /// A context of `asked` positions, past the model's `max`.
    #[error("a context of {asked} positions is past the model's context_length of {max}")]
    ContextTooLong { asked: usize, max: usize },
    /// A token id past the vocabulary.
    #[error("token id {id} is past the vocabulary of {vocab} tokens")]
    TokenPastVocab { id: u32, vocab: usize },
    /// A prompt that encodes to no tokens.
    #[error("the prompt has no tokens (an empty text, and the model adds no BOS token)")]
    EmptyPrompt,
    /// A model shape, or a call, that `backend` cannot run.
    #[error("{backend} backend: {what}")]
    Backend { backend: &'static str, what: String },
    /// A tokenizer that cannot be built from a file's metadata, or text or ids it cannot
    /// encode or decode.
    #[error("tokenizer: {what}")]
    Tokenizer { what: String },
    /// A chat template that does not parse, or fails, runs past its budget, or renders nothing.
    #[error("chat template: {what}")]
    Template { what: String },
    /// Logits the sampler cannot choose from (NaN, +inf, all -inf).
    #[error("sample: {what}")]
    Logits { what: String },
    /// A CPU worker's share of a job that panicked or did not finish.
    #[error("CPU worker: {what}")]
    Worker { what: String },
    /// A batched step's work that cannot run (a slot out of range or named twice, no tokens).
    #[error("batch: {0}")]
    Batch(String),
    /// A perplexity run that cannot be computed (too few tokens, a short context, NaN logits).
    #[error("perplexity: {0}")]
    Perplexity(String),
    /// A tensor-parallel world that cannot go on: a rank that stopped or disagrees, a
    /// rendezvous that failed (`crate::collective`, `crate::rendezvous`).
    #[error("tensor parallelism: {0}")]
    TensorParallel(String),
}

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A backend's error (`backend` as `--backend` spells it).
    pub(crate) fn backend(backend: &'static str, what: impl Into<String>) -> Error {
        Error::Backend { backend, what: what.into() }
    }

    /// A tensor's error.
    pub(crate) fn tensor(name: impl Into<String>, problem: impl Into<String>) -> Error {
        Error::Tensor { name: name.into(), problem: problem.into() }
    }

    /// A hyperparameter error.
    pub(crate) fn hyper(what: impl Into<String>) -> Error {
        Error::Hyperparameters { what: what.into() }
    }
}
