//! Tests for a database restarted under load. The test starts a private
//! PostgreSQL server (initdb on its own port and data directory, as the
//! `postgres` OS user when run as root), so crashing and restarting it
//! disturbs no other test or user of the shared server: nodes reconnect
//! with backoff and resume, nothing is lost and nothing runs early.

mod pg_common;

use pg_common::wait_until;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use timerpool_pg::{NewTask, Node, Queue};

const LONG: Duration = Duration::from_secs(90);

/// A private server, stopped and removed on drop.
struct Server {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

/// PostgreSQL's binaries: `TIMERPOOL_PG_BIN`, else the newest
/// `/usr/lib/postgresql/<version>/bin`.
fn pg_bin() -> PathBuf {
    if let Ok(dir) = std::env::var("TIMERPOOL_PG_BIN") {
        return dir.into();
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL binaries under /usr/lib/postgresql (or set TIMERPOOL_PG_BIN)")
        .filter_map(|e| Some(e.ok()?.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    found.sort();
    found
        .pop()
        .expect("an initdb under /usr/lib/postgresql/*/bin")
}

/// Runs a server binary, as `postgres` when this process is root.
fn run(bin: &Path, tool: &str, args: &[&str]) {
    if let Err(e) = try_run(bin, tool, args) {
        panic!("{e}");
    }
}

/// [`run`], returning its failure.
fn try_run(bin: &Path, tool: &str, args: &[&str]) -> Result<(), String> {
    let root = Command::new("id").arg("-u").output().unwrap().stdout == b"0\n";
    let exe = bin.join(tool);
    let mut cmd = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    let out = cmd.args(args).output().unwrap();
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{tool} {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        )),
    }
}

impl Server {
    /// A fresh server on a port below Linux's default ephemeral range
    /// (32768-60999), which the shared server's clients draw their local
    /// ports from: a port in that range can be held by an outgoing
    /// connection when the server binds it. A few ports are tried in turn.
    fn start() -> Server {
        let bin = pg_bin();
        let base = 29_000 + (std::process::id() % 900) as u16;
        let dir = std::env::temp_dir().join(format!("timerpool-pg-{base}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let _ = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(&dir)
            .status();
        let d = dir.to_str().unwrap();
        run(
            &bin,
            "initdb",
            &["-D", d, "-A", "trust", "-U", "postgres", "--no-sync"],
        );
        let mut s = Server {
            bin,
            dir,
            port: base,
        };
        let mut tried = Vec::new();
        for port in (base..).step_by(17).take(5) {
            s.port = port;
            match s.try_up() {
                Ok(()) => return s,
                Err(e) => tried.push(e),
            }
        }
        panic!("no port to start on: {tried:?}");
    }

    fn ctl(&self, args: &[&str]) {
        let d = self.dir.to_str().unwrap().to_string();
        let mut all = vec!["-D", &d, "-w"];
        all.extend_from_slice(args);
        run(&self.bin, "pg_ctl", &all);
    }

    fn up(&self) {
        if let Err(e) = self.try_up() {
            panic!("{e}");
        }
    }

    /// Start the server on its port.
    fn try_up(&self) -> Result<(), String> {
        let opts = format!(
            "-p {} -c listen_addresses=127.0.0.1 -k {} -c fsync=off",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("log");
        let d = self.dir.to_str().unwrap().to_string();
        let args = [
            "-D",
            &d,
            "-w",
            "-o",
            &opts,
            "-l",
            log.to_str().unwrap(),
            "start",
        ];
        try_run(&self.bin, "pg_ctl", &args)
    }

    /// A crash: no shutdown checkpoint, recovery on the next start.
    fn crash(&self) {
        self.ctl(&["-m", "immediate", "stop"]);
    }

    fn config(&self) -> postgres::Config {
        let mut c = postgres::Config::new();
        c.host("127.0.0.1")
            .port(self.port)
            .user("postgres")
            .dbname("postgres");
        c
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let d = self.dir.to_str().unwrap().to_string();
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", &d, "-m", "immediate", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn count(c: &mut postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).map_or(-1, |r| r.get(0))
}

#[test]
fn nodes_survive_a_database_restart_under_load() {
    let server = Server::start();
    let mut c = server.config().connect(postgres::NoTls).unwrap();
    let q = Queue::new("timerpool", "q").unwrap();
    q.install(&mut c).unwrap();
    let runs: Arc<Mutex<Vec<(i64, u32, SystemTime)>>> = Arc::default();
    let nodes: Vec<Node> = (0..2)
        .map(|_| {
            let runs = runs.clone();
            Node::builder(server.config(), "q")
                .workers(2)
                .lease(Duration::from_secs(2))
                .statement_timeout(Duration::from_secs(2))
                .handler("h", move |job| {
                    runs.lock()
                        .unwrap()
                        .push((job.id(), job.attempt(), SystemTime::now()));
                    Ok(())
                })
                .start()
                .unwrap()
        })
        .collect();
    let before: Vec<NewTask> = (0..300u64)
        .map(|i| NewTask::new(format!("a{i}"), "h").after(Duration::from_millis(100 + i * 10)))
        .collect();
    let mut ids: Vec<i64> = q
        .schedule_batch(&mut c, &before)
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    let done = "SELECT count(*) FROM timerpool.outcomes";
    assert!(wait_until(LONG, || count(&mut c, done) >= 60));
    server.crash();
    server.up();
    let mut c = server.config().connect(postgres::NoTls).unwrap();
    let after: Vec<NewTask> = (0..100u64)
        .map(|i| NewTask::new(format!("b{i}"), "h").after(Duration::from_millis(100 + i * 10)))
        .collect();
    ids.extend(
        q.schedule_batch(&mut c, &after)
            .unwrap()
            .iter()
            .map(|s| s.id),
    );
    assert!(wait_until(LONG, || count(&mut c, done) == 400));
    assert_eq!(count(&mut c, "SELECT count(*) FROM timerpool.tasks"), 0);
    let completed = "SELECT count(*) FROM timerpool.outcomes WHERE outcome = 'completed'";
    assert_eq!(count(&mut c, completed), 400);
    let due: HashMap<i64, SystemTime> = c
        .query("SELECT id, due, claimed FROM timerpool.outcomes", &[])
        .unwrap()
        .iter()
        .map(|r| {
            let (d, claimed): (SystemTime, SystemTime) = (r.get(1), r.get(2));
            assert!(claimed >= d, "claimed early");
            (r.get(0), d)
        })
        .collect();
    let runs = runs.lock().unwrap().clone();
    for (id, _, at) in &runs {
        assert!(*at >= due[id], "task {id} ran early");
    }
    for id in &ids {
        assert!(runs.iter().any(|r| r.0 == *id), "task {id} never ran");
    }
    // An attempt runs at most once; a task runs again only as a later
    // attempt, and every such run is counted. (A claim committed just as
    // the server crashed may never reach its node: the task is then taken
    // over after the lease as attempt 2 without attempt 1 having run, so
    // re-runs may exceed the extra runs, never fall short of them.)
    let mut attempts: Vec<(i64, u32)> = runs.iter().map(|r| (r.0, r.1)).collect();
    attempts.sort_unstable();
    let n = attempts.len();
    attempts.dedup();
    assert_eq!(attempts.len(), n, "an attempt ran twice");
    let later = runs.iter().filter(|r| r.1 > 1).count() as u64;
    let reruns: u64 = nodes.iter().map(|n| n.stats().reruns).sum();
    assert_eq!(
        later, reruns,
        "every run of a later attempt is a counted re-run"
    );
    assert!(
        runs.len() as u64 <= 400 + reruns,
        "an extra run not counted"
    );
    for n in nodes {
        assert!(n.stats().reconnects >= 1, "{:?}", n.stats());
        n.shutdown();
    }
}
