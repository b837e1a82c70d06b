//! A model file, opened: the GGUF file (mapped), its [`Config`] and its [`Weights`] (places in
//! the file). Sessions ([`crate::Session`]) run it on a backend.

use crate::config::Config;
use crate::tokenizer::Tokenizer;
use crate::weights::Weights;
use crate::{Error, Result};
use rayo::gguf::GgufFile;
use std::sync::Arc;

/// A llama-family model from a GGUF file.
pub struct Model {
    file: Arc<GgufFile>,
    config: Config,
    weights: Weights,
    tokenizer: Tokenizer,
}

impl Model {
    /// Maps and checks the file at `path`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Model> {
        Model::from_file(GgufFile::open(path)?)
    }

    /// Checks a parsed GGUF file: its architecture, hyperparameters and every tensor's
    /// presence and shape.
    pub fn from_file(file: GgufFile) -> Result<Model> {
        let vocab_rows = match file.tensor("token_embd.weight") {
            Some(t) if t.shape.len() == 2 => usize::try_from(t.shape[1]).unwrap_or(usize::MAX),
            Some(t) => return Err(Error::tensor("token_embd.weight", format!("has shape {:?}, expected 2 dimensions", t.shape))),
            None => return Err(Error::tensor("token_embd.weight", "is missing")),
        };
        let mut config = Config::from_gguf(file.metadata(), vocab_rows)?;
        config.rope_freqs = crate::weights::rope_freqs(&file, config.n_rot)?;
        config.long_rope = crate::weights::long_rope(&file, config.n_rot, config.context_length)?;
        let weights = Weights::from_gguf(&file, &config)?;
        let tokenizer = Tokenizer::from_gguf(file.metadata())?;
        if tokenizer.vocab_size() > config.vocab_size {
            return Err(Error::hyper(format!("the tokenizer has {} tokens, the embedding table {} rows", tokenizer.vocab_size(), config.vocab_size)));
        }
        Ok(Model { file: Arc::new(file), config, weights, tokenizer })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// The file (shared with the CPU backend, which reads weights from it in place).
    pub fn file(&self) -> &Arc<GgufFile> {
        &self.file
    }
}
