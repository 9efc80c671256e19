//! Shared plumbing for Cairn's scalar functions: checking and coercing argument types at
//! planning time, reading DataFusion's columnar arguments row by row, and shaping results back
//! into a scalar or an array.

use arrow::array::{
    Array, ArrayRef, AsArray, Float64Array, Int64Array, LargeStringArray, StringArray,
    StringViewArray,
};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::ColumnarValue;

/// Fails planning unless exactly one argument per named parameter was given.
pub(crate) fn check_arity(
    function: &str,
    parameters: &[&str],
    arg_types: &[DataType],
) -> Result<()> {
    if arg_types.len() != parameters.len() {
        return plan_err!(
            "{function} expects {} argument(s) ({}), got {}",
            parameters.len(),
            parameters.join(", "),
            arg_types.len()
        );
    }
    Ok(())
}

/// The type a string parameter is evaluated as: every string encoding is read natively, a
/// dictionary of strings is unpacked, and an untyped NULL becomes a NULL string.
pub(crate) fn coerce_string(
    function: &str,
    parameter: &str,
    data_type: &DataType,
) -> Result<DataType> {
    match data_type {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Ok(data_type.clone()),
        DataType::Null => Ok(DataType::Utf8),
        DataType::Dictionary(_, value)
            if matches!(
                value.as_ref(),
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
            ) =>
        {
            Ok(value.as_ref().clone())
        }
        other => plan_err!("{function}: argument {parameter} must be a string, got {other}"),
    }
}

/// The type a numeric parameter is evaluated as: any integer, float or decimal (or an untyped
/// NULL) is cast to Float64.
pub(crate) fn coerce_number(
    function: &str,
    parameter: &str,
    data_type: &DataType,
) -> Result<DataType> {
    if data_type.is_numeric() || data_type == &DataType::Null {
        Ok(DataType::Float64)
    } else {
        plan_err!("{function}: argument {parameter} must be a number, got {data_type}")
    }
}

/// The type an integer parameter is evaluated as: any signed or unsigned integer (or an
/// untyped NULL) is cast to Int64. Floats are refused rather than truncated.
pub(crate) fn coerce_integer(
    function: &str,
    parameter: &str,
    data_type: &DataType,
) -> Result<DataType> {
    if data_type.is_integer() || data_type == &DataType::Null {
        Ok(DataType::Int64)
    } else {
        plan_err!("{function}: argument {parameter} must be an integer, got {data_type}")
    }
}

/// One evaluated argument: a scalar is held as a one-row array that every row reads, so a
/// constant (say the searched word) is never copied once per row.
pub(crate) struct Argument {
    pub(crate) array: ArrayRef,
    pub(crate) is_scalar: bool,
}

/// Runs `compute` over the arguments and wraps its array as DataFusion expects.
///
/// `compute` receives one [`Argument`] per parameter and the number of rows to produce. When
/// every argument is a scalar it produces one row and the result is returned as a scalar, so
/// constant expressions fold to constants.
pub(crate) fn evaluate(
    function: &str,
    parameters: &[&str],
    args: &[ColumnarValue],
    number_rows: usize,
    compute: impl FnOnce(&[Argument], usize) -> Result<ArrayRef>,
) -> Result<ColumnarValue> {
    if args.len() != parameters.len() {
        return exec_err!(
            "{function} expects {} argument(s) ({}), got {}",
            parameters.len(),
            parameters.join(", "),
            args.len()
        );
    }
    let all_scalar = args
        .iter()
        .all(|arg| matches!(arg, ColumnarValue::Scalar(_)));
    let arguments = args
        .iter()
        .map(|arg| {
            Ok(match arg {
                ColumnarValue::Array(array) => Argument {
                    array: array.clone(),
                    is_scalar: false,
                },
                ColumnarValue::Scalar(value) => Argument {
                    array: value.to_array_of_size(1)?,
                    is_scalar: true,
                },
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let rows = if all_scalar { 1 } else { number_rows };
    let result = compute(&arguments, rows)?;
    if all_scalar {
        Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
            &result, 0,
        )?))
    } else {
        Ok(ColumnarValue::Array(result))
    }
}

/// The string encodings a text argument may arrive in.
enum StringValues<'a> {
    Utf8(&'a StringArray),
    LargeUtf8(&'a LargeStringArray),
    Utf8View(&'a StringViewArray),
    /// An untyped NULL that planning did not cast: every row is NULL.
    Null,
}

/// Row access to a string argument, whatever its encoding.
pub(crate) struct StringColumn<'a> {
    values: StringValues<'a>,
    is_scalar: bool,
}

impl<'a> StringColumn<'a> {
    pub(crate) fn try_new(function: &str, parameter: &str, argument: &'a Argument) -> Result<Self> {
        let array = argument.array.as_ref();
        let values = match array.data_type() {
            DataType::Utf8 => array.as_string_opt::<i32>().map(StringValues::Utf8),
            DataType::LargeUtf8 => array.as_string_opt::<i64>().map(StringValues::LargeUtf8),
            DataType::Utf8View => array.as_string_view_opt().map(StringValues::Utf8View),
            DataType::Null => Some(StringValues::Null),
            _ => None,
        };
        match values {
            Some(values) => Ok(Self {
                values,
                is_scalar: argument.is_scalar,
            }),
            None => exec_err!(
                "{function}: argument {parameter} must be a string, got {}",
                array.data_type()
            ),
        }
    }

    /// Whether every byte of the strings is ASCII, so that a length in characters is a
    /// length in bytes: one pass over the value buffer, not one per row. `false` for views,
    /// whose check would take a pass per row.
    pub(crate) fn is_ascii(&self) -> bool {
        match self.values {
            StringValues::Utf8(array) => array.is_ascii(),
            StringValues::LargeUtf8(array) => array.is_ascii(),
            StringValues::Utf8View(_) | StringValues::Null => false,
        }
    }

    /// The string in `row`, or `None` when it is NULL.
    pub(crate) fn get(&self, row: usize) -> Option<&'a str> {
        let index = if self.is_scalar { 0 } else { row };
        match self.values {
            StringValues::Utf8(array) => array.is_valid(index).then(|| array.value(index)),
            StringValues::LargeUtf8(array) => array.is_valid(index).then(|| array.value(index)),
            StringValues::Utf8View(array) => array.is_valid(index).then(|| array.value(index)),
            StringValues::Null => None,
        }
    }
}

/// Row access to an integer argument (Int64 after planning's coercion).
pub(crate) struct IntegerColumn<'a> {
    /// `None` for an untyped NULL that planning did not cast.
    values: Option<&'a Int64Array>,
    is_scalar: bool,
}

impl<'a> IntegerColumn<'a> {
    pub(crate) fn try_new(function: &str, parameter: &str, argument: &'a Argument) -> Result<Self> {
        let array = argument.array.as_ref();
        let values = match array.data_type() {
            DataType::Null => None,
            _ => match array.as_primitive_opt::<Int64Type>() {
                Some(values) => Some(values),
                None => {
                    return exec_err!(
                        "{function}: argument {parameter} must be an integer, got {}",
                        array.data_type()
                    );
                }
            },
        };
        Ok(Self {
            values,
            is_scalar: argument.is_scalar,
        })
    }

    /// The integer in `row`, or `None` when it is NULL.
    pub(crate) fn get(&self, row: usize) -> Option<i64> {
        let index = if self.is_scalar { 0 } else { row };
        self.values
            .and_then(|array| array.is_valid(index).then(|| array.value(index)))
    }
}

/// Row access to a numeric argument (Float64 after planning's coercion).
pub(crate) struct FloatColumn<'a> {
    /// `None` for an untyped NULL that planning did not cast.
    values: Option<&'a Float64Array>,
    is_scalar: bool,
}

impl<'a> FloatColumn<'a> {
    pub(crate) fn try_new(function: &str, parameter: &str, argument: &'a Argument) -> Result<Self> {
        let array = argument.array.as_ref();
        let values = match array.data_type() {
            DataType::Null => None,
            _ => match array.as_primitive_opt::<Float64Type>() {
                Some(values) => Some(values),
                None => {
                    return exec_err!(
                        "{function}: argument {parameter} must be a number, got {}",
                        array.data_type()
                    );
                }
            },
        };
        Ok(Self {
            values,
            is_scalar: argument.is_scalar,
        })
    }

    /// The number in `row`, or `None` when it is NULL.
    pub(crate) fn get(&self, row: usize) -> Option<f64> {
        let index = if self.is_scalar { 0 } else { row };
        self.values
            .and_then(|array| array.is_valid(index).then(|| array.value(index)))
    }
}
