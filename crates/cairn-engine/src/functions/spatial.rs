//! Cairn's spatial SQL functions — the `point`, `circle` and `rectangle` constructors and the
//! `spatial_distance` and `spatial_intersect` predicates — over the Arrow struct shapes the
//! storage layer stores spatial values as.

use crate::functions::args::{Argument, FloatColumn, check_arity, coerce_number, evaluate};
use arrow::array::StructArray;
use arrow::array::{Array, ArrayRef, AsArray, BooleanBuilder, Float64Array, Float64Builder};
use arrow::buffer::NullBuffer;
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, FieldRef, Fields, Float64Type};
use datafusion::common::{Result, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature,
    Volatility,
};
use std::collections::HashMap;
use std::sync::Arc;

/// Field metadata key naming the Cairn type of an extension-typed Arrow field; the same key the
/// storage layer tags spatial columns with.
pub const EXTENSION_NAME_KEY: &str = "ARROW:extension:name";

/// The three spatial types, each stored as a struct of non-nullable Float64 children.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpatialKind {
    Point,
    Rectangle,
    Circle,
}

impl SpatialKind {
    /// The struct's child names, in storage order.
    pub fn coordinate_names(self) -> &'static [&'static str] {
        match self {
            SpatialKind::Point => &["x", "y"],
            SpatialKind::Rectangle => &["x1", "y1", "x2", "y2"],
            SpatialKind::Circle => &["x", "y", "radius"],
        }
    }

    /// The Arrow type storage uses for this kind; function results have exactly this type so
    /// they can be written into stored columns.
    pub fn data_type(self) -> DataType {
        let fields: Fields = self
            .coordinate_names()
            .iter()
            .map(|name| Field::new(*name, DataType::Float64, false))
            .collect();
        DataType::Struct(fields)
    }

    /// The extension name storage tags columns of this kind with.
    pub fn extension_name(self) -> &'static str {
        match self {
            SpatialKind::Point => "cairn.point",
            SpatialKind::Rectangle => "cairn.rectangle",
            SpatialKind::Circle => "cairn.circle",
        }
    }

    /// A nullable field of this kind carrying the extension tag, as storage declares columns.
    pub fn field(self, name: &str) -> FieldRef {
        Arc::new(
            Field::new(name, self.data_type(), true).with_metadata(HashMap::from([(
                EXTENSION_NAME_KEY.to_string(),
                self.extension_name().to_string(),
            )])),
        )
    }

    /// Recognises a spatial struct by its child names (in any order), ignoring metadata, so
    /// values built by other expressions qualify too. Children must be numeric.
    pub fn of(data_type: &DataType) -> Option<SpatialKind> {
        let DataType::Struct(fields) = data_type else {
            return None;
        };
        if !fields.iter().all(|field| field.data_type().is_numeric()) {
            return None;
        }
        [
            SpatialKind::Point,
            SpatialKind::Rectangle,
            SpatialKind::Circle,
        ]
        .into_iter()
        .find(|kind| {
            let names = kind.coordinate_names();
            fields.len() == names.len()
                && names
                    .iter()
                    .all(|name| fields.iter().any(|field| field.name() == name))
        })
    }
}

/// A point in the plane.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
}

impl Point {
    /// Euclidean distance to `other`.
    pub fn distance(self, other: Point) -> f64 {
        (self.x - other.x).hypot(self.y - other.y)
    }
}

/// An axis-aligned rectangle, always held with `lower_left` ≤ `upper_right` per axis.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rectangle {
    pub lower_left: Point,
    pub upper_right: Point,
}

impl Rectangle {
    /// The rectangle spanned by two opposite corners, given in any order.
    pub fn from_corners(a: Point, b: Point) -> Rectangle {
        Rectangle {
            lower_left: Point {
                x: a.x.min(b.x),
                y: a.y.min(b.y),
            },
            upper_right: Point {
                x: a.x.max(b.x),
                y: a.y.max(b.y),
            },
        }
    }

    /// Whether `point` lies inside or on the border.
    pub fn contains(&self, point: Point) -> bool {
        self.lower_left.x <= point.x
            && point.x <= self.upper_right.x
            && self.lower_left.y <= point.y
            && point.y <= self.upper_right.y
    }

    /// The point of the rectangle (border included) nearest to `point`.
    pub fn closest_point_to(&self, point: Point) -> Point {
        // `f64::clamp` panics on NaN bounds; max/min never do.
        Point {
            x: point.x.max(self.lower_left.x).min(self.upper_right.x),
            y: point.y.max(self.lower_left.y).min(self.upper_right.y),
        }
    }

    /// Whether the two rectangles share at least one point (touching counts).
    pub fn overlaps(&self, other: &Rectangle) -> bool {
        self.lower_left.x <= other.upper_right.x
            && other.lower_left.x <= self.upper_right.x
            && self.lower_left.y <= other.upper_right.y
            && other.lower_left.y <= self.upper_right.y
    }
}

/// A filled circle (a disk).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Circle {
    pub center: Point,
    pub radius: f64,
}

/// Any spatial value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Shape {
    Point(Point),
    Rectangle(Rectangle),
    Circle(Circle),
}

/// Whether two shapes share at least one point; borders count, circles and rectangles are
/// filled, and the test is symmetric.
pub fn intersects(a: Shape, b: Shape) -> bool {
    use Shape::{Circle as C, Point as P, Rectangle as R};
    match (a, b) {
        (P(p), P(q)) => p == q,
        (P(p), R(r)) | (R(r), P(p)) => r.contains(p),
        (P(p), C(c)) | (C(c), P(p)) => p.distance(c.center) <= c.radius,
        (R(r), R(s)) => r.overlaps(&s),
        (C(c), R(r)) | (R(r), C(c)) => r.closest_point_to(c.center).distance(c.center) <= c.radius,
        (C(c), C(d)) => c.center.distance(d.center) <= c.radius + d.radius,
    }
}

/// The planning type of a parameter that takes one of `accepted` kinds: a recognised spatial
/// struct is kept as is (children are read as Float64 at evaluation), an untyped NULL becomes a
/// NULL of the first accepted kind.
fn coerce_spatial(
    function: &str,
    parameter: &str,
    accepted: &[SpatialKind],
    data_type: &DataType,
) -> Result<DataType> {
    if data_type == &DataType::Null
        && let Some(kind) = accepted.first()
    {
        return Ok(kind.data_type());
    }
    match SpatialKind::of(data_type) {
        Some(kind) if accepted.contains(&kind) => Ok(data_type.clone()),
        _ => plan_err!(
            "{function}: argument {parameter} must be {}, got {data_type}",
            describe_kinds(accepted)
        ),
    }
}

fn describe_kinds(kinds: &[SpatialKind]) -> String {
    let names: Vec<&str> = kinds
        .iter()
        .map(|kind| match kind {
            SpatialKind::Point => "a point",
            SpatialKind::Rectangle => "a rectangle",
            SpatialKind::Circle => "a circle",
        })
        .collect();
    match names.as_slice() {
        [] => "a spatial value".to_string(),
        [only] => only.to_string(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

const ANY_SHAPE: &[SpatialKind] = &[
    SpatialKind::Point,
    SpatialKind::Rectangle,
    SpatialKind::Circle,
];

/// Row access to a spatial argument of any recognised kind.
struct SpatialColumn {
    /// `None` for an untyped NULL that planning did not cast: every row is NULL.
    kind: Option<SpatialKind>,
    nulls: Option<NullBuffer>,
    /// One array per coordinate, in [`SpatialKind::coordinate_names`] order.
    coordinates: Vec<Float64Array>,
    is_scalar: bool,
}

impl SpatialColumn {
    fn try_new(
        function: &str,
        parameter: &str,
        accepted: &[SpatialKind],
        argument: &Argument,
    ) -> Result<Self> {
        let array = argument.array.as_ref();
        if array.data_type() == &DataType::Null {
            return Ok(Self {
                kind: None,
                nulls: None,
                coordinates: Vec::new(),
                is_scalar: argument.is_scalar,
            });
        }
        let (Some(kind), Some(structs)) =
            (SpatialKind::of(array.data_type()), array.as_struct_opt())
        else {
            return exec_err!(
                "{function}: argument {parameter} must be {}, got {}",
                describe_kinds(accepted),
                array.data_type()
            );
        };
        if !accepted.contains(&kind) {
            return exec_err!(
                "{function}: argument {parameter} must be {}, got a {kind:?}",
                describe_kinds(accepted)
            );
        }
        let mut coordinates = Vec::with_capacity(kind.coordinate_names().len());
        for name in kind.coordinate_names() {
            let Some(child) = structs.column_by_name(name) else {
                return exec_err!("{function}: argument {parameter} has no coordinate {name}");
            };
            // Structs built by other expressions may carry integer coordinates.
            let child = if child.data_type() == &DataType::Float64 {
                child.clone()
            } else {
                cast(child, &DataType::Float64)?
            };
            match child.as_primitive_opt::<Float64Type>() {
                Some(values) => coordinates.push(values.clone()),
                None => {
                    return exec_err!(
                        "{function}: coordinate {name} of argument {parameter} is not a number"
                    );
                }
            }
        }
        Ok(Self {
            kind: Some(kind),
            nulls: structs.nulls().cloned(),
            coordinates,
            is_scalar: argument.is_scalar,
        })
    }

    /// The shape in `row`, or `None` when the value or any of its coordinates is NULL.
    fn get(&self, row: usize) -> Option<Shape> {
        let kind = self.kind?;
        let index = if self.is_scalar { 0 } else { row };
        if self
            .nulls
            .as_ref()
            .is_some_and(|nulls| nulls.is_null(index))
        {
            return None;
        }
        let mut values = [0.0; 4];
        for (slot, column) in values.iter_mut().zip(&self.coordinates) {
            if column.is_null(index) {
                return None;
            }
            *slot = column.value(index);
        }
        let [a, b, c, d] = values;
        Some(match kind {
            SpatialKind::Point => Shape::Point(Point { x: a, y: b }),
            SpatialKind::Rectangle => Shape::Rectangle(Rectangle::from_corners(
                Point { x: a, y: b },
                Point { x: c, y: d },
            )),
            SpatialKind::Circle => Shape::Circle(Circle {
                center: Point { x: a, y: b },
                radius: c,
            }),
        })
    }

    /// The point in `row`, for columns [`Self::try_new`] accepted only points from.
    fn get_point(&self, row: usize) -> Option<Point> {
        match self.get(row)? {
            Shape::Point(point) => Some(point),
            _ => None,
        }
    }
}

/// Accumulates spatial results of one kind into a struct array of the storage type.
struct SpatialBuilder {
    kind: SpatialKind,
    coordinates: Vec<Vec<f64>>,
    validity: Vec<bool>,
}

impl SpatialBuilder {
    fn new(kind: SpatialKind, capacity: usize) -> Self {
        Self {
            kind,
            coordinates: vec![Vec::with_capacity(capacity); kind.coordinate_names().len()],
            validity: Vec::with_capacity(capacity),
        }
    }

    fn append(&mut self, shape: Option<Shape>) {
        let values = match shape {
            Some(Shape::Point(p)) => [p.x, p.y, 0.0, 0.0],
            Some(Shape::Rectangle(r)) => [
                r.lower_left.x,
                r.lower_left.y,
                r.upper_right.x,
                r.upper_right.y,
            ],
            Some(Shape::Circle(c)) => [c.center.x, c.center.y, c.radius, 0.0],
            // Children are non-nullable, so a NULL row still holds (ignored) zeros.
            None => [0.0; 4],
        };
        for (column, value) in self.coordinates.iter_mut().zip(values) {
            column.push(value);
        }
        self.validity.push(shape.is_some());
    }

    fn finish(self) -> Result<ArrayRef> {
        let DataType::Struct(fields) = self.kind.data_type() else {
            return exec_err!("spatial type of {:?} is not a struct", self.kind);
        };
        let children: Vec<ArrayRef> = self
            .coordinates
            .into_iter()
            .map(|values| Arc::new(Float64Array::from(values)) as ArrayRef)
            .collect();
        let nulls = if self.validity.iter().all(|valid| *valid) {
            None
        } else {
            Some(NullBuffer::from(self.validity))
        };
        Ok(Arc::new(StructArray::try_new(fields, children, nulls)?))
    }
}

scalar_function! {
    /// `point(x, y)`: the point at the given coordinates.
    PointFunction, ["x", "y"]
}

impl ScalarUDFImpl for PointFunction {
    fn name(&self) -> &str {
        "point"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        check_arity(self.name(), Self::PARAMETERS, arg_types)?;
        Self::PARAMETERS
            .iter()
            .zip(arg_types)
            .map(|(parameter, data_type)| coerce_number(self.name(), parameter, data_type))
            .collect()
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(SpatialKind::Point.data_type())
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> Result<FieldRef> {
        Ok(SpatialKind::Point.field(self.name()))
    }

    fn is_strict(&self) -> bool {
        true
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        evaluate(
            name,
            Self::PARAMETERS,
            &args.args,
            args.number_rows,
            |arguments, rows| {
                let xs = FloatColumn::try_new(name, "x", &arguments[0])?;
                let ys = FloatColumn::try_new(name, "y", &arguments[1])?;
                let mut builder = SpatialBuilder::new(SpatialKind::Point, rows);
                for row in 0..rows {
                    let point = match (xs.get(row), ys.get(row)) {
                        (Some(x), Some(y)) => Some(Shape::Point(Point { x, y })),
                        _ => None,
                    };
                    builder.append(point);
                }
                builder.finish()
            },
        )
    }
}

scalar_function! {
    /// `circle(center, radius)`: the disk of `radius` around the point `center`.
    CircleFunction, ["center", "radius"]
}

impl ScalarUDFImpl for CircleFunction {
    fn name(&self) -> &str {
        "circle"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        check_arity(self.name(), Self::PARAMETERS, arg_types)?;
        Ok(vec![
            coerce_spatial(self.name(), "center", &[SpatialKind::Point], &arg_types[0])?,
            coerce_number(self.name(), "radius", &arg_types[1])?,
        ])
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(SpatialKind::Circle.data_type())
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> Result<FieldRef> {
        Ok(SpatialKind::Circle.field(self.name()))
    }

    fn is_strict(&self) -> bool {
        true
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        evaluate(
            name,
            Self::PARAMETERS,
            &args.args,
            args.number_rows,
            |arguments, rows| {
                let centers =
                    SpatialColumn::try_new(name, "center", &[SpatialKind::Point], &arguments[0])?;
                let radii = FloatColumn::try_new(name, "radius", &arguments[1])?;
                let mut builder = SpatialBuilder::new(SpatialKind::Circle, rows);
                for row in 0..rows {
                    let circle = match (centers.get_point(row), radii.get(row)) {
                        (Some(_), Some(radius)) if radius < 0.0 || radius.is_nan() => {
                            return exec_err!(
                                "{name}: argument radius must be a non-negative number, got {radius}"
                            );
                        }
                        (Some(center), Some(radius)) => {
                            Some(Shape::Circle(Circle { center, radius }))
                        }
                        _ => None,
                    };
                    builder.append(circle);
                }
                builder.finish()
            },
        )
    }
}

scalar_function! {
    /// `rectangle(corner1, corner2)`: the axis-aligned rectangle spanned by two opposite corners.
    RectangleFunction, ["corner1", "corner2"]
}

impl ScalarUDFImpl for RectangleFunction {
    fn name(&self) -> &str {
        "rectangle"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        check_arity(self.name(), Self::PARAMETERS, arg_types)?;
        Self::PARAMETERS
            .iter()
            .zip(arg_types)
            .map(|(parameter, data_type)| {
                coerce_spatial(self.name(), parameter, &[SpatialKind::Point], data_type)
            })
            .collect()
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(SpatialKind::Rectangle.data_type())
    }

    fn return_field_from_args(&self, _args: ReturnFieldArgs) -> Result<FieldRef> {
        Ok(SpatialKind::Rectangle.field(self.name()))
    }

    fn is_strict(&self) -> bool {
        true
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        evaluate(
            name,
            Self::PARAMETERS,
            &args.args,
            args.number_rows,
            |arguments, rows| {
                let points = [SpatialKind::Point];
                let firsts = SpatialColumn::try_new(name, "corner1", &points, &arguments[0])?;
                let seconds = SpatialColumn::try_new(name, "corner2", &points, &arguments[1])?;
                let mut builder = SpatialBuilder::new(SpatialKind::Rectangle, rows);
                for row in 0..rows {
                    let rectangle = match (firsts.get_point(row), seconds.get_point(row)) {
                        (Some(a), Some(b)) => Some(Shape::Rectangle(Rectangle::from_corners(a, b))),
                        _ => None,
                    };
                    builder.append(rectangle);
                }
                builder.finish()
            },
        )
    }
}

scalar_function! {
    /// `spatial_distance(a, b)`: the Euclidean distance between two points.
    SpatialDistanceFunction, ["a", "b"]
}

impl ScalarUDFImpl for SpatialDistanceFunction {
    fn name(&self) -> &str {
        "spatial_distance"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        check_arity(self.name(), Self::PARAMETERS, arg_types)?;
        Self::PARAMETERS
            .iter()
            .zip(arg_types)
            .map(|(parameter, data_type)| {
                coerce_spatial(self.name(), parameter, &[SpatialKind::Point], data_type)
            })
            .collect()
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn is_strict(&self) -> bool {
        true
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        evaluate(
            name,
            Self::PARAMETERS,
            &args.args,
            args.number_rows,
            |arguments, rows| {
                let points = [SpatialKind::Point];
                let firsts = SpatialColumn::try_new(name, "a", &points, &arguments[0])?;
                let seconds = SpatialColumn::try_new(name, "b", &points, &arguments[1])?;
                let mut builder = Float64Builder::with_capacity(rows);
                for row in 0..rows {
                    builder.append_option(
                        firsts
                            .get_point(row)
                            .zip(seconds.get_point(row))
                            .map(|(a, b)| a.distance(b)),
                    );
                }
                Ok(Arc::new(builder.finish()) as ArrayRef)
            },
        )
    }
}

scalar_function! {
    /// `spatial_intersect(a, b)`: whether two points, rectangles or circles share a point.
    SpatialIntersectFunction, ["a", "b"]
}

impl ScalarUDFImpl for SpatialIntersectFunction {
    fn name(&self) -> &str {
        "spatial_intersect"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        check_arity(self.name(), Self::PARAMETERS, arg_types)?;
        Self::PARAMETERS
            .iter()
            .zip(arg_types)
            .map(|(parameter, data_type)| {
                coerce_spatial(self.name(), parameter, ANY_SHAPE, data_type)
            })
            .collect()
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Boolean)
    }

    fn is_strict(&self) -> bool {
        true
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = self.name();
        evaluate(
            name,
            Self::PARAMETERS,
            &args.args,
            args.number_rows,
            |arguments, rows| {
                let firsts = SpatialColumn::try_new(name, "a", ANY_SHAPE, &arguments[0])?;
                let seconds = SpatialColumn::try_new(name, "b", ANY_SHAPE, &arguments[1])?;
                let mut builder = BooleanBuilder::with_capacity(rows);
                for row in 0..rows {
                    builder.append_option(
                        firsts
                            .get(row)
                            .zip(seconds.get(row))
                            .map(|(a, b)| intersects(a, b)),
                    );
                }
                Ok(Arc::new(builder.finish()) as ArrayRef)
            },
        )
    }
}

/// Every spatial function, ready to register.
pub fn functions() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::new_from_impl(PointFunction::new()),
        ScalarUDF::new_from_impl(CircleFunction::new()),
        ScalarUDF::new_from_impl(RectangleFunction::new()),
        ScalarUDF::new_from_impl(SpatialDistanceFunction::new()),
        ScalarUDF::new_from_impl(SpatialIntersectFunction::new()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::functions::test_support::{column, context, error};
    use arrow::array::{BooleanArray, Float64Array};

    fn p(x: f64, y: f64) -> Point {
        Point { x, y }
    }

    fn rect(x1: f64, y1: f64, x2: f64, y2: f64) -> Shape {
        Shape::Rectangle(Rectangle::from_corners(p(x1, y1), p(x2, y2)))
    }

    fn disk(x: f64, y: f64, radius: f64) -> Shape {
        Shape::Circle(Circle {
            center: p(x, y),
            radius,
        })
    }

    /// Checks `intersects` in both argument orders, which must agree.
    fn assert_intersection(a: Shape, b: Shape, expected: bool) {
        assert_eq!(intersects(a, b), expected, "{a:?} vs {b:?}");
        assert_eq!(intersects(b, a), expected, "{b:?} vs {a:?}");
    }

    #[test]
    fn intersection_covers_every_pair_of_kinds_inclusively() {
        let origin = Shape::Point(p(0.0, 0.0));
        assert_intersection(origin, Shape::Point(p(0.0, 0.0)), true);
        assert_intersection(origin, Shape::Point(p(0.0, 1e-9)), false);
        // Rectangle borders and corners count.
        assert_intersection(origin, rect(0.0, 0.0, 1.0, 1.0), true);
        assert_intersection(Shape::Point(p(0.5, 1.0)), rect(0.0, 0.0, 1.0, 1.0), true);
        assert_intersection(Shape::Point(p(1.5, 0.5)), rect(0.0, 0.0, 1.0, 1.0), false);
        // The circle's border counts: distance 5 from (3, 4).
        assert_intersection(Shape::Point(p(3.0, 4.0)), disk(0.0, 0.0, 5.0), true);
        assert_intersection(Shape::Point(p(3.0, 4.1)), disk(0.0, 0.0, 5.0), false);
        // Rectangles touching along an edge overlap; separated ones do not.
        assert_intersection(rect(0.0, 0.0, 1.0, 1.0), rect(1.0, 0.5, 2.0, 3.0), true);
        assert_intersection(rect(0.0, 0.0, 1.0, 1.0), rect(1.1, 0.0, 2.0, 1.0), false);
        assert_intersection(rect(0.0, 0.0, 10.0, 10.0), rect(2.0, 2.0, 3.0, 3.0), true);
        // Circle near a rectangle's corner: the corner (1, 1) is √2 from (2, 2).
        assert_intersection(disk(2.0, 2.0, 1.5), rect(0.0, 0.0, 1.0, 1.0), true);
        assert_intersection(disk(2.0, 2.0, 1.4), rect(0.0, 0.0, 1.0, 1.0), false);
        // A circle inside a rectangle and a rectangle inside a circle both intersect.
        assert_intersection(disk(5.0, 5.0, 1.0), rect(0.0, 0.0, 10.0, 10.0), true);
        assert_intersection(disk(0.0, 0.0, 100.0), rect(1.0, 1.0, 2.0, 2.0), true);
        // Circles touching externally intersect.
        assert_intersection(disk(0.0, 0.0, 1.0), disk(3.0, 0.0, 2.0), true);
        assert_intersection(disk(0.0, 0.0, 1.0), disk(3.0, 0.0, 1.9), false);
    }

    #[test]
    fn rectangles_normalize_their_corners_and_survive_nan() {
        let r = Rectangle::from_corners(p(3.0, 1.0), p(1.0, 4.0));
        assert_eq!(r.lower_left, p(1.0, 1.0));
        assert_eq!(r.upper_right, p(3.0, 4.0));
        // NaN coordinates make meaningless shapes, but must not panic (f64::clamp would).
        let odd = Shape::Rectangle(Rectangle {
            lower_left: p(f64::NAN, 0.0),
            upper_right: p(f64::NAN, 1.0),
        });
        assert!(!intersects(odd, Shape::Point(p(0.0, 0.0))));
        let _either_answer = intersects(odd, disk(0.0, 0.0, 1.0));
    }

    #[test]
    fn kinds_are_recognised_by_child_names() {
        assert_eq!(
            SpatialKind::of(&SpatialKind::Point.data_type()),
            Some(SpatialKind::Point)
        );
        assert_eq!(
            SpatialKind::of(&SpatialKind::Rectangle.data_type()),
            Some(SpatialKind::Rectangle)
        );
        assert_eq!(
            SpatialKind::of(&SpatialKind::Circle.data_type()),
            Some(SpatialKind::Circle)
        );
        let reordered = DataType::Struct(Fields::from(vec![
            Field::new("y", DataType::Int32, true),
            Field::new("x", DataType::Int64, true),
        ]));
        assert_eq!(SpatialKind::of(&reordered), Some(SpatialKind::Point));
        let textual = DataType::Struct(Fields::from(vec![
            Field::new("x", DataType::Utf8, true),
            Field::new("y", DataType::Utf8, true),
        ]));
        assert_eq!(SpatialKind::of(&textual), None);
        let extra = DataType::Struct(Fields::from(vec![
            Field::new("x", DataType::Float64, false),
            Field::new("y", DataType::Float64, false),
            Field::new("z", DataType::Float64, false),
        ]));
        assert_eq!(SpatialKind::of(&extra), None);
        assert_eq!(SpatialKind::of(&DataType::Float64), None);
    }

    fn struct_values(array: &ArrayRef) -> Vec<Option<Vec<f64>>> {
        let structs = array.as_struct();
        (0..structs.len())
            .map(|row| {
                structs.is_valid(row).then(|| {
                    structs
                        .columns()
                        .iter()
                        .map(|child| child.as_primitive::<Float64Type>().value(row))
                        .collect()
                })
            })
            .collect()
    }

    #[tokio::test]
    async fn constructors_produce_the_storage_types() {
        let point = column("SELECT point(1, 2.5)").await;
        assert_eq!(point.data_type(), &SpatialKind::Point.data_type());
        assert_eq!(struct_values(&point), vec![Some(vec![1.0, 2.5])]);

        let circle = column("SELECT circle(point(1, 2), 3)").await;
        assert_eq!(circle.data_type(), &SpatialKind::Circle.data_type());
        assert_eq!(struct_values(&circle), vec![Some(vec![1.0, 2.0, 3.0])]);

        let rectangle = column("SELECT rectangle(point(3, 4), point(1, 2))").await;
        assert_eq!(rectangle.data_type(), &SpatialKind::Rectangle.data_type());
        assert_eq!(
            struct_values(&rectangle),
            vec![Some(vec![1.0, 2.0, 3.0, 4.0])]
        );
    }

    #[tokio::test]
    async fn storage_types_are_exactly_float64_structs_with_non_nullable_children() {
        // Mirrors cairn-model's arrow_mapping, which the results must equal to be insertable.
        let expected = DataType::Struct(Fields::from(vec![
            Field::new("x1", DataType::Float64, false),
            Field::new("y1", DataType::Float64, false),
            Field::new("x2", DataType::Float64, false),
            Field::new("y2", DataType::Float64, false),
        ]));
        assert_eq!(SpatialKind::Rectangle.data_type(), expected);
    }

    #[tokio::test]
    async fn results_carry_the_storage_extension_tag() {
        let frame = context()
            .sql("SELECT point(1, 2) AS p, circle(point(0, 0), 1) AS c")
            .await
            .expect("plans");
        let schema = frame.schema();
        let tag = |name: &str| {
            schema
                .field_with_unqualified_name(name)
                .ok()
                .and_then(|field| field.metadata().get(EXTENSION_NAME_KEY).cloned())
        };
        assert_eq!(tag("p").as_deref(), Some("cairn.point"));
        assert_eq!(tag("c").as_deref(), Some("cairn.circle"));
    }

    #[tokio::test]
    async fn intersect_and_distance_through_sql() {
        let inside = column("SELECT spatial_intersect(point(1, 1), circle(point(0, 0), 2))").await;
        assert_eq!(inside.as_boolean(), &BooleanArray::from(vec![true]));
        let outside = column("SELECT spatial_intersect(circle(point(0, 0), 2), point(2, 2))").await;
        assert_eq!(outside.as_boolean(), &BooleanArray::from(vec![false]));
        let overlapping = column(
            "SELECT spatial_intersect(rectangle(point(0, 0), point(2, 2)), \
             circle(point(3, 1), 1))",
        )
        .await;
        assert_eq!(overlapping.as_boolean(), &BooleanArray::from(vec![true]));
        let distance = column("SELECT spatial_distance(point(0, 0), point(3, 4))").await;
        assert_eq!(
            distance.as_primitive::<Float64Type>(),
            &Float64Array::from(vec![5.0])
        );
    }

    #[tokio::test]
    async fn array_inputs_are_evaluated_per_row() {
        let hits = column(
            "SELECT spatial_intersect(point(x, y), rectangle(point(0, 0), point(2, 2))) \
             FROM (VALUES (1, 1, 1), (3, 3, 2), (NULL, 1, 3), (2, 0, 4)) AS t(x, y, n) \
             ORDER BY n",
        )
        .await;
        assert_eq!(
            hits.as_boolean(),
            &BooleanArray::from(vec![Some(true), Some(false), None, Some(true)])
        );
        let distances = column(
            "SELECT spatial_distance(point(x, y), point(0, 0)) \
             FROM (VALUES (3.0, 4.0, 1), (0.0, 0.0, 2), (1.0, NULL, 3)) AS t(x, y, n) ORDER BY n",
        )
        .await;
        assert_eq!(
            distances.as_primitive::<Float64Type>(),
            &Float64Array::from(vec![Some(5.0), Some(0.0), None])
        );
        let circles = column(
            "SELECT circle(point(x, 0), r) \
             FROM (VALUES (1, 2.0, 1), (5, NULL, 2)) AS t(x, r, n) ORDER BY n",
        )
        .await;
        assert_eq!(
            struct_values(&circles),
            vec![Some(vec![1.0, 0.0, 2.0]), None]
        );
    }

    #[tokio::test]
    async fn shapes_of_mixed_kinds_intersect_row_by_row() {
        let hits = column(
            "SELECT spatial_intersect(a, b) FROM (\
               SELECT 1 AS n, circle(point(0, 0), 1) AS a, circle(point(1.5, 0), 0.5) AS b \
               UNION ALL SELECT 2, circle(point(0, 0), 1), circle(point(5, 0), 1)\
             ) ORDER BY n",
        )
        .await;
        assert_eq!(hits.as_boolean(), &BooleanArray::from(vec![true, false]));
    }

    #[tokio::test]
    async fn nulls_propagate() {
        for sql in [
            "SELECT point(NULL, 1) IS NULL",
            "SELECT circle(point(0, 0), NULL) IS NULL",
            "SELECT circle(NULL, 1) IS NULL",
            "SELECT rectangle(point(0, 0), NULL) IS NULL",
            "SELECT spatial_distance(point(NULL, 1), point(0, 0)) IS NULL",
            "SELECT spatial_intersect(NULL, point(0, 0)) IS NULL",
            "SELECT spatial_intersect(circle(point(0, NULL), 1), point(0, 0)) IS NULL",
        ] {
            let result = column(sql).await;
            assert_eq!(
                result.as_boolean(),
                &BooleanArray::from(vec![true]),
                "{sql}"
            );
        }
    }

    #[tokio::test]
    async fn structs_built_elsewhere_are_recognised_by_shape() {
        let hit = column(
            "SELECT spatial_intersect(named_struct('x', 1, 'y', 1), circle(point(0, 0), 2))",
        )
        .await;
        assert_eq!(hit.as_boolean(), &BooleanArray::from(vec![true]));
    }

    async fn assert_error_names(sql: &str, function: &str) {
        let message = error(sql).await.to_string();
        assert!(
            message.contains(function),
            "error for {sql} should name {function}: {message}"
        );
    }

    #[tokio::test]
    async fn bad_arguments_are_errors_naming_the_function() {
        assert_error_names("SELECT point(1)", "point").await;
        assert_error_names("SELECT point('a', 1)", "point").await;
        assert_error_names("SELECT circle(point(0, 0), -1)", "circle").await;
        assert_error_names("SELECT circle(1, 1)", "circle").await;
        assert_error_names(
            "SELECT circle(point(0, 0), r) FROM (VALUES (1.0), (-0.5)) AS t(r)",
            "circle",
        )
        .await;
        assert_error_names(
            "SELECT rectangle(point(0, 0), circle(point(0, 0), 1))",
            "rectangle",
        )
        .await;
        assert_error_names(
            "SELECT spatial_distance(point(0, 0), circle(point(0, 0), 1))",
            "spatial_distance",
        )
        .await;
        assert_error_names("SELECT spatial_intersect(1, 2)", "spatial_intersect").await;
        assert_error_names("SELECT spatial_intersect(point(0, 0))", "spatial_intersect").await;
    }
}
