//! PLACEHOLDER being replaced: the stream type API and its commands.

/// A stream value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Stream {
    pub placeholder: Vec<Vec<u8>>,
}

impl Stream {
    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        "placeholder"
    }
}
