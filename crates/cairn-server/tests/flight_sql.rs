//! Arrow Flight SQL against a real server over real sockets: statements, one endpoint per result
//! partition read in parallel, prepared statements with bound parameters, updates, catalog
//! calls, errors, the token, a client that stops reading; and the ADBC Flight SQL driver with
//! pyarrow from Python.

mod common;

use arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow_flight::FlightInfo;
use arrow_flight::sql::CommandGetTables;
use arrow_flight::sql::client::FlightSqlServiceClient;
use cairn_server::ServerConfig;
use common::{TestServer, metric, run_python, serve};
use futures::TryStreamExt;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

async fn client(server: &TestServer) -> FlightSqlServiceClient<Channel> {
    let channel = Channel::from_shared(format!("http://{}", server.flight))
        .unwrap()
        .connect()
        .await
        .unwrap();
    FlightSqlServiceClient::new(channel)
}

/// Every endpoint of `info`, read concurrently, in endpoint order.
async fn read_all(client: &FlightSqlServiceClient<Channel>, info: FlightInfo) -> Vec<RecordBatch> {
    let reads = info.endpoint.into_iter().map(|endpoint| {
        let mut client = client.clone();
        async move {
            let stream = client.do_get(endpoint.ticket.unwrap()).await.unwrap();
            stream.try_collect::<Vec<_>>().await.unwrap()
        }
    });
    futures::future::join_all(reads)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// The values of the string column `name` across `batches`.
fn strings(batches: &[RecordBatch], name: &str) -> Vec<String> {
    batches
        .iter()
        .flat_map(|b| {
            let column = b.column_by_name(name).unwrap();
            let column = column.as_any().downcast_ref::<StringArray>().unwrap();
            (0..column.len())
                .map(|i| column.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// One row binding `$1` to `value`.
fn int64_parameter(value: i64) -> RecordBatch {
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("$1", DataType::Int64, false)])),
        vec![Arc::new(Int64Array::from(vec![value]))],
    )
    .unwrap()
}

fn ids(batches: &[RecordBatch]) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            let column = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
            column.values().to_vec()
        })
        .collect()
}

async fn load_items(client: &mut FlightSqlServiceClient<Channel>, rows: i64) {
    let created = client
        .execute_update(
            "CREATE TABLE items (id BIGINT PRIMARY KEY, name VARCHAR, bucket BIGINT)".into(),
            None,
        )
        .await
        .unwrap();
    assert_eq!(created, 0);
    let values: Vec<String> = (0..rows)
        .map(|i| format!("({i}, 'item-{i}', {})", i % 10))
        .collect();
    let inserted = client
        .execute_update(
            format!("INSERT INTO items VALUES {}", values.join(", ")),
            None,
        )
        .await
        .unwrap();
    assert_eq!(inserted, rows);
}

#[test]
fn statements_read_every_partition_in_parallel_and_prepared_statements_bind() {
    let server = serve(ServerConfig::default());
    server.runtime.block_on(async {
        let mut client = client(&server).await;
        load_items(&mut client, 1000).await;

        let info = client
            .execute("SELECT id, name FROM items".into(), None)
            .await
            .unwrap();
        assert!(
            info.endpoint.len() > 1,
            "a scan of a 4-partition dataset has several endpoints, got {}",
            info.endpoint.len()
        );
        assert!(!info.ordered);
        let batches = read_all(&client, info).await;
        let all: BTreeSet<i64> = ids(&batches).into_iter().collect();
        assert_eq!(all, (0..1000).collect::<BTreeSet<_>>());

        let info = client
            .execute("SELECT id FROM items ORDER BY id DESC LIMIT 3".into(), None)
            .await
            .unwrap();
        assert_eq!(info.endpoint.len(), 1);
        assert!(info.ordered);
        assert_eq!(ids(&read_all(&client, info).await), vec![999, 998, 997]);

        let mut lookup = client
            .prepare("SELECT name FROM items WHERE id = $1".into(), None)
            .await
            .unwrap();
        assert_eq!(lookup.parameter_schema().unwrap().fields().len(), 1);
        assert_eq!(lookup.dataset_schema().unwrap().field(0).name(), "name");
        for id in [42i64, 7] {
            lookup.set_parameters(int64_parameter(id)).unwrap();
            let batches = read_all(&client, lookup.execute().await.unwrap()).await;
            assert_eq!(strings(&batches, "name"), vec![format!("item-{id}")]);
        }
        lookup.close().await.unwrap();

        let mut delete = client
            .prepare("DELETE FROM items WHERE bucket = $1".into(), None)
            .await
            .unwrap();
        delete.set_parameters(int64_parameter(3)).unwrap();
        assert_eq!(delete.execute_update().await.unwrap(), 100);
        let info = client
            .execute("SELECT count(*) FROM items".into(), None)
            .await
            .unwrap();
        assert_eq!(ids(&read_all(&client, info).await), vec![900]);

        // Every result read to its end has left the store.
        assert_eq!(metric(&server, "cairn_result_store_results"), 0.0);
    });
}

#[test]
fn catalogs_errors_tokens_and_abandoned_reads() {
    let server = serve(ServerConfig {
        token: Some("s3cret".into()),
        ..ServerConfig::default()
    });
    server.runtime.block_on(async {
        let mut anonymous = client(&server).await;
        let refused = anonymous
            .execute("SELECT 1".into(), None)
            .await
            .unwrap_err()
            .to_string();
        assert!(refused.contains("missing token"), "{refused}");

        let mut client = client(&server).await;
        client.set_token("s3cret".into());
        load_items(&mut client, 100).await;

        let tables = client
            .get_tables(CommandGetTables {
                include_schema: true,
                ..Default::default()
            })
            .await
            .unwrap();
        let names = strings(&read_all(&client, tables).await, "table_name");
        assert!(names.contains(&"items".to_string()), "{names:?}");
        let catalogs = read_all(&client, client.clone().get_catalogs().await.unwrap()).await;
        assert_eq!(catalogs.iter().map(|b| b.num_rows()).sum::<usize>(), 1);

        let syntax = client
            .execute("SELEC id FROM items".into(), None)
            .await
            .unwrap_err()
            .to_string();
        assert!(syntax.contains("CAIRN-"), "{syntax}");
        let unknown = client
            .execute("SELECT * FROM nope".into(), None)
            .await
            .unwrap_err()
            .to_string();
        assert!(unknown.contains("nope"), "{unknown}");
        let bad_ticket = client
            .do_get(arrow_flight::Ticket::new("not a ticket"))
            .await
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(!bad_ticket.is_empty(), "a made-up ticket is refused");

        // A client that reads one batch of a long result and goes away cancels the query.
        let info = client
            .execute(
                "SELECT a.id, b.id FROM items a CROSS JOIN items b CROSS JOIN items c".into(),
                None,
            )
            .await
            .unwrap();
        {
            let ticket = info.endpoint[0].ticket.clone().unwrap();
            let mut stream = client.do_get(ticket).await.unwrap();
            stream.try_next().await.unwrap().unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while metric(&server, "cairn_result_store_results") != 0.0 {
            assert!(
                Instant::now() < deadline,
                "the abandoned result is still held"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}

#[test]
fn adbc_and_pyarrow_read_from_python() {
    let server = serve(ServerConfig::default());
    let answer = run_python("flight_adbc.py", &[format!("grpc://{}", server.flight)]);
    assert_eq!(answer["inserted"], 50);
    assert_eq!(answer["count"], 50);
    assert_eq!(answer["sum"], (0..50).sum::<i64>());
    assert_eq!(answer["lookup"], "item-7");
    assert_eq!(answer["deleted"], 25);
    assert_eq!(answer["after_delete"], 25);
    assert!(
        answer["tables"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("items"))
    );
}
