//! PLACEHOLDER being replaced: the hash type API and its commands.

/// A hash value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Hash {
    pub placeholder: Vec<Vec<u8>>,
}

impl Hash {
    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        "placeholder"
    }
}
