//! A private PostgreSQL server (initdb on its own port and data directory,
//! as the `postgres` OS user when run as root), so crashing and restarting
//! it disturbs no other test or user of the shared server; and the
//! restart-under-load scenario the blocking and the async node both pass.

use super::wait_until;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use timerpool_pg::{NewTask, NodeStats, Queue};

/// A private server, stopped and removed on drop.
pub struct Server {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
}

/// Servers started by this process so far: each gets its own directory
/// and ports, so tests of one binary may run at the same time.
static STARTED: AtomicU16 = AtomicU16::new(0);

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
    /// connection when the server binds it. The first port depends on the
    /// process and on how many servers it started before; a few ports are
    /// tried in turn, so one held by another test's server is passed over.
    pub fn start() -> Server {
        let bin = pg_bin();
        let n = STARTED.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let base = 29_000 + ((pid + u32::from(n) * 300) % 900) as u16;
        let dir = std::env::temp_dir().join(format!("timerpool-pg-{pid}-{n}"));
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

    /// Starts the server again on its port.
    pub fn up(&self) {
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
    pub fn crash(&self) {
        self.ctl(&["-m", "immediate", "stop"]);
    }

    /// Connection settings of this server.
    pub fn config(&self) -> postgres::Config {
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
        // An error means it is stopped already.
        let _ = try_run(&self.bin, "pg_ctl", &["-D", &d, "-m", "immediate", "stop"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn count(c: &mut postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).map_or(-1, |r| r.get(0))
}

/// Handler runs of the restart scenario: task id, attempt, start.
pub type Runs = Arc<Mutex<Vec<(i64, u32, SystemTime)>>>;

/// The database crashes and restarts under load. `start` starts one node
/// of queue "q" in schema `timerpool` on the server it is given, with
/// handler "h" logging each run into the list; `stats` reads a node's
/// counters. Two nodes share 300 tasks, the server crashes once 60 are
/// done and comes back, 100 more are scheduled; all 400 must complete,
/// none early, no attempt run twice, every run of a later attempt counted
/// as a re-run, and each node must have reconnected. `stop` then shuts
/// each node down, while the server still runs.
pub fn restart_under_load<N>(
    start: impl Fn(postgres::Config, Runs) -> N,
    stats: impl Fn(&N) -> NodeStats,
    stop: impl Fn(N),
) {
    let long = Duration::from_secs(90);
    let server = Server::start();
    let mut c = server.config().connect(postgres::NoTls).unwrap();
    let q = Queue::new("timerpool", "q").unwrap();
    q.install(&mut c).unwrap();
    let runs = Runs::default();
    let nodes: Vec<N> = (0..2)
        .map(|_| start(server.config(), runs.clone()))
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
    assert!(wait_until(long, || count(&mut c, done) >= 60));
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
    assert!(wait_until(long, || count(&mut c, done) == 400));
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
    let reruns: u64 = nodes.iter().map(|n| stats(n).reruns).sum();
    assert_eq!(
        later, reruns,
        "every run of a later attempt is a counted re-run"
    );
    assert!(
        runs.len() as u64 <= 400 + reruns,
        "an extra run not counted"
    );
    for n in nodes {
        let s = stats(&n);
        assert!(s.reconnects >= 1, "{s:?}");
        stop(n);
    }
}
