//! Opening a node's connections: session settings that bound every
//! statement, and reconnection with capped exponential backoff.

use crate::Error;
use postgres::{Client, Config, NoTls};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How a node connects.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    /// Where, with keepalives and a connect timeout set.
    pub config: Config,
    /// `statement_timeout` of every session.
    pub statement_timeout: Duration,
    /// Channels to `LISTEN` on after connecting (the leader's only).
    pub listen: Vec<String>,
}

impl Connector {
    /// One connection with the session settings applied.
    pub(crate) fn connect(&self) -> Result<Client, postgres::Error> {
        let mut client = self.config.connect(NoTls)?;
        let ms = self.statement_timeout.as_millis().max(1);
        let mut setup = format!(
            "SET statement_timeout = {ms}; SET lock_timeout = {ms};
             SET idle_in_transaction_session_timeout = {};",
            ms.saturating_mul(2)
        );
        for chan in &self.listen {
            setup.push_str(&format!("LISTEN \"{chan}\";"));
        }
        client.batch_execute(&setup)?;
        Ok(client)
    }

    /// Connects, retrying with backoff (50 ms doubling to 2 s) until it
    /// works or `stop` is set; `None` once stopped.
    pub(crate) fn reconnect(&self, stop: &AtomicU64, reconnects: &AtomicU64) -> Option<Client> {
        let mut pause = Duration::from_millis(50);
        loop {
            if stop.load(Ordering::Acquire) != 0 {
                return None;
            }
            if let Ok(client) = self.connect() {
                reconnects.fetch_add(1, Ordering::Relaxed);
                return Some(client);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(2));
        }
    }

    /// The first connection of a node: failure is a clear error at start.
    pub(crate) fn first(&self) -> Result<Client, Error> {
        self.connect().map_err(Error::Unreachable)
    }
}

/// Applies the defaults a node needs to a user's connection settings.
pub(crate) fn harden(mut config: Config, app: &str) -> Config {
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(Duration::from_secs(5));
    }
    config
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(10))
        .keepalives_interval(Duration::from_secs(2))
        .keepalives_retries(3)
        .tcp_user_timeout(Duration::from_secs(15))
        .application_name(app);
    config
}
