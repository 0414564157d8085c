//! Bench history: every bench row is appended to an SQLite database (default
//! `$XDG_DATA_HOME/ferrofit/history.sqlite`), keyed by device, driver, backend,
//! engine, job and ferrofit version, so `--compare last` can show what changed
//! since the previous run on the same device — a driver update's effect, say.
//! Each bench is one transaction: a crash or a kill loses at most that bench,
//! and concurrent benches wait for each other (WAL, busy timeout).

use super::export::BenchRecord;
use crate::error::{FerroError, Result};
use rusqlite::{params, Connection};
use std::path::{Path, PathBuf};

/// `v` as JSON with every object's keys sorted: the same text for the same
/// configuration, whatever the order of its fields.
fn canonical(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let items: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{}:{}", Value::String(k.clone()), canonical(&m[k])))
                .collect();
            format!("{{{}}}", items.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

/// The default database path.
pub fn default_path() -> PathBuf {
    crate::io::data_dir().join("history.sqlite")
}

/// An open history database.
pub struct History {
    conn: Connection,
}

/// The previous measurement of a row, for comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Previous {
    /// When it was measured (SQLite's `datetime('now')`, UTC).
    pub when: String,
    /// Median time, seconds.
    pub median: f64,
    /// Final loss.
    pub final_loss: f64,
    /// ferrofit's version.
    pub version: String,
}

fn db_err(path: &Path) -> impl Fn(rusqlite::Error) -> FerroError + '_ {
    move |e| FerroError::Io {
        action: "using the bench history",
        path: path.display().to_string(),
        source: std::io::Error::other(format!(
            "{e}; pass --db PATH to use another file, or --no-history"
        )),
    }
}

/// How long a bench waits on another process's lock of the history.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl History {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<History> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| FerroError::Io {
                action: "creating folder",
                path: dir.display().to_string(),
                source,
            })?;
        }
        let err = db_err(path);
        let conn = Connection::open(path).map_err(&err)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(&err)?;
        let h = History { conn };
        h.retry_while_busy(|h| h.prepare_schema()).map_err(&err)?;
        Ok(h)
    }

    /// WAL mode, the table and the job keys. Two processes opening a new
    /// database at once can meet in a lock upgrade that SQLite refuses at
    /// once (to avoid a deadlock) instead of waiting through the busy
    /// timeout; [`History::retry_while_busy`] runs this again.
    fn prepare_schema(&self) -> rusqlite::Result<()> {
        self.conn.pragma_update(None, "journal_mode", "WAL")?;
        self.conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS rows (
                id INTEGER PRIMARY KEY,
                at TEXT NOT NULL DEFAULT (datetime('now')),
                version TEXT NOT NULL, device TEXT NOT NULL, driver TEXT NOT NULL,
                backend TEXT NOT NULL, name TEXT NOT NULL, job TEXT NOT NULL,
                runs INTEGER NOT NULL, median REAL NOT NULL, mean REAL NOT NULL,
                stddev REAL NOT NULL, final_loss REAL NOT NULL, record TEXT NOT NULL);
             CREATE INDEX IF NOT EXISTS rows_key ON rows (device, backend, name, job, id);",
        )?;
        self.canonicalise_jobs()
    }

    /// Runs `step` again while it fails on a busy or locked database, for up
    /// to the busy timeout, with a short growing pause between tries.
    fn retry_while_busy<T>(
        &self,
        step: impl Fn(&Self) -> rusqlite::Result<T>,
    ) -> rusqlite::Result<T> {
        let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
        let mut pause = std::time::Duration::from_millis(2);
        loop {
            match step(self) {
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if matches!(
                        e.code,
                        rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                    ) && std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(100));
                }
                other => return other,
            }
        }
    }

    /// Rewrites job keys stored in field order (earlier versions) as
    /// canonical keys, so a change in how the configuration is laid out
    /// never separates a job from its history. Once per database: the
    /// schema's `user_version` records that it ran.
    fn canonicalise_jobs(&self) -> rusqlite::Result<()> {
        const CANONICAL_KEYS: i64 = 1;
        let version: i64 = self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version >= CANONICAL_KEYS {
            return Ok(());
        }
        let jobs: Vec<String> = self
            .conn
            .prepare("SELECT DISTINCT job FROM rows")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for job in jobs {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&job) {
                let key = canonical(&v);
                if key != job {
                    self.conn
                        .execute("UPDATE rows SET job = ?1 WHERE job = ?2", params![key, job])?;
                }
            }
        }
        self.conn
            .pragma_update(None, "user_version", CANONICAL_KEYS)?;
        Ok(())
    }

    /// The job key: the configuration as JSON (every knob that changes the work).
    fn job_key(rec: &BenchRecord) -> String {
        canonical(&serde_json::to_value(&rec.config).expect("config serialises"))
    }

    /// The driver string of the device a row ran on.
    fn driver(rec: &BenchRecord, backend: &str, device: &str) -> String {
        rec.adapters
            .devices
            .iter()
            .find(|d| {
                d.name == device
                    && crate::backend::Api::parse(backend)
                        .is_some_and(|a| a == d.api || a == crate::backend::Api::Cpu)
            })
            .map(|d| d.driver.clone())
            .unwrap_or_default()
    }

    /// For each row of `rec`, the latest earlier measurement of the same row.
    pub fn previous(&self, rec: &BenchRecord) -> Result<Vec<Option<Previous>>> {
        let job = Self::job_key(rec);
        let mut stmt = self
            .conn
            .prepare("SELECT at, median, final_loss, version FROM rows WHERE device = ?1 AND backend = ?2 AND name = ?3 AND job = ?4 ORDER BY id DESC LIMIT 1")
            .map_err(db_err(Path::new("history")))?;
        rec.rows
            .iter()
            .map(|r| {
                let mut q = stmt
                    .query(params![r.device, r.backend, r.name, job])
                    .map_err(db_err(Path::new("history")))?;
                let row = q.next().map_err(db_err(Path::new("history")))?;
                Ok(row.map(|row| Previous {
                    when: row.get(0).unwrap_or_default(),
                    median: row.get(1).unwrap_or(f64::NAN),
                    final_loss: row.get(2).unwrap_or(f64::NAN),
                    version: row.get(3).unwrap_or_default(),
                }))
            })
            .collect()
    }

    /// Appends every row of `rec` in one transaction.
    pub fn append(&mut self, rec: &BenchRecord) -> Result<()> {
        let job = Self::job_key(rec);
        let err = db_err(Path::new("history"));
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
            .map_err(&err)?;
        for r in &rec.rows {
            tx.execute(
                "INSERT INTO rows (version, device, driver, backend, name, job, runs, median, mean, stddev, final_loss, record)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    rec.versions.ferrofit,
                    r.device,
                    Self::driver(rec, &r.backend, &r.device),
                    r.backend,
                    r.name,
                    job,
                    r.summary.runs as i64,
                    r.summary.median,
                    r.summary.mean,
                    r.summary.stddev,
                    r.final_loss,
                    serde_json::to_string(r).expect("row serialises"),
                ],
            )
            .map_err(&err)?;
        }
        tx.commit().map_err(&err)
    }

    /// Number of rows stored.
    pub fn len(&self) -> Result<usize> {
        self.conn
            .query_row("SELECT COUNT(*) FROM rows", [], |r| r.get::<_, i64>(0))
            .map(|n| n as usize)
            .map_err(db_err(Path::new("history")))
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }
}

/// Lines saying how each row changed against its previous measurement.
pub fn compare_lines(rec: &BenchRecord, prev: &[Option<Previous>]) -> Vec<String> {
    rec.rows
        .iter()
        .zip(prev)
        .map(|(r, p)| match p {
            Some(p) => {
                let change = (r.summary.median / p.median - 1.0) * 100.0;
                let verdict = if change.abs() < 2.0 * r.summary.cv.max(0.01) * 100.0 {
                    "within noise"
                } else if change < 0.0 {
                    "faster"
                } else {
                    "slower"
                };
                format!(
                    "{} on {} ({}): {} -> {} ({change:+.1}%, {verdict}) since {} (ferrofit {})",
                    r.name,
                    r.backend,
                    r.device,
                    super::stats::fmt_time(p.median),
                    super::stats::fmt_time(r.summary.median),
                    p.when,
                    p.version
                )
            }
            None => format!(
                "{} on {} ({}): no earlier run of this job on this device",
                r.name, r.backend, r.device
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TrainConfig;

    #[test]
    fn jobs_stored_in_field_order_are_found_under_the_canonical_key() {
        let path =
            std::env::temp_dir().join(format!("ferrofit-hist-{}.sqlite", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let cfg = TrainConfig::default();
        let old_key = serde_json::to_string(&cfg).unwrap();
        drop(History::open(&path).unwrap());
        // As an earlier version left it: a row keyed in field order, never migrated.
        let old_db = Connection::open(&path).unwrap();
        old_db.pragma_update(None, "user_version", 0).unwrap();
        old_db
            .execute(
                "INSERT INTO rows (version, device, driver, backend, name, job, runs, median, mean, stddev, final_loss, record)
                 VALUES ('0', 'd', '', 'cpu', 'ferrofit fused', ?1, 1, 1.0, 1.0, 0.0, 0.1, '{}')",
                params![old_key],
            )
            .unwrap();
        let h = History::open(&path).unwrap();
        let job: String = h
            .conn
            .query_row("SELECT job FROM rows", [], |r| r.get(0))
            .unwrap();
        assert_eq!(job, canonical(&serde_json::to_value(&cfg).unwrap()));
        assert!(
            job.find("\"accumulate\"") < job.find("\"batch_size\""),
            "{job}"
        );
        std::fs::remove_file(&path).ok();
    }
}
