//! The BigFUN operations (BIGFUN.md §2–§3) as cases a driver runs: which operation, which
//! version, and the SQL text of each system, read from the committed files under
//! `bench/bigfun/queries/<system>/` and filled with one run's parameters.

use std::collections::BTreeMap;

/// The systems whose query files are compiled in, with their directory names.
pub const QUERY_SYSTEMS: [&str; 4] = ["cairn", "duckdb", "postgres", "asterixdb"];

/// Systems that run another system's query files over their own setup (AsterixDB's
/// "AsterixKeyOnly" variant declares only the keys but answers the same SQL++).
const QUERY_ALIASES: [(&str, &str); 1] = [("asterixdb-keyonly", "asterixdb")];

/// One operation's query file per system, in `QUERY_SYSTEMS` order.
struct OperationText {
    operation: &'static str,
    texts: [&'static str; QUERY_SYSTEMS.len()],
}

macro_rules! operation_texts {
    ($($operation:literal => $file:literal),* $(,)?) => {
        [$(OperationText {
            operation: $operation,
            texts: [
                include_str!(concat!("../../../../bench/bigfun/queries/cairn/", $file)),
                include_str!(concat!("../../../../bench/bigfun/queries/duckdb/", $file)),
                include_str!(concat!("../../../../bench/bigfun/queries/postgres/", $file)),
                include_str!(concat!("../../../../bench/bigfun/queries/asterixdb/", $file)),
            ],
        }),*]
    };
}

const OPERATION_TEXTS: [OperationText; 18] = operation_texts!(
    "Q1" => "Q01.sql", "Q2" => "Q02.sql", "Q3" => "Q03.sql", "Q4" => "Q04.sql",
    "Q5" => "Q05.sql", "Q6" => "Q06.sql", "Q7" => "Q07.sql", "Q8" => "Q08.sql",
    "Q9" => "Q09.sql", "Q10" => "Q10.sql", "Q11" => "Q11.sql", "Q12" => "Q12.sql",
    "Q13" => "Q13.sql", "Q14" => "Q14.sql", "Q15" => "Q15.sql", "Q16" => "Q16.sql",
    "U1" => "U1.sql", "U2" => "U2.sql",
);

/// What a system runs before the cases: loading (for peers; Cairn's declarations are in
/// bench/bigfun/ddl.sql), its §4 indexes and statistics, and the GleambookMessages.author_id
/// index created before the "-IX" join runs.
#[derive(Debug, Clone, Copy)]
pub struct SetupText {
    pub system: &'static str,
    /// Filled with `{{data_dir}}`, the generated JSON Lines' directory.
    pub load: Option<&'static str>,
    pub indexes: &'static str,
    pub author_index: &'static str,
}

/// One system's setup files under bench/bigfun/queries/<directory>/, named with `suffix` for a
/// variant (`load-keyonly.sql`); `load` says the system loads its data with a load file.
macro_rules! setup_text {
    ($system:literal, $directory:literal, $suffix:literal, load) => {
        setup_text!(
            $system,
            $directory,
            $suffix,
            Some(include_str!(concat!(
                "../../../../bench/bigfun/queries/",
                $directory,
                "/load",
                $suffix,
                ".sql"
            )))
        )
    };
    ($system:literal, $directory:literal, $suffix:literal, $load:expr) => {
        SetupText {
            system: $system,
            load: $load,
            indexes: include_str!(concat!(
                "../../../../bench/bigfun/queries/",
                $directory,
                "/indexes",
                $suffix,
                ".sql"
            )),
            author_index: include_str!(concat!(
                "../../../../bench/bigfun/queries/",
                $directory,
                "/index-author",
                $suffix,
                ".sql"
            )),
        }
    };
}

/// Cairn first (its data is loaded by the driver, not by a file), then the peers.
const SETUP_TEXTS: [SetupText; 5] = [
    setup_text!("cairn", "cairn", "", None),
    setup_text!("duckdb", "duckdb", "", load),
    setup_text!("postgres", "postgres", "", load),
    setup_text!("asterixdb", "asterixdb", "", load),
    setup_text!("asterixdb-keyonly", "asterixdb", "-keyonly", load),
];

/// The size class of a selective operation (BIGFUN.md §3), or the batch size of an update.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Version {
    /// Operations with a single version (Q1).
    Only,
    S,
    M,
    L,
    /// The whole dataset (Q6, Q8).
    F,
    /// Updates: records per batch.
    Batch(usize),
}

impl Version {
    pub fn label(self) -> String {
        match self {
            Version::Only => String::new(),
            Version::S => "S".into(),
            Version::M => "M".into(),
            Version::L => "L".into(),
            Version::F => "F".into(),
            Version::Batch(k) => format!("k={k}"),
        }
    }

    /// Records the operation's main filter should qualify, given the filtered dataset's size:
    /// ~100, ~10,000, ~1,000,000 or 10 % of the dataset if that is smaller, or all of it.
    pub fn target(self, population: i64) -> i64 {
        match self {
            Version::S => 100.min(population),
            Version::M => 10_000.min(population),
            Version::L => 1_000_000.min(population / 10).max(1),
            Version::F | Version::Only | Version::Batch(_) => population,
        }
    }
}

/// One row of the report: an operation in one version, with or without the author_id index.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Case {
    pub operation: &'static str,
    pub version: Version,
    /// Runs with the GleambookMessages.author_id index available (Q12–Q15 "-IX").
    pub with_author_index: bool,
}

impl Case {
    /// The row label of the paper's tables: `Q3-S`, `Q12-IX-M`, `U1 k=20`, `Q1`.
    pub fn label(&self) -> String {
        let mut label = self.operation.to_string();
        if self.with_author_index {
            label.push_str("-IX");
        }
        match self.version {
            Version::Only => {}
            Version::Batch(k) => label.push_str(&format!(" k={k}")),
            other => {
                label.push('-');
                label.push_str(&other.label());
            }
        }
        label
    }

    pub fn is_update(&self) -> bool {
        matches!(self.version, Version::Batch(_))
    }
}

/// Every case of BIGFUN.md §2–§3, in the order a driver runs them: reads first, the "-IX" joins
/// after the author_id index is created, updates last (they leave the data as they found it).
pub fn all_cases() -> Vec<Case> {
    use Version::*;
    let plain = |operation, versions: &[Version]| {
        versions
            .iter()
            .map(move |&version| Case {
                operation,
                version,
                with_author_index: false,
            })
            .collect::<Vec<_>>()
    };
    let mut cases = Vec::new();
    cases.extend(plain("Q1", &[Only]));
    for operation in ["Q2", "Q3", "Q4", "Q5"] {
        cases.extend(plain(operation, &[S, M, L]));
    }
    cases.extend(plain("Q6", &[S, M, L, F]));
    cases.extend(plain("Q7", &[S, M, L]));
    cases.extend(plain("Q8", &[S, M, L, F]));
    cases.extend(plain("Q9", &[S, M, L]));
    cases.extend(plain("Q10", &[S, M]));
    cases.extend(plain("Q11", &[S, M]));
    for operation in ["Q12", "Q13", "Q14", "Q15"] {
        cases.extend(plain(operation, &[S, M, L]));
    }
    cases.extend(plain("Q16", &[S, M, L]));
    for operation in ["Q12", "Q13", "Q14", "Q15"] {
        cases.extend([S, M, L].map(|version| Case {
            operation,
            version,
            with_author_index: true,
        }));
    }
    for operation in ["U1", "U2"] {
        cases.extend(plain(operation, &[Batch(1), Batch(20)]));
    }
    cases
}

/// The committed query text of `operation` for `system`, or None if that system has no file.
pub fn query_text(system: &str, operation: &str) -> Option<&'static str> {
    let directory = QUERY_ALIASES
        .iter()
        .find(|(alias, _)| *alias == system)
        .map_or(system, |(_, directory)| *directory);
    let column = QUERY_SYSTEMS.iter().position(|s| *s == directory)?;
    OPERATION_TEXTS
        .iter()
        .find(|o| o.operation == operation)
        .map(|o| o.texts[column])
}

/// Cairn's setup statements (always present: Cairn is the system every run loads).
pub const CAIRN_SETUP: SetupText = SETUP_TEXTS[0];

/// The setup statements of `system`, if it has query files.
pub fn setup_text(system: &str) -> Option<SetupText> {
    SETUP_TEXTS.iter().find(|s| s.system == system).copied()
}

/// Fills the `{{name}}` placeholders of `template`, names being identifiers (`[A-Za-z_]` then
/// `[A-Za-z0-9_]*`); any other `{{` is text, as in SQL++'s multiset type `{{ int64 }}`. Every
/// placeholder must have a value, and every value must be used: a mismatch between a query
/// file and the parameter generator is a bug to report, not a query to run half-filled.
pub fn render(template: &str, parameters: &BTreeMap<String, String>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut used = std::collections::BTreeSet::new();
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        if !after.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
            out.push_str("{{");
            rest = after;
            continue;
        }
        let name_end = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if !after[name_end..].starts_with("}}") {
            return Err(format!("unclosed placeholder near `{}`", &rest[open..]));
        }
        let name = &after[..name_end];
        let value = parameters
            .get(name)
            .ok_or_else(|| format!("no value for placeholder {{{{{name}}}}}"))?;
        out.push_str(value);
        used.insert(name.to_string());
        rest = &after[name_end + 2..];
    }
    out.push_str(rest);
    if let Some(unused) = parameters.keys().find(|k| !used.contains(*k)) {
        return Err(format!("parameter `{unused}` is not used by the query"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_has_a_query_for_every_system() {
        for case in all_cases() {
            for system in QUERY_SYSTEMS {
                let text = query_text(system, case.operation).unwrap();
                assert!(
                    text.contains("{{"),
                    "{system} {} has no parameter",
                    case.operation
                );
            }
        }
        for system in QUERY_ALIASES.map(|(alias, _)| alias) {
            assert!(query_text(system, "Q1").is_some(), "{system}");
            assert!(setup_text(system).unwrap().load.is_some(), "{system}");
        }
        assert_eq!(all_cases().len(), 62);
    }

    #[test]
    fn render_fills_every_placeholder_and_refuses_mismatches() {
        let parameters: BTreeMap<String, String> = [
            ("lo".to_string(), "1".to_string()),
            ("hi".to_string(), "9".to_string()),
        ]
        .into();
        assert_eq!(
            render("a {{lo}} b {{hi}} {{lo}}", &parameters).unwrap(),
            "a 1 b 9 1"
        );
        assert!(render("{{lo}}", &parameters).unwrap_err().contains("`hi`"));
        assert!(
            render("{{lo}} {{hi}} {{x}}", &parameters)
                .unwrap_err()
                .contains("{{x}}")
        );
        assert!(render("{{lo", &parameters).is_err());
        assert!(render("{{lo x}} {{hi}}", &parameters).is_err());
        assert_eq!(
            render("{{ int64 }} {{1,2}} {{lo}}{{hi}}", &parameters).unwrap(),
            "{{ int64 }} {{1,2}} 19"
        );
    }
}
