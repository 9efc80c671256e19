//! The 22 TPC-H queries, committed as `bench/tpch/queries/qNN.sql` with `{{NAME}}` placeholders
//! for their substitution parameters and compiled into the binary from there, and their
//! instantiation with a set of parameters.
//!
//! The texts are the specification's with two kinds of change, both answer-preserving: Q15's
//! view is a common table expression, and queries that end in a LIMIT order ties by a key as
//! well, so every system returns the same rows.

use super::params::Parameters;

/// The templates, Q1 first.
pub const TEMPLATES: [&str; 22] = [
    include_str!("../../../../bench/tpch/queries/q01.sql"),
    include_str!("../../../../bench/tpch/queries/q02.sql"),
    include_str!("../../../../bench/tpch/queries/q03.sql"),
    include_str!("../../../../bench/tpch/queries/q04.sql"),
    include_str!("../../../../bench/tpch/queries/q05.sql"),
    include_str!("../../../../bench/tpch/queries/q06.sql"),
    include_str!("../../../../bench/tpch/queries/q07.sql"),
    include_str!("../../../../bench/tpch/queries/q08.sql"),
    include_str!("../../../../bench/tpch/queries/q09.sql"),
    include_str!("../../../../bench/tpch/queries/q10.sql"),
    include_str!("../../../../bench/tpch/queries/q11.sql"),
    include_str!("../../../../bench/tpch/queries/q12.sql"),
    include_str!("../../../../bench/tpch/queries/q13.sql"),
    include_str!("../../../../bench/tpch/queries/q14.sql"),
    include_str!("../../../../bench/tpch/queries/q15.sql"),
    include_str!("../../../../bench/tpch/queries/q16.sql"),
    include_str!("../../../../bench/tpch/queries/q17.sql"),
    include_str!("../../../../bench/tpch/queries/q18.sql"),
    include_str!("../../../../bench/tpch/queries/q19.sql"),
    include_str!("../../../../bench/tpch/queries/q20.sql"),
    include_str!("../../../../bench/tpch/queries/q21.sql"),
    include_str!("../../../../bench/tpch/queries/q22.sql"),
];

/// Query `number` (1..=22) with its placeholders replaced by `parameters`. Fails naming a
/// placeholder that has no parameter, or a parameter the query does not use.
pub fn instantiate(number: usize, parameters: &Parameters) -> Result<String, String> {
    let template = TEMPLATES
        .get(number.wrapping_sub(1))
        .ok_or_else(|| format!("TPC-H has queries 1 to 22, not {number}"))?;
    let mut text = template.to_string();
    for (name, value) in parameters {
        let placeholder = format!("{{{{{name}}}}}");
        if !text.contains(&placeholder) {
            return Err(format!("Q{number} has no parameter {name}"));
        }
        text = text.replace(&placeholder, value);
    }
    if let Some(at) = text.find("{{") {
        let name: String = text[at + 2..].chars().take_while(|c| *c != '}').collect();
        return Err(format!("Q{number} needs a value for {name}"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpch::params::{random, validation};

    #[test]
    fn every_query_takes_exactly_its_parameters() {
        for number in 1..=22 {
            let text = instantiate(number, &validation(number)).unwrap();
            assert!(!text.contains("{{"), "Q{number}");
            instantiate(number, &random(number, 1.0, 3)).unwrap();
        }
        assert!(instantiate(1, &Vec::new()).unwrap_err().contains("DELTA"));
        assert!(instantiate(23, &Vec::new()).is_err());
    }
}
