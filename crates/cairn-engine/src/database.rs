//! The database: a storage instance plus a DataFusion session in which every dataset is a
//! table. Dataset names are case-sensitive in SQL, as in AsterixDB.

use crate::error::Result;
use crate::table::DatasetTable;
use arrow::array::RecordBatch;
use cairn_model::DatasetType;
use cairn_storage::{Storage, StorageOptions};
use datafusion::common::TableReference;
use datafusion::prelude::{SessionConfig, SessionContext};
use std::path::Path;
use std::sync::Arc;

pub struct Database {
    storage: Arc<Storage>,
    context: SessionContext,
}

impl Database {
    /// Opens (or creates) the database in `dir` and registers every dataset as a table.
    pub fn open(dir: impl AsRef<Path>, options: StorageOptions) -> Result<Database> {
        let storage = Arc::new(Storage::open(dir, options)?);
        let config = SessionConfig::new()
            .with_information_schema(true)
            .set_bool("datafusion.sql_parser.enable_ident_normalization", false);
        let database = Database {
            storage,
            context: SessionContext::new_with_config(config),
        };
        for name in database.storage.dataset_names() {
            database.register(&name)?;
        }
        Ok(database)
    }

    fn register(&self, name: &str) -> Result<()> {
        let dataset = self.storage.dataset(name)?;
        // A bare reference: a plain string would be parsed as SQL and lower-cased.
        self.context.register_table(
            TableReference::bare(name),
            Arc::new(DatasetTable::new(dataset)),
        )?;
        Ok(())
    }

    pub fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    pub fn context(&self) -> &SessionContext {
        &self.context
    }

    /// Creates a dataset and makes it queryable.
    pub fn create_dataset(
        &self,
        name: &str,
        dataset_type: DatasetType,
        partitions: Option<u32>,
    ) -> Result<()> {
        self.storage
            .create_dataset(name, dataset_type, partitions)?;
        self.register(name)
    }

    /// Drops a dataset and its table.
    pub fn drop_dataset(&self, name: &str) -> Result<()> {
        self.context.deregister_table(TableReference::bare(name))?;
        self.storage.drop_dataset(name)?;
        Ok(())
    }

    /// Runs one SQL query and collects its result.
    pub async fn sql(&self, text: &str) -> Result<Vec<RecordBatch>> {
        let frame = self.context.sql(text).await?;
        Ok(frame.collect().await?)
    }
}
