//! PLACEHOLDER being replaced: the list type API and its commands.

/// A list value.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct List {
    pub placeholder: Vec<Vec<u8>>,
}

impl List {
    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        "placeholder"
    }
}
