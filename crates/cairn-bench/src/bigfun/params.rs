//! The BigFUN parameter generator (BIGFUN.md §3): fresh parameters for every run of every case,
//! chosen so that each version's main filter qualifies its target number of records on the
//! generated data, with the achieved count recorded.
//!
//! Time windows are calibrated on the loaded data rather than computed from the uniform
//! distribution: the window starts at a random instant and ends at the datetime of the
//! (target + 1)-th record after it, so it holds the target exactly (ties aside). The circle
//! radii of Q9 and Q16 follow from the uniform density of locations; their achieved counts are
//! the answers' sizes. Every system then answers the same parameter sets.

use super::SplitMix;
use super::records::{
    DATETIME_HI, DATETIME_LO, LATITUDE, LONGITUDE, Scale, Sink, format_datetime, write_user,
};
use super::workload::{Case, Version};
use cairn_engine::Database;
use std::collections::{BTreeMap, VecDeque};

/// The keywords of BIGFUN.md §1 that stand for each tier: S runs use a rare one, M a medium one.
const RARE_KEYWORDS: [&str; 2] = ["Lumia", "XPeria"];
const MEDIUM_KEYWORDS: [&str; 2] = ["Galaxy", "Kindle"];
/// Q12–Q15: the message-side send_time window, one day in every version.
const MESSAGE_WINDOW_SECONDS: i64 = 86_400;
/// Q16: outer chirps per run.
const Q16_OUTER_CHIRPS: i64 = 100;

/// One run's parameters and what its main filter qualifies.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunParameters {
    pub values: BTreeMap<String, String>,
    /// Records the main filter qualifies, where the generator knows it exactly; otherwise the
    /// answer's size is the count (Q9, Q10, Q11, Q16's neighbours).
    pub qualifying: Option<i64>,
}

/// The sizes the generator calibrates against.
#[derive(Debug, Clone, Copy)]
pub struct Population {
    pub users: i64,
    pub chirps: i64,
}

pub struct ParameterGenerator<'a> {
    db: &'a Database,
    rng: SplitMix,
    population: Population,
    scale: Scale,
    /// U1 inserts new users with ids from here up; U2 deletes them again in the same order, so
    /// that the data ends as it began.
    next_user_id: i64,
    inserted: VecDeque<i64>,
}

type Error = Box<dyn std::error::Error>;

impl<'a> ParameterGenerator<'a> {
    pub fn new(db: &'a Database, population: Population, seed: u64) -> Self {
        ParameterGenerator {
            db,
            rng: SplitMix::new(seed, 0x005e_ed0f_b19f),
            population,
            scale: Scale {
                users: population.users,
                seed,
            },
            next_user_id: population.users + 1_000_000,
            inserted: VecDeque::new(),
        }
    }

    pub async fn parameters(&mut self, case: &Case) -> Result<RunParameters, Error> {
        let Population { users, chirps } = self.population;
        let mut values = BTreeMap::new();
        let mut set = |name: &str, value: String| {
            values.insert(name.to_string(), value);
        };
        let qualifying = match case.operation {
            "Q1" => {
                set("id", self.rng.range(1, users).to_string());
                Some(1)
            }
            "Q2" => {
                let width = case.version.target(users);
                let lo = self.rng.range(1, (users - width + 1).max(1));
                set("lo", lo.to_string());
                set("hi", (lo + width).to_string());
                Some(width.min(users - lo + 1))
            }
            "Q3" | "Q4" | "Q5" | "Q6" | "Q7" | "Q8" => {
                let (dataset, field, population) = if matches!(case.operation, "Q3" | "Q4" | "Q5") {
                    ("GleambookUsers", "user_since", users)
                } else {
                    ("ChirpMessages", "send_time", chirps)
                };
                let (lo, hi, count) = self
                    .window(dataset, field, case.version, population)
                    .await?;
                set("lo", lo);
                set("hi", hi);
                Some(count)
            }
            "Q9" => {
                let radius = self.radius_for(case.version.target(chirps) as f64);
                let (x, y) = self.center(radius);
                set("x", format!("{x:.6}"));
                set("y", format!("{y:.6}"));
                set("radius", format!("{radius:.6}"));
                None
            }
            "Q10" | "Q11" => {
                let words = if case.version == Version::S {
                    RARE_KEYWORDS
                } else {
                    MEDIUM_KEYWORDS
                };
                set("word", words[self.rng.range(0, 1) as usize].to_string());
                None
            }
            "Q12" | "Q13" | "Q14" | "Q15" => {
                let (lo, hi, count) = self
                    .window("GleambookUsers", "user_since", case.version, users)
                    .await?;
                set("lo", lo);
                set("hi", hi);
                let day = self
                    .rng
                    .range(DATETIME_LO, DATETIME_HI - MESSAGE_WINDOW_SECONDS);
                set("message_lo", format_datetime(day));
                set("message_hi", format_datetime(day + MESSAGE_WINDOW_SECONDS));
                Some(count)
            }
            "Q16" => {
                let (lo, hi, count) = self
                    .window_of("ChirpMessages", "send_time", Q16_OUTER_CHIRPS, chirps)
                    .await?;
                set("lo", lo);
                set("hi", hi);
                let neighbours = match case.version {
                    Version::S => 10.0,
                    Version::M => 100.0,
                    _ => 1_000.0,
                };
                set("radius", format!("{:.6}", self.radius_for(neighbours)));
                Some(count)
            }
            "U1" => {
                let Version::Batch(k) = case.version else {
                    return Err(format!("{} needs a batch size", case.label()).into());
                };
                let mut sink = Sink::default();
                for _ in 0..k {
                    let id = self.next_user_id;
                    self.next_user_id += 1;
                    write_user(&self.scale, id, &mut sink);
                    self.inserted.push_back(id);
                }
                let records: Vec<&str> = sink.users.lines().collect();
                set("count", k.to_string());
                set("records", format!("[{}]", records.join(", ")));
                Some(k as i64)
            }
            "U2" => {
                let Version::Batch(k) = case.version else {
                    return Err(format!("{} needs a batch size", case.label()).into());
                };
                if self.inserted.len() < k {
                    return Err("U2 runs after U1 and deletes the users U1 inserted".into());
                }
                let ids: Vec<String> = self.inserted.drain(..k).map(|id| id.to_string()).collect();
                set("ids", ids.join(", "));
                Some(k as i64)
            }
            other => return Err(format!("no parameters for operation {other}").into()),
        };
        Ok(RunParameters { values, qualifying })
    }

    async fn window(
        &mut self,
        dataset: &str,
        field: &str,
        version: Version,
        population: i64,
    ) -> Result<(String, String, i64), Error> {
        if version == Version::F {
            return Ok((
                format_datetime(DATETIME_LO),
                format_datetime(DATETIME_HI + 1),
                population,
            ));
        }
        self.window_of(dataset, field, version.target(population), population)
            .await
    }

    /// A half-open window over `field` holding `target` of `population` records: it starts at
    /// a random instant (leaving room for the expected width) and ends at the next record past
    /// the target.
    async fn window_of(
        &mut self,
        dataset: &str,
        field: &str,
        target: i64,
        population: i64,
    ) -> Result<(String, String, i64), Error> {
        let span = DATETIME_HI - DATETIME_LO;
        let expected_width = (span as f64 * target as f64 / population.max(1) as f64 * 1.2) as i64;
        let lo = self
            .rng
            .range(DATETIME_LO, (DATETIME_HI - expected_width).max(DATETIME_LO));
        let lo_text = format_datetime(lo);
        let end = self
            .single_i64(&format!(
                "SELECT to_unixtime({field}) FROM {dataset} WHERE {field} >= TIMESTAMP '{lo_text}' ORDER BY {field} LIMIT 1 OFFSET {target}"
            ))
            .await?
            .unwrap_or(DATETIME_HI + 1);
        let hi_text = format_datetime(end);
        let count = self
            .single_i64(&format!(
                "SELECT count(*) FROM {dataset} WHERE {field} >= TIMESTAMP '{lo_text}' AND {field} < TIMESTAMP '{hi_text}'"
            ))
            .await?
            .unwrap_or(0);
        Ok((lo_text, hi_text, count))
    }

    async fn single_i64(&self, sql: &str) -> Result<Option<i64>, Error> {
        let batches = self.db.sql(sql).await?;
        let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
            return Ok(None);
        };
        let column = arrow::compute::cast(batch.column(0), &arrow::datatypes::DataType::Int64)?;
        let values = column
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>()
            .ok_or("calibration query did not return an integer")?;
        Ok(Some(values.value(0)))
    }

    /// The radius of a circle expected to hold `count` chirps, locations being uniform over the
    /// generator's box.
    fn radius_for(&self, count: f64) -> f64 {
        let area = (LATITUDE.1 - LATITUDE.0) * (LONGITUDE.1 - LONGITUDE.0);
        let density = self.population.chirps.max(1) as f64 / area;
        (count / (density * std::f64::consts::PI)).sqrt()
    }

    /// A random circle center whose circle of `radius` stays inside the box where it can.
    fn center(&mut self, radius: f64) -> (f64, f64) {
        let pick = |rng: &mut SplitMix, (lo, hi): (f64, f64)| {
            if hi - lo > 2.0 * radius {
                rng.uniform(lo + radius, hi - radius)
            } else {
                (lo + hi) / 2.0
            }
        };
        (
            pick(&mut self.rng, LATITUDE),
            pick(&mut self.rng, LONGITUDE),
        )
    }
}
