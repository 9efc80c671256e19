//! Substitution parameters for the 22 queries, drawn as the TPC-H specification's qgen draws them
//! (clause 2.4.x.3 of each query), deterministic for a seed, plus the validation parameters
//! (clause 2.4.x.4) whose answers the specification publishes.

use crate::bigfun::random::SplitMix;

/// One query's parameters, by the names its template uses (`{{NAME}}`).
pub type Parameters = Vec<(&'static str, String)>;

const REGIONS: [&str; 5] = ["AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"];

/// The 25 nations with the index of their region in [`REGIONS`] (dbgen's nation table).
const NATIONS: [(&str, usize); 25] = [
    ("ALGERIA", 0),
    ("ARGENTINA", 1),
    ("BRAZIL", 1),
    ("CANADA", 1),
    ("EGYPT", 4),
    ("ETHIOPIA", 0),
    ("FRANCE", 3),
    ("GERMANY", 3),
    ("INDIA", 2),
    ("INDONESIA", 2),
    ("IRAN", 4),
    ("IRAQ", 4),
    ("JAPAN", 2),
    ("JORDAN", 4),
    ("KENYA", 0),
    ("MOROCCO", 0),
    ("MOZAMBIQUE", 0),
    ("PERU", 1),
    ("CHINA", 2),
    ("ROMANIA", 3),
    ("SAUDI ARABIA", 4),
    ("VIETNAM", 2),
    ("RUSSIA", 3),
    ("UNITED KINGDOM", 3),
    ("UNITED STATES", 1),
];

const SEGMENTS: [&str; 5] = [
    "AUTOMOBILE",
    "BUILDING",
    "FURNITURE",
    "MACHINERY",
    "HOUSEHOLD",
];
const TYPE_SYLLABLE_1: [&str; 6] = ["STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"];
const TYPE_SYLLABLE_2: [&str; 5] = ["ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"];
const TYPE_SYLLABLE_3: [&str; 5] = ["TIN", "NICKEL", "BRASS", "STEEL", "COPPER"];
const CONTAINER_SYLLABLE_1: [&str; 5] = ["SM", "LG", "MED", "JUMBO", "WRAP"];
const CONTAINER_SYLLABLE_2: [&str; 8] = ["CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"];
const SHIP_MODES: [&str; 7] = ["REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"];
const COMMENT_WORDS_1: [&str; 4] = ["special", "pending", "unusual", "express"];
const COMMENT_WORDS_2: [&str; 4] = ["packages", "requests", "accounts", "deposits"];

/// The words part names are made of (dbgen's P_NAME colors).
const COLORS: [&str; 92] = [
    "almond",
    "antique",
    "aquamarine",
    "azure",
    "beige",
    "bisque",
    "black",
    "blanched",
    "blue",
    "blush",
    "brown",
    "burlywood",
    "burnished",
    "chartreuse",
    "chiffon",
    "chocolate",
    "coral",
    "cornflower",
    "cornsilk",
    "cream",
    "cyan",
    "dark",
    "deep",
    "dim",
    "dodger",
    "drab",
    "firebrick",
    "floral",
    "forest",
    "frosted",
    "gainsboro",
    "ghost",
    "goldenrod",
    "green",
    "grey",
    "honeydew",
    "hot",
    "indian",
    "ivory",
    "khaki",
    "lace",
    "lavender",
    "lawn",
    "lemon",
    "light",
    "lime",
    "linen",
    "magenta",
    "maroon",
    "medium",
    "metallic",
    "midnight",
    "mint",
    "misty",
    "moccasin",
    "navajo",
    "navy",
    "olive",
    "orange",
    "orchid",
    "pale",
    "papaya",
    "peach",
    "peru",
    "pink",
    "plum",
    "powder",
    "puff",
    "purple",
    "red",
    "rose",
    "rosy",
    "royal",
    "saddle",
    "salmon",
    "sandy",
    "seashell",
    "sienna",
    "sky",
    "slate",
    "smoke",
    "snow",
    "spring",
    "steel",
    "tan",
    "thistle",
    "tomato",
    "turquoise",
    "violet",
    "wheat",
    "white",
    "yellow",
];

fn p(name: &'static str, value: impl ToString) -> (&'static str, String) {
    (name, value.to_string())
}

/// The specification's validation parameters for query `number`.
///
/// # Panics
/// Unless 1 ≤ `number` ≤ 22: callers count through the 22 queries; no input picks a number.
pub fn validation(number: usize) -> Parameters {
    match number {
        1 => vec![p("DELTA", 90)],
        2 => vec![p("SIZE", 15), p("TYPE", "BRASS"), p("REGION", "EUROPE")],
        3 => vec![p("SEGMENT", "BUILDING"), p("DATE", "1995-03-15")],
        4 => vec![p("DATE", "1993-07-01")],
        5 => vec![p("REGION", "ASIA"), p("DATE", "1994-01-01")],
        6 => {
            let mut parameters = vec![p("DATE", "1994-01-01"), p("QUANTITY", 24)];
            parameters.extend(discount_bounds(6));
            parameters
        }
        7 => vec![p("NATION1", "FRANCE"), p("NATION2", "GERMANY")],
        8 => vec![
            p("NATION", "BRAZIL"),
            p("REGION", "AMERICA"),
            p("TYPE", "ECONOMY ANODIZED STEEL"),
        ],
        9 => vec![p("COLOR", "green")],
        10 => vec![p("DATE", "1993-10-01")],
        11 => vec![p("NATION", "GERMANY"), p("FRACTION", "0.0001")],
        12 => vec![
            p("SHIPMODE1", "MAIL"),
            p("SHIPMODE2", "SHIP"),
            p("DATE", "1994-01-01"),
        ],
        13 => vec![p("WORD1", "special"), p("WORD2", "requests")],
        14 => vec![p("DATE", "1995-09-01")],
        15 => vec![p("DATE", "1996-01-01")],
        16 => {
            let mut parameters = vec![p("BRAND", "Brand#45"), p("TYPE", "MEDIUM POLISHED")];
            for (name, size) in SIZE_NAMES.iter().zip([49, 14, 23, 45, 19, 3, 36, 9]) {
                parameters.push(p(name, size));
            }
            parameters
        }
        17 => vec![p("BRAND", "Brand#23"), p("CONTAINER", "MED BOX")],
        18 => vec![p("QUANTITY", 300)],
        19 => vec![
            p("QUANTITY1", 1),
            p("QUANTITY2", 10),
            p("QUANTITY3", 20),
            p("BRAND1", "Brand#12"),
            p("BRAND2", "Brand#23"),
            p("BRAND3", "Brand#34"),
        ],
        20 => vec![
            p("COLOR", "forest"),
            p("DATE", "1994-01-01"),
            p("NATION", "CANADA"),
        ],
        21 => vec![p("NATION", "SAUDI ARABIA")],
        22 => COUNTRY_CODE_NAMES
            .iter()
            .zip(["13", "31", "23", "29", "30", "18", "17"])
            .map(|(name, code)| p(name, code))
            .collect(),
        _ => panic!("TPC-H has queries 1 to 22, not {number}"),
    }
}

const SIZE_NAMES: [&str; 8] = [
    "SIZE1", "SIZE2", "SIZE3", "SIZE4", "SIZE5", "SIZE6", "SIZE7", "SIZE8",
];
const COUNTRY_CODE_NAMES: [&str; 7] = ["I1", "I2", "I3", "I4", "I5", "I6", "I7"];

/// `count` different values of `0..n`, in the order drawn.
fn distinct(random: &mut SplitMix, n: i64, count: usize) -> Vec<i64> {
    assert!(
        count as i64 <= n,
        "cannot draw {count} different values of {n}"
    );
    let mut drawn = Vec::with_capacity(count);
    while drawn.len() < count {
        let value = random.range(0, n - 1);
        if !drawn.contains(&value) {
            drawn.push(value);
        }
    }
    drawn
}

/// `YYYY-MM-01` of the month `months` after January 1993.
fn month_start(months: i64) -> String {
    format!("{}-{:02}-01", 1993 + months / 12, months % 12 + 1)
}

/// Q6's `DISCOUNT - 0.01` and `DISCOUNT + 0.01` for a discount of `hundredths` / 100, written
/// exactly rather than left to double arithmetic, which would drop the upper bound's rows.
fn discount_bounds(hundredths: i64) -> [(&'static str, String); 2] {
    [
        p(
            "DISCOUNT_LOW",
            format!("{:.2}", (hundredths - 1) as f64 / 100.0),
        ),
        p(
            "DISCOUNT_HIGH",
            format!("{:.2}", (hundredths + 1) as f64 / 100.0),
        ),
    ]
}

fn brand(random: &mut SplitMix) -> String {
    format!("Brand#{}{}", random.range(1, 5), random.range(1, 5))
}

/// Random parameters for query `number` at `scale_factor`, as qgen draws them; the same
/// `seed`, query and scale factor give the same parameters.
///
/// # Panics
/// Unless 1 ≤ `number` ≤ 22, as [`validation`].
pub fn random(number: usize, scale_factor: f64, seed: u64) -> Parameters {
    let random = &mut SplitMix::new(seed, number as u64);
    let year_start = |random: &mut SplitMix| format!("{}-01-01", random.range(1993, 1997));
    match number {
        1 => vec![p("DELTA", random.range(60, 120))],
        2 => vec![
            p("SIZE", random.range(1, 50)),
            p("TYPE", random.pick(&TYPE_SYLLABLE_3)),
            p("REGION", random.pick(&REGIONS)),
        ],
        3 => vec![
            p("SEGMENT", random.pick(&SEGMENTS)),
            p("DATE", format!("1995-03-{:02}", random.range(1, 31))),
        ],
        // 1993-01 to 1997-10: the 58 months whose quarter ends by 1998-01-01.
        4 | 15 => vec![p("DATE", month_start(random.range(0, 57)))],
        5 => vec![
            p("REGION", random.pick(&REGIONS)),
            p("DATE", year_start(random)),
        ],
        6 => {
            let mut parameters = vec![
                p("DATE", year_start(random)),
                p("QUANTITY", random.range(24, 25)),
            ];
            parameters.extend(discount_bounds(random.range(2, 9)));
            parameters
        }
        7 => {
            let nations = distinct(random, NATIONS.len() as i64, 2);
            vec![
                p("NATION1", NATIONS[nations[0] as usize].0),
                p("NATION2", NATIONS[nations[1] as usize].0),
            ]
        }
        8 => {
            let (nation, region) = NATIONS[random.range(0, NATIONS.len() as i64 - 1) as usize];
            vec![
                p("NATION", nation),
                p("REGION", REGIONS[region]),
                p(
                    "TYPE",
                    format!(
                        "{} {} {}",
                        random.pick(&TYPE_SYLLABLE_1),
                        random.pick(&TYPE_SYLLABLE_2),
                        random.pick(&TYPE_SYLLABLE_3)
                    ),
                ),
            ]
        }
        9 => vec![p("COLOR", random.pick(&COLORS))],
        // 1993-02 to 1995-01.
        10 => vec![p("DATE", month_start(random.range(1, 24)))],
        11 => vec![
            p("NATION", NATIONS[random.range(0, 24) as usize].0),
            p("FRACTION", format!("{}", 0.0001 / scale_factor)),
        ],
        12 => {
            let modes = distinct(random, SHIP_MODES.len() as i64, 2);
            vec![
                p("SHIPMODE1", SHIP_MODES[modes[0] as usize]),
                p("SHIPMODE2", SHIP_MODES[modes[1] as usize]),
                p("DATE", year_start(random)),
            ]
        }
        13 => vec![
            p("WORD1", random.pick(&COMMENT_WORDS_1)),
            p("WORD2", random.pick(&COMMENT_WORDS_2)),
        ],
        14 => vec![p("DATE", month_start(random.range(0, 59)))],
        16 => {
            let mut parameters = vec![
                p("BRAND", brand(random)),
                p(
                    "TYPE",
                    format!(
                        "{} {}",
                        random.pick(&TYPE_SYLLABLE_1),
                        random.pick(&TYPE_SYLLABLE_2)
                    ),
                ),
            ];
            for (name, size) in SIZE_NAMES.iter().zip(distinct(random, 50, 8)) {
                parameters.push(p(name, size + 1));
            }
            parameters
        }
        17 => vec![
            p("BRAND", brand(random)),
            p(
                "CONTAINER",
                format!(
                    "{} {}",
                    random.pick(&CONTAINER_SYLLABLE_1),
                    random.pick(&CONTAINER_SYLLABLE_2)
                ),
            ),
        ],
        18 => vec![p("QUANTITY", random.range(312, 315))],
        19 => vec![
            p("QUANTITY1", random.range(1, 10)),
            p("QUANTITY2", random.range(10, 20)),
            p("QUANTITY3", random.range(20, 30)),
            p("BRAND1", brand(random)),
            p("BRAND2", brand(random)),
            p("BRAND3", brand(random)),
        ],
        20 => vec![
            p("COLOR", random.pick(&COLORS)),
            p("DATE", year_start(random)),
            p("NATION", NATIONS[random.range(0, 24) as usize].0),
        ],
        21 => vec![p("NATION", NATIONS[random.range(0, 24) as usize].0)],
        22 => COUNTRY_CODE_NAMES
            .iter()
            .zip(distinct(random, 25, 7))
            .map(|(name, nation)| p(name, nation + 10))
            .collect(),
        _ => panic!("TPC-H has queries 1 to 22, not {number}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_parameters_are_deterministic_and_in_the_specified_ranges() {
        for number in 1..=22 {
            assert_eq!(random(number, 1.0, 7), random(number, 1.0, 7));
        }
        let mut seen_deltas = std::collections::BTreeSet::new();
        for seed in 0..500 {
            let delta: i64 = random(1, 1.0, seed)[0].1.parse().unwrap();
            assert!((60..=120).contains(&delta));
            seen_deltas.insert(delta);
            let q16 = random(16, 1.0, seed);
            let sizes: std::collections::BTreeSet<i64> =
                q16[2..].iter().map(|(_, v)| v.parse().unwrap()).collect();
            assert_eq!(sizes.len(), 8);
            assert!(sizes.iter().all(|s| (1..=50).contains(s)));
            let q8 = random(8, 1.0, seed);
            let (_, region) = NATIONS.iter().find(|(n, _)| *n == q8[0].1).unwrap();
            assert_eq!(REGIONS[*region], q8[1].1);
            let q4 = &random(4, 1.0, seed)[0].1;
            assert!(
                q4.as_str() >= "1993-01-01" && q4.as_str() <= "1997-10-01",
                "{q4}"
            );
        }
        assert!(seen_deltas.len() > 50);
        assert_eq!(random(11, 10.0, 1)[1].1, "0.00001");
        assert_eq!(discount_bounds(9)[1].1, "0.10");
        assert_eq!(validation(6)[2..], discount_bounds(6));
    }
}
