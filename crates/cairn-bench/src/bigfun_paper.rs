//! The BigFUN paper's MongoDB figures (seeds/001, Tables V and VI, 9 partitions on 3 machines,
//! 90 million users), quoted in the report because MongoDB cannot be installed from the
//! registries this machine reaches. They come from another scale and cluster: a reference for
//! the shape of MongoDB's behaviour (fast short reads, no joins, "NS" on large queries), not a
//! column to compare times with.

/// Table V, MongoDB, 9 partitions: average response time in seconds per row, in this driver's
/// labels (the paper's `Q12-S-IX` is `Q12-IX-S` here). `-` means the paper could not run the
/// operation on MongoDB; `NS` that it did not produce reliable results. Rows the paper did not
/// run (Q11-M) are absent.
pub const MONGODB_READS: &[(&str, &str)] = &[
    ("Q1", "0.017"),
    ("Q2-S", "0.029"),
    ("Q2-M", "1.124"),
    ("Q2-L", "107.2"),
    ("Q3-S", "0.113"),
    ("Q3-M", "32.82"),
    ("Q3-L", "NS"),
    ("Q4-S", "0.133"),
    ("Q4-M", "49.07"),
    ("Q4-L", "NS"),
    ("Q5-S", "0.132"),
    ("Q5-M", "47.69"),
    ("Q5-L", "NS"),
    ("Q6-S", "0.174"),
    ("Q6-M", "9.057"),
    ("Q6-L", "NS"),
    ("Q6-F", "NS"),
    ("Q7-S", "0.199"),
    ("Q7-M", "9.987"),
    ("Q7-L", "NS"),
    ("Q8-S", "0.201"),
    ("Q8-M", "10.6"),
    ("Q8-L", "NS"),
    ("Q8-F", "NS"),
    ("Q9-S", "1.1"),
    ("Q9-M", "46.9"),
    ("Q9-L", "NS"),
    ("Q10-S", "990.7"),
    ("Q10-M", "1297"),
    ("Q11-S", "-"),
    ("Q12-S", "-"),
    ("Q12-M", "-"),
    ("Q12-L", "-"),
    ("Q12-IX-S", "1.149"),
    ("Q12-IX-M", "455.8"),
    ("Q12-IX-L", "NS"),
    ("Q13-S", "-"),
    ("Q13-M", "-"),
    ("Q13-L", "-"),
    ("Q13-IX-S", "1.425"),
    ("Q13-IX-M", "465.7"),
    ("Q13-IX-L", "NS"),
    ("Q14-S", "-"),
    ("Q14-M", "-"),
    ("Q14-L", "-"),
    ("Q14-IX-S", "-"),
    ("Q14-IX-M", "-"),
    ("Q14-IX-L", "-"),
    ("Q15-S", "-"),
    ("Q15-M", "-"),
    ("Q15-L", "-"),
    ("Q15-IX-S", "-"),
    ("Q15-IX-M", "-"),
    ("Q15-IX-L", "-"),
    ("Q16-S", "21.89"),
    ("Q16-M", "68.41"),
    ("Q16-L", "NS"),
];

/// Table VI, MongoDB: average time per record in milliseconds ("journalled" write concern).
pub const MONGODB_UPDATES: &[(&str, &str)] = &[
    ("U1 k=1", "13.85"),
    ("U1 k=20", "7.9"),
    ("U2 k=1", "19.93"),
    ("U2 k=20", "14.2"),
];
