//! A shared store in one PostgreSQL table of keys and bytes, through `tokio-postgres`:
//! `postgres://user@host:port/db?table=name` (default table `broker_objects`).
//!
//! - Keys are `bytea`, so that `ORDER BY key` is byte order whatever the database's
//!   collation; the table is made if absent.
//! - **Create** is `INSERT ... ON CONFLICT (key) DO NOTHING`: the primary key makes one
//!   writer of a key win, whichever node it is; one row inserted is `Created`, none
//!   `Exists`. Each statement commits on its own (autocommit), before its answer.
//! - **List** is a range of the primary key past `after`, under the prefix (up to the
//!   prefix with its last byte raised), `ORDER BY key LIMIT` one past the page.
//! - An error the server answered with (a SQLSTATE) did nothing and is `Failed`; a
//!   write whose connection broke before its answer is `Unknown` (it may have
//!   committed). A broken connection is opened again by the next operation.

use super::adapter::{shown, Pending, Store};
use broker_core::cluster::store::{StoreError, StoreOp, StoreOutput, StoreResult};
use broker_core::Bytes;
use std::sync::Arc;
use tokio::sync::Mutex;
use tokio_postgres::{Client, NoTls};

/// The table a `postgres://` URL names when it names none.
pub const DEFAULT_TABLE: &str = "broker_objects";

/// The PostgreSQL store.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// The connection string, without the `table` parameter.
    config: String,
    table: String,
    client: Mutex<Option<Arc<Client>>>,
}

impl PgStore {
    /// The store a `postgres://` or `postgresql://` URL names; connects at its first
    /// operation.
    pub fn new(url: &str) -> Result<PgStore, String> {
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut table = DEFAULT_TABLE.to_string();
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.strip_prefix("table=") {
                Some(t) => table = t.to_string(),
                None => kept.push(pair),
            }
        }
        if table.is_empty() || !table.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("table {table:?}: a table name is letters, digits and '_'"));
        }
        let config = if kept.is_empty() { base.to_string() } else { format!("{base}?{}", kept.join("&")) };
        config.parse::<tokio_postgres::Config>().map_err(|e| format!("not a PostgreSQL connection URL: {e}"))?;
        Ok(PgStore { inner: Arc::new(Inner { config, table, client: Mutex::new(None) }) })
    }

    /// The same table through a connection of its own (opened at its first operation).
    pub fn reconnected(&self) -> PgStore {
        let (config, table) = (self.inner.config.clone(), self.inner.table.clone());
        PgStore { inner: Arc::new(Inner { config, table, client: Mutex::new(None) }) }
    }

    /// Carries out `op`.
    pub async fn apply(&self, op: StoreOp) -> StoreResult {
        let write = matches!(op, StoreOp::Create { .. } | StoreOp::Delete { .. });
        let client = self.inner.client().await?;
        let t = &self.inner.table;
        let result = match &op {
            StoreOp::Create { key, bytes } => {
                let sql = format!("INSERT INTO {t} (key, bytes) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING");
                client.execute(&sql, &[&key.as_bytes(), &bytes.as_ref()]).await.map(|n| {
                    if n == 1 {
                        StoreOutput::Created
                    } else {
                        StoreOutput::Exists
                    }
                })
            }
            StoreOp::Get { key } => {
                let sql = format!("SELECT bytes FROM {t} WHERE key = $1");
                client.query_opt(&sql, &[&key.as_bytes()]).await.map(|row| match row {
                    Some(row) => StoreOutput::Found(Bytes::from(row.get::<_, Vec<u8>>(0))),
                    None => StoreOutput::Missing,
                })
            }
            StoreOp::List { prefix, after, limit } => {
                let from = match after {
                    Some(a) if a.as_str() >= prefix.as_str() => a.as_bytes(),
                    _ => b"",
                };
                let want = i64::from(*limit) + 1;
                let rows = match raised(prefix.as_bytes()) {
                    Some(below) => {
                        let sql = format!(
                            "SELECT key FROM {t} WHERE key >= $1 AND key > $2 AND key < $3 ORDER BY key LIMIT $4"
                        );
                        client.query(&sql, &[&prefix.as_bytes(), &from, &below, &want]).await
                    }
                    None => {
                        let sql = format!("SELECT key FROM {t} WHERE key >= $1 AND key > $2 ORDER BY key LIMIT $3");
                        client.query(&sql, &[&prefix.as_bytes(), &from, &want]).await
                    }
                };
                rows.map(|rows| {
                    let mut keys: Vec<String> = rows
                        .iter()
                        .map(|r| String::from_utf8_lossy(r.get::<_, &[u8]>(0)).into_owned())
                        .filter(|k| k.starts_with(prefix.as_str()))
                        .collect();
                    let more = keys.len() > *limit as usize;
                    keys.truncate(*limit as usize);
                    StoreOutput::Listed { keys, more }
                })
            }
            StoreOp::Delete { key } => {
                let sql = format!("DELETE FROM {t} WHERE key = $1");
                client.execute(&sql, &[&key.as_bytes()]).await.map(|_| StoreOutput::Deleted)
            }
        };
        result.map_err(|e| {
            // The server answered: the statement did nothing. Else the connection broke,
            // and a write may have committed before it did.
            let answered = e.as_db_error().is_some();
            if !answered {
                self.inner.forget(&client);
            }
            let what = format!("{}: {}", shown(&op), said(&e));
            if answered || !write {
                StoreError::Failed(what)
            } else {
                StoreError::Unknown(what)
            }
        })
    }
}

impl Store for PgStore {
    fn run(&self, op: StoreOp) -> Pending {
        let store = self.clone();
        Box::pin(async move { store.apply(op).await })
    }
}

impl Inner {
    /// The connection, opened (and the table made) if there is none or it broke.
    async fn client(&self) -> Result<Arc<Client>, StoreError> {
        let mut held = self.client.lock().await;
        if let Some(client) = held.as_ref().filter(|c| !c.is_closed()) {
            return Ok(client.clone());
        }
        let failed = |e: tokio_postgres::Error| StoreError::Failed(format!("connecting to PostgreSQL: {}", said(&e)));
        let (client, connection) = tokio_postgres::connect(&self.config, NoTls).await.map_err(failed)?;
        tokio::spawn(async move {
            // Its end is seen by the next operation, as a closed client.
            let _ = connection.await;
        });
        // Nodes (or one node's reconnections) making the table at once: PostgreSQL's
        // `IF NOT EXISTS` does not hold against a concurrent create (one of them fails
        // on its catalog's unique index), so the creates take turns under a lock that
        // the implicit transaction of this one batch holds.
        let table = &self.table;
        let sql = format!(
            "SELECT pg_advisory_xact_lock(hashtext('broker-cluster table {table}')); \
             CREATE TABLE IF NOT EXISTS {table} (key bytea PRIMARY KEY, bytes bytea NOT NULL)"
        );
        if let Err(e) = client.batch_execute(&sql).await {
            return Err(StoreError::Failed(format!("making the table {table}: {}", said(&e))));
        }
        let client = Arc::new(client);
        *held = Some(client.clone());
        Ok(client)
    }

    /// Drops `client` if it is still the one held, so that the next operation connects.
    fn forget(&self, client: &Arc<Client>) {
        if let Ok(mut held) = self.client.try_lock() {
            if held.as_ref().is_some_and(|c| Arc::ptr_eq(c, client)) {
                *held = None;
            }
        }
    }
}

/// The least byte string above every string that starts with `prefix`, if any: the
/// prefix with its last byte below 0xff raised by one, and what follows it dropped.
fn raised(prefix: &[u8]) -> Option<Vec<u8>> {
    let last = prefix.iter().rposition(|b| *b != 0xff)?;
    let mut below = prefix[..=last].to_vec();
    below[last] += 1;
    Some(below)
}

/// An error as PostgreSQL put it: the server's message and code where it answered
/// (the client's own `Display` says only "db error"), else the client's words.
fn said(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} (SQLSTATE {})", db.message(), db.code().code()),
        None => e.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_above_a_prefix() {
        assert_eq!(raised(b"d/1/"), Some(b"d/10".to_vec()));
        assert_eq!(raised(b"a\xff\xff"), Some(b"b".to_vec()));
        assert_eq!(raised(b"\xff"), None);
        assert_eq!(raised(b""), None);
    }

    #[test]
    fn urls_name_their_table() {
        let s = PgStore::new("postgres://u@127.0.0.1:5432/db?table=t1").unwrap();
        assert_eq!((s.inner.table.as_str(), s.inner.config.as_str()), ("t1", "postgres://u@127.0.0.1:5432/db"));
        let s = PgStore::new("postgres://u@h/db?connect_timeout=5").unwrap();
        assert_eq!(
            (s.inner.table.as_str(), s.inner.config.as_str()),
            (DEFAULT_TABLE, "postgres://u@h/db?connect_timeout=5")
        );
        assert!(PgStore::new("postgres://u@h/db?table=x;drop").err().unwrap().contains("letters, digits"));
    }
}
