//! The eight TPC-H tables as Cairn stores them: their primary keys, their tpchgen generators and
//! how many parts a table is cut into per scale factor, the conversion of tpchgen's Arrow batches to Cairn's
//! types, and the `CREATE TABLE` statement derived from the converted schema.
//!
//! Money and quantities are DOUBLE: Cairn has no DECIMAL type yet. Every system in a TPC-H run
//! reads the same generated files, so they all compute over the same doubles.

use arrow::array::{ArrayRef, RecordBatch, RecordBatchReader};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::error::ArrowError;
use std::sync::Arc;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator,
    PartSuppGenerator, RegionGenerator, SupplierGenerator,
};
use tpchgen_arrow::{
    CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow, RegionArrow,
    SupplierArrow,
};

/// tpchgen's batches of one part (numbered from 1) of a table at a scale factor.
pub type Generator = fn(f64, i32, i32) -> Box<dyn RecordBatchReader + Send>;

/// One TPC-H table.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    pub name: &'static str,
    pub primary_key: &'static [&'static str],
    /// The part of the primary key that places rows in partitions (empty: all of it): a
    /// lineitem lives with its order's other lines, a partsupp with its part's other suppliers.
    pub partition_key: &'static [&'static str],
    /// Secondary btree indexes, each on the fields listed. Of the foreign-key and date
    /// indexes the seeds gave PostgreSQL (bench/peers/tpch_peer.py's `INDEXES`), the one
    /// Cairn's planner chooses: parts look up their lines through it in Q8, Q17 and Q19.
    /// With all nine built, no plan of the 22 queries used another at SF 1; they cost load
    /// time, storage and memory for nothing.
    pub indexes: &'static [&'static [&'static str]],
    /// Generator parts per unit of scale factor (rows grow with it); 0 for nation and region,
    /// whose 25 and 5 rows do not.
    pub parts_per_scale_factor: f64,
    /// The schema tpchgen generates, before [`cairn_schema`] converts it.
    pub tpchgen_schema: fn() -> SchemaRef,
    pub generator: Generator,
}

/// Every table, small ones first.
pub const TABLES: [Table; 8] = [
    Table {
        name: "region",
        primary_key: &["r_regionkey"],
        partition_key: &[],
        indexes: &[],
        parts_per_scale_factor: 0.0,
        tpchgen_schema: RegionArrow::schema_ref,
        generator: |scale_factor, part, parts| {
            Box::new(RegionArrow::new(RegionGenerator::new(
                scale_factor,
                part,
                parts,
            )))
        },
    },
    Table {
        name: "nation",
        primary_key: &["n_nationkey"],
        partition_key: &[],
        indexes: &[],
        parts_per_scale_factor: 0.0,
        tpchgen_schema: NationArrow::schema_ref,
        generator: |scale_factor, part, parts| {
            Box::new(NationArrow::new(NationGenerator::new(
                scale_factor,
                part,
                parts,
            )))
        },
    },
    Table {
        name: "supplier",
        primary_key: &["s_suppkey"],
        partition_key: &[],
        indexes: &[],
        parts_per_scale_factor: 0.2,
        tpchgen_schema: SupplierArrow::schema_ref,
        generator: |scale_factor, part, parts| {
            Box::new(SupplierArrow::new(SupplierGenerator::new(
                scale_factor,
                part,
                parts,
            )))
        },
    },
    Table {
        name: "customer",
        primary_key: &["c_custkey"],
        partition_key: &[],
        indexes: &[],
        parts_per_scale_factor: 1.0,
        tpchgen_schema: CustomerArrow::schema_ref,
        generator: |scale_factor, part, parts| {
            Box::new(CustomerArrow::new(CustomerGenerator::new(
                scale_factor,
                part,
                parts,
            )))
        },
    },
    Table {
        name: "part",
        primary_key: &["p_partkey"],
        partition_key: &[],
        indexes: &[],
        parts_per_scale_factor: 1.0,
        tpchgen_schema: PartArrow::schema_ref,
        generator: |scale_factor, part, parts| {
            Box::new(PartArrow::new(PartGenerator::new(
                scale_factor,
                part,
                parts,
            )))
        },
    },
    Table {
        name: "partsupp",
        primary_key: &["ps_partkey", "ps_suppkey"],
        partition_key: &["ps_partkey"],
        indexes: &[],
        parts_per_scale_factor: 2.0,
        tpchgen_schema: PartSuppArrow::schema_ref,
        generator: |scale_factor, part, parts| {
            Box::new(PartSuppArrow::new(PartSuppGenerator::new(
                scale_factor,
                part,
                parts,
            )))
        },
    },
    Table {
        name: "orders",
        primary_key: &["o_orderkey"],
        partition_key: &[],
        indexes: &[],
        parts_per_scale_factor: 3.0,
        tpchgen_schema: OrderArrow::schema_ref,
        generator: |scale_factor, part, parts| {
            Box::new(OrderArrow::new(OrderGenerator::new(
                scale_factor,
                part,
                parts,
            )))
        },
    },
    Table {
        name: "lineitem",
        primary_key: &["l_orderkey", "l_linenumber"],
        partition_key: &["l_orderkey"],
        indexes: &[&["l_partkey", "l_suppkey"]],
        parts_per_scale_factor: 10.0,
        tpchgen_schema: LineItemArrow::schema_ref,
        generator: |scale_factor, part, parts| {
            Box::new(LineItemArrow::new(LineItemGenerator::new(
                scale_factor,
                part,
                parts,
            )))
        },
    },
];

/// Rows per data page of every TPC-H table. The queries read most of each table they touch,
/// and per-page work was a sixth of Q1's time with the default 256-row pages; pages of 1,024
/// rows cut the CPU of the scan-bound queries by 12–26 % (bench/results/page-size-2026-11-29/).
/// Index fetches (Q8's, Q17's and Q19's lookups of lineitems by part) decode more per row.
pub const PAGE_ROWS: u32 = 1024;

/// The table named `name`.
pub fn table(name: &str) -> Option<&'static Table> {
    TABLES.iter().find(|t| t.name == name)
}

impl Table {
    /// Generator parts at `scale_factor`: about 600,000 lineitem rows each, so parts are
    /// work units for every core and a progress bar moves.
    pub fn parts(&self, scale_factor: f64) -> usize {
        ((scale_factor * self.parts_per_scale_factor).ceil() as usize).max(1)
    }

    /// `CREATE INDEX` for each of [`Table::indexes`], named after the table and fields.
    pub fn index_statements(&self) -> Vec<String> {
        self.indexes
            .iter()
            .map(|fields| {
                format!(
                    "CREATE INDEX {}_{} ON {}({})",
                    self.name,
                    fields.join("_"),
                    self.name,
                    fields.join(", ")
                )
            })
            .collect()
    }

    /// `CREATE TABLE` for this table with `schema` (a converted one, see [`to_cairn_types`]):
    /// every column NOT NULL, the primary key declared, pages of [`PAGE_ROWS`] rows.
    pub fn create_statement(&self, schema: &Schema) -> Result<String, String> {
        let mut columns = Vec::new();
        for field in schema.fields() {
            let sql_type = match field.data_type() {
                DataType::Int32 => "INT",
                DataType::Int64 => "BIGINT",
                DataType::Float64 => "DOUBLE",
                DataType::Utf8 => "VARCHAR",
                DataType::Date32 => "DATE",
                other => {
                    return Err(format!(
                        "{}.{} has type {other}, which the TPC-H tables do not use",
                        self.name,
                        field.name()
                    ));
                }
            };
            columns.push(format!("{} {sql_type} NOT NULL", field.name()));
        }
        let partition_by = match self.partition_key {
            [] => String::new(),
            fields => format!(" PARTITION BY ({})", fields.join(", ")),
        };
        Ok(format!(
            "CREATE TABLE {} ({}, PRIMARY KEY ({})) WITH (page_rows = {PAGE_ROWS}){partition_by}",
            self.name,
            columns.join(", "),
            self.primary_key.join(", ")
        ))
    }
}

/// The type Cairn stores a tpchgen column as: decimals become doubles, string views strings.
fn cairn_type(data_type: &DataType) -> DataType {
    match data_type {
        DataType::Decimal128(..) | DataType::Decimal256(..) => DataType::Float64,
        DataType::Utf8View | DataType::LargeUtf8 => DataType::Utf8,
        other => other.clone(),
    }
}

/// `schema` with Cairn's types (see [`cairn_type`]), every column non-nullable.
pub fn cairn_schema(schema: &Schema) -> SchemaRef {
    Arc::new(Schema::new(
        schema
            .fields()
            .iter()
            .map(|f| Field::new(f.name(), cairn_type(f.data_type()), false))
            .collect::<Vec<_>>(),
    ))
}

/// A tpchgen batch converted to Cairn's types.
pub fn to_cairn_types(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    let schema = cairn_schema(&batch.schema());
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| cast(column, field.data_type()))
        .collect::<Result<Vec<ArrayRef>, _>>()?;
    RecordBatch::try_new(schema, columns)
}
