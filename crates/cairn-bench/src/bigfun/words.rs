//! The dictionaries BigFUN's records are filled from: person names, organizations, and the
//! vocabulary of message text, whose product keywords come in three popularity tiers.

pub const FIRST_NAMES: &[&str] = &[
    "Willis",
    "Isbel",
    "Emory",
    "Woodrow",
    "Nicholas",
    "Bram",
    "Suzanna",
    "Nicolas",
    "Vonda",
    "Jesse",
    "Kamila",
    "Dakota",
    "Elyse",
    "Lindsey",
    "Anastasia",
    "Mariana",
    "Bettie",
    "Cody",
    "Dennis",
    "Gwendolyn",
    "Harriet",
    "Ivan",
    "Jolene",
    "Karl",
    "Leona",
    "Milo",
    "Nadia",
    "Oscar",
    "Paloma",
    "Quentin",
    "Rosa",
    "Silas",
    "Tamsin",
    "Ulric",
    "Vera",
    "Wade",
    "Xenia",
    "Yusuf",
    "Zelda",
    "Abel",
];

pub const LAST_NAMES: &[&str] = &[
    "Wynne",
    "Dull",
    "Kellogg",
    "Hardy",
    "Winthrop",
    "Basinger",
    "Robinson",
    "Shafer",
    "Weisgarber",
    "Zalack",
    "Blackwood",
    "Oneal",
    "Carter",
    "Dittman",
    "Elwood",
    "Fairchild",
    "Garber",
    "Holt",
    "Ingram",
    "Jablonski",
    "Keller",
    "Lovell",
    "Mercer",
    "Nash",
    "Orton",
    "Pike",
    "Quinlan",
    "Reyes",
    "Sawyer",
    "Thorne",
];

pub const ORGANIZATIONS: &[&str] = &[
    "Zamcorporation",
    "Codetechno",
    "Ganjastrip",
    "Tanzimcare",
    "Kongreen",
    "Lexitechno",
    "Solophase",
    "Qvohouse",
    "Ransaofan",
    "Vivaace",
    "Doncare",
    "Newcom",
    "Hexviafind",
    "Sancone",
    "Goldcity",
    "Icerunin",
    "Ronholdings",
    "Voltbam",
    "Technohow",
    "Freshfix",
    "Quadlane",
    "Xx-technology",
    "Striptaxon",
    "Statcode",
    "Labzatron",
    "Dandamace",
];

/// A popularity tier of product keywords: each keyword of the tier appears in `share` of all
/// messages (drawn independently per keyword and message).
pub struct KeywordTier {
    pub name: &'static str,
    pub share: f64,
    pub keywords: &'static [&'static str],
}

/// The tiers. The first two keywords of each are the query keywords BIGFUN.md §1 fixes as the
/// tier's representatives; no keyword differs from another only by case.
pub const KEYWORD_TIERS: [KeywordTier; 3] = [
    KeywordTier {
        name: "rare",
        share: 0.05,
        keywords: &["Lumia", "XPeria", "Zune", "Treo"],
    },
    KeywordTier {
        name: "medium",
        share: 0.20,
        keywords: &["Galaxy", "Kindle", "Pixel", "Blackberry"],
    },
    KeywordTier {
        name: "frequent",
        share: 0.75,
        keywords: &["Surface", "Nexus"],
    },
];

/// Share of messages carrying one misspelled keyword (an extra mention: the exact mentions
/// stay, so tier shares are unaffected and similarity search finds what exact search misses).
pub const MISSPELLED_SHARE: f64 = 0.05;

pub const FEELINGS: &[&str] = &[
    "love",
    "like",
    "can't stand",
    "hate",
    "dislike",
    "am happy with",
    "am tired of",
    "really like",
    "am impressed by",
    "am disappointed by",
];

pub const ASPECTS: &[&str] = &[
    "its battery is",
    "its screen is",
    "its speed is",
    "its camera is",
    "its signal is",
    "its touch-screen is",
    "its voice-command is",
    "its customization is",
    "its shortcut-menu is",
    "its platform is",
    "its network is",
    "its plan is",
];

pub const VERDICTS: &[&str] = &[
    "amazing",
    "awesome",
    "good",
    "OMG",
    "bad",
    "horrible",
    "terrible",
    "mind-blowing",
    "not bad",
    "so so",
    "wonderful",
    "lousy",
];

pub const VENDORS: &[&str] = &[
    "verizon", "at&t", "t-mobile", "sprint", "motorola", "iphone", "samsung", "nokia", "sony",
    "htc", "lg", "apple",
];

pub const PLACES: &[&str] = &[
    "at home",
    "at work",
    "on the train",
    "at the airport",
    "in the park",
    "downtown",
    "at school",
    "on the road",
    "at the mall",
    "in the office",
];
