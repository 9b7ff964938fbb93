//! PLACEHOLDER being replaced: the zset type API and its commands.

/// A zset value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ZSet {
    pub placeholder: Vec<Vec<u8>>,
}

impl ZSet {
    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        "placeholder"
    }
}
