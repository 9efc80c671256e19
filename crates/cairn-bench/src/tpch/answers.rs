//! TPC-H answers as rows of JSON values, and their comparison across systems: row by row in the
//! queries' order, numbers within a relative tolerance (systems sum doubles in different orders,
//! and some answer an integer where others answer a float), everything else exactly.

use arrow::array::RecordBatch;
use cairn_engine::json_rows::json_texts;
use serde_json::Value;

/// Relative difference two numbers of an answer may have.
pub const RELATIVE_TOLERANCE: f64 = 1e-6;

/// The rows of `batches`, each a vector of its columns' JSON values (dates as ISO strings).
pub fn batch_rows(batches: &[RecordBatch]) -> Result<Vec<Vec<Value>>, String> {
    let mut rows = Vec::new();
    for batch in batches {
        let mut columns = Vec::with_capacity(batch.num_columns());
        for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
            let texts = json_texts(field, column.as_ref()).map_err(|e| e.to_string())?;
            let values = texts
                .into_iter()
                .map(|text| match text {
                    Some(text) => serde_json::from_str(&text).map_err(|e| e.to_string()),
                    None => Ok(Value::Null),
                })
                .collect::<Result<Vec<Value>, String>>()?;
            columns.push(values);
        }
        let mut columns: Vec<_> = columns.into_iter().map(Vec::into_iter).collect();
        for _ in 0..batch.num_rows() {
            rows.push(columns.iter_mut().filter_map(Iterator::next).collect());
        }
    }
    Ok(rows)
}

fn values_match(ours: &Value, theirs: &Value) -> bool {
    match (ours.as_f64(), theirs.as_f64()) {
        (Some(a), Some(b)) => a == b || (a - b).abs() <= RELATIVE_TOLERANCE * a.abs().max(b.abs()),
        _ => ours == theirs,
    }
}

/// `None` when `ours` and `theirs` are the same answer; otherwise where they first differ.
pub fn difference(ours: &[Vec<Value>], theirs: &[Vec<Value>]) -> Option<String> {
    for (index, (a, b)) in ours.iter().zip(theirs).enumerate() {
        if a.len() != b.len() || !a.iter().zip(b).all(|(x, y)| values_match(x, y)) {
            return Some(format!(
                "row {} differs: {} vs {}",
                index + 1,
                Value::from(a.clone()),
                Value::from(b.clone())
            ));
        }
    }
    (ours.len() != theirs.len()).then(|| format!("{} rows vs {} rows", ours.len(), theirs.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_match_within_the_tolerance_and_nothing_else_does() {
        let row = |v: Value| vec![v.as_array().unwrap().clone()];
        assert_eq!(
            difference(&row(json!([1, "a"])), &row(json!([1.0, "a"]))),
            None
        );
        assert_eq!(
            difference(&row(json!([1000000.0])), &row(json!([1000000.0000001]))),
            None
        );
        assert!(difference(&row(json!([1000000.0])), &row(json!([1000010.0]))).is_some());
        assert!(difference(&row(json!(["1995-01-01"])), &row(json!(["1995-01-02"]))).is_some());
        assert!(difference(&row(json!([null])), &row(json!([0]))).is_some());
        assert!(difference(&row(json!([1])), &[]).is_some());
    }
}
