//! PLACEHOLDER being replaced: the set type API and its commands.

/// A set value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Set {
    pub placeholder: Vec<Vec<u8>>,
}

impl Set {
    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        "placeholder"
    }
}
