//! A field's position in a nested record (`employment[2].start_date`), built on the stack while
//! walking a value and turned into text only when an error needs it.

use std::fmt;

#[derive(Clone, Copy)]
pub enum FieldPath<'a> {
    Root,
    /// A top-level name given by the caller (it may itself be a whole path).
    Named(&'a str),
    Field(&'a FieldPath<'a>, &'a str),
    Element(&'a FieldPath<'a>, usize),
}

impl<'a> FieldPath<'a> {
    pub fn field(&'a self, name: &'a str) -> FieldPath<'a> {
        FieldPath::Field(self, name)
    }

    pub fn element(&'a self, index: usize) -> FieldPath<'a> {
        FieldPath::Element(self, index)
    }
}

impl fmt::Display for FieldPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldPath::Root => Ok(()),
            FieldPath::Named(name) => f.write_str(name),
            FieldPath::Field(parent, name) => {
                if matches!(parent, FieldPath::Root)
                    || matches!(parent, FieldPath::Named(n) if n.is_empty())
                {
                    f.write_str(name)
                } else {
                    write!(f, "{parent}.{name}")
                }
            }
            FieldPath::Element(parent, index) => write!(f, "{parent}[{index}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_dotted_paths() {
        let root = FieldPath::Root;
        let jobs = root.field("employment");
        let third = jobs.element(2);
        assert_eq!(
            third.field("start_date").to_string(),
            "employment[2].start_date"
        );
    }
}
