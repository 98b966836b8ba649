//! The queue's calendar statements: register, remove and list schedules,
//! top up a schedule's next tick and offer one. Each change runs in one
//! transaction that holds the schedule row's lock (`lock_schedule`), so
//! the ground rules of [`super`] hold whichever node runs it.

use super::*;
use postgres::types::ToSql;

impl Queue {
    /// Registers the calendar schedule `s` of this queue, or confirms it:
    /// idempotent, so every node may register its schedules at start-up.
    /// A schedule registered before with another definition (expression,
    /// zone, handler, payload, backfill or attempts) is replaced, and its
    /// pending tick with it (outcome `Replaced`); the new definition's
    /// first tick is the first one after now. Then it tops the schedule up
    /// as [`top_up_schedule`](Queue::top_up_schedule) does, which applies
    /// the backfill policy after an outage.
    ///
    /// Its ticks run on the queue's nodes. Wrap their handler for `s`'s
    /// handler name in [`tick_handler`], which enqueues each next tick as
    /// a tick starts; without it, the next tick waits for the nodes'
    /// periodic top-up (at each safety re-check).
    ///
    /// # Errors
    ///
    /// [`Error::Calendar`] for an expression or zone the calendar refuses,
    /// [`Error::InvalidName`], [`Error::PayloadTooLarge`] or
    /// [`Error::InvalidConfig`] for other bad fields (before anything is
    /// sent); [`Error::Db`] if a statement fails.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use timerpool_pg::{CalendarSchedule, Queue};
    ///
    /// let mut client = postgres::Client::connect("postgres://postgres@127.0.0.1/test", postgres::NoTls)?;
    /// let reports = Queue::new("timerpool", "reports")?;
    /// reports.install(&mut client)?;
    /// let r = reports.register_schedule(
    ///     &mut client,
    ///     &CalendarSchedule::new("daily-report", "0 9 * * MON-FRI", "Europe/Berlin", "report"),
    /// )?;
    /// println!("next report at {:?}", r.next_tick);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn register_schedule<C: GenericClient>(
        &self,
        client: &mut C,
        s: &CalendarSchedule,
    ) -> Result<Registered, Error> {
        let cal = s.check()?;
        let (kind, bound) = s.backfill.to_row();
        let attempts = i32::try_from(s.max_attempts).unwrap_or(i32::MAX);
        let schema = self.schema();
        let (queue, zone) = (self.name(), cal.zone());
        // The definition's columns, $1 to $9 of both the insert and the update.
        let definition: [&(dyn ToSql + Sync); 9] = [
            &queue,
            &s.name,
            &s.expression,
            &zone,
            &s.handler,
            &s.payload,
            &kind,
            &bound,
            &attempts,
        ];
        let mut tx = client.transaction()?;
        let created = tx.execute(
            &format!(
                "INSERT INTO {schema}.calendars (queue, name, expression, zone, handler, payload,
                                                 backfill, backfill_max, max_attempts)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (queue, name) DO NOTHING"
            ),
            &definition,
        )? == 1;
        let Some(mut row) = self.lock_schedule(&mut tx, &s.name)? else {
            // Inserted or present above, in this transaction.
            return Err(Error::InvalidConfig(format!(
                "schedule {:?} vanished while it was registered",
                s.name
            )));
        };
        let changed = !created && !row.same_as(s, &cal);
        if changed {
            let removed = match row.last_tick {
                Some(last) => self.remove_pending(&mut tx, &s.name, last, "replaced", false)?,
                None => false,
            };
            // Every tick enqueued before the removed one has run or is
            // running, so is due by now: `now` is a safe mark. Otherwise
            // the mark only moves forward.
            let mark = match row.last_tick {
                Some(last) if !removed => last.max(row.now),
                _ => row.now,
            };
            tx.execute(
                &format!(
                    "UPDATE {schema}.calendars SET expression = $3, zone = $4, handler = $5,
                         payload = $6, backfill = $7, backfill_max = $8, max_attempts = $9,
                         last_tick = $10, registered = clock_timestamp()
                     WHERE queue = $1 AND name = $2"
                ),
                &[&definition[..], &[&mark]].concat(),
            )?;
            row = Row {
                expression: s.expression.clone(),
                zone: cal.zone().to_string(),
                handler: s.handler.clone(),
                payload: s.payload.clone(),
                backfill: s.backfill,
                max_attempts: attempts,
                last_tick: Some(mark),
                now: row.now,
            };
        }
        let next_tick = self.top_up_locked(&mut tx, &s.name, &row, &cal)?;
        tx.commit()?;
        Ok(Registered {
            created,
            changed,
            next_tick,
        })
    }

    /// Removes the schedule `name` and cancels its pending tick (outcome
    /// `Cancelled`); a running tick finishes. True iff it existed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a bad name, [`Error::Db`] if a statement
    /// fails.
    pub fn remove_schedule<C: GenericClient>(
        &self,
        client: &mut C,
        name: &str,
    ) -> Result<bool, Error> {
        check_name("schedule", name)?;
        let mut tx = client.transaction()?;
        let Some(row) = self.lock_schedule(&mut tx, name)? else {
            return Ok(false);
        };
        if let Some(last) = row.last_tick {
            self.remove_pending(&mut tx, name, last, "cancelled", false)?;
        }
        tx.execute(
            &format!(
                "DELETE FROM {}.calendars WHERE queue = $1 AND name = $2",
                self.schema()
            ),
            &[&self.name(), &name],
        )?;
        tx.commit()?;
        Ok(true)
    }

    /// Every calendar schedule of this queue with its high-water mark and
    /// the due time of its pending tick, by name.
    ///
    /// # Errors
    ///
    /// [`Error::Db`] if the statement fails.
    pub fn schedules<C: GenericClient>(&self, client: &mut C) -> Result<Vec<ScheduleInfo>, Error> {
        let s = self.schema();
        let rows = client.query(
            &format!(
                "SELECT c.name, c.expression, c.zone, c.handler, c.backfill, c.backfill_max,
                        c.last_tick, t.due
                 FROM {s}.calendars c
                 LEFT JOIN {s}.tasks t ON t.queue = c.queue AND t.state = 'pending'
                     AND t.key = '{PREFIX}' || c.name || ':'
                                 || floor(extract(epoch FROM c.last_tick))::int8::text
                 WHERE c.queue = $1 ORDER BY c.name"
            ),
            &[&self.name()],
        )?;
        Ok(rows
            .iter()
            .map(|r| ScheduleInfo {
                name: r.get(0),
                expression: r.get(1),
                zone: r.get(2),
                handler: r.get(3),
                backfill: Backfill::from_row(r.get(4), r.get(5)),
                last_tick: r.get(6),
                next_tick: r.get(7),
            })
            .collect())
    }

    /// Makes sure the schedule `name` has its pending tick: if it has none
    /// (or only one that is already missed by its policy, which then gets
    /// the outcome `Expired` and never runs), enqueues the next one by the
    /// backfill policy through the gated insert. Returns the pending
    /// tick's due time; `None` if the schedule does not exist or its
    /// calendar has no tick left.
    ///
    /// [`tick_handler`] calls it when a tick starts, registration when it
    /// is called, and every node of the queue ([`Node`](crate::Node) and
    /// `AsyncNode`) for each schedule without a live pending tick when it
    /// starts and at each safety re-check
    /// ([`NodeBuilder::safety_recheck`](crate::NodeBuilder::safety_recheck));
    /// whichever runs first enqueues, the others find the tick pending.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidName`] for a bad name, [`Error::Calendar`] if this
    /// node's calendar refuses the stored expression or zone,
    /// [`Error::Db`] if a statement fails.
    pub fn top_up_schedule<C: GenericClient>(
        &self,
        client: &mut C,
        name: &str,
    ) -> Result<Option<SystemTime>, Error> {
        check_name("schedule", name)?;
        let mut tx = client.transaction()?;
        let Some(row) = self.lock_schedule(&mut tx, name)? else {
            return Ok(None);
        };
        let cal = row.calendar()?;
        let due = self.top_up_locked(&mut tx, name, &row, &cal)?;
        tx.commit()?;
        Ok(due)
    }

    /// Tops up the schedules of this queue that have no live pending tick
    /// (none, or one past its expiry), each in its own transaction; one
    /// that fails does not stop the others, and is tried again at the next
    /// call. A node calls it when the claim of its start or of a safety
    /// re-check reports such a schedule (`sql::claim_recheck`), so a
    /// queue whose schedules all have their tick costs it nothing.
    pub(crate) fn top_up_stalled(&self, client: &mut Client) -> Result<(), Error> {
        // One round trip: a statement prepared first would cost the server
        // a transaction of its own.
        let names: Vec<String> = client
            .query_typed(&stalled(self.schema()), &[(&self.name(), Type::TEXT)])?
            .iter()
            .map(|r| r.get(0))
            .collect();
        for name in names {
            // A schedule this node's calendar refuses, or a statement that
            // failed, is left to the next call or to another node.
            let _ = self.top_up_schedule(client, &name);
        }
        Ok(())
    }

    /// The gated insert on its own: enqueues `name`'s tick at `tick` iff
    /// `tick` is after the schedule's high-water mark and the schedule has
    /// no pending tick, moving the mark to `tick` in the same transaction.
    /// False when refused, or when there is no such schedule. Nodes use
    /// [`top_up_schedule`](Queue::top_up_schedule), which picks the tick;
    /// this is for a tick chosen by hand (a test, a manual catch-up).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if `tick` is not an instant of the
    /// schedule's calendar, otherwise as
    /// [`top_up_schedule`](Queue::top_up_schedule).
    pub fn offer_tick<C: GenericClient>(
        &self,
        client: &mut C,
        name: &str,
        tick: SystemTime,
    ) -> Result<bool, Error> {
        check_name("schedule", name)?;
        let mut tx = client.transaction()?;
        let Some(row) = self.lock_schedule(&mut tx, name)? else {
            return Ok(false);
        };
        let cal = row.calendar()?;
        let is_tick = tick
            .checked_sub(Duration::from_secs(1))
            .and_then(|t| cal.next_after(t))
            == Some(tick);
        if !is_tick {
            return Err(Error::InvalidConfig(format!(
                "{tick:?} is not a tick of schedule {name:?} ({cal})"
            )));
        }
        if let Some(last) = row.last_tick {
            if self.pending_of(&mut tx, name, last)?.is_some() {
                return Ok(false);
            }
        }
        let done = self.gated_insert(&mut tx, name, &row, &cal, tick)?;
        tx.commit()?;
        Ok(done)
    }

    /// Locks the schedule row; `None` if there is none.
    fn lock_schedule(&self, tx: &mut Transaction<'_>, name: &str) -> Result<Option<Row>, Error> {
        let row = tx.query_opt(
            &format!(
                "SELECT expression, zone, handler, payload, backfill, backfill_max,
                        max_attempts, last_tick, clock_timestamp()
                 FROM {}.calendars WHERE queue = $1 AND name = $2 FOR UPDATE",
                self.schema()
            ),
            &[&self.name(), &name],
        )?;
        Ok(row.map(|r| Row {
            expression: r.get(0),
            zone: r.get(1),
            handler: r.get(2),
            payload: r.get(3),
            backfill: Backfill::from_row(r.get(4), r.get(5)),
            max_attempts: r.get(6),
            last_tick: r.get(7),
            now: r.get(8),
        }))
    }

    /// The pending tick of `name` at `tick`: its due time and whether its
    /// expiry has passed.
    fn pending_of(
        &self,
        tx: &mut Transaction<'_>,
        name: &str,
        tick: SystemTime,
    ) -> Result<Option<(SystemTime, bool)>, Error> {
        let row = tx.query_opt(
            &format!(
                "SELECT due, coalesce(expires < clock_timestamp(), false) FROM {}.tasks
                 WHERE queue = $1 AND key = $2 AND state = 'pending'",
                self.schema()
            ),
            &[&self.name(), &tick_key(name, tick)],
        )?;
        Ok(row.map(|r| (r.get(0), r.get(1))))
    }

    /// Deletes the pending tick of `name` at `tick`, recording `outcome`
    /// (only if it has expired when `expired_only`); true iff it was
    /// pending. A tick a node claimed meanwhile is running and stays.
    fn remove_pending(
        &self,
        tx: &mut Transaction<'_>,
        name: &str,
        tick: SystemTime,
        outcome: &str,
        expired_only: bool,
    ) -> Result<bool, Error> {
        let s = self.schema();
        let n = tx.execute(
            &format!(
                "WITH d AS (
                    DELETE FROM {s}.tasks t
                    WHERE t.queue = $1 AND t.key = $2 AND t.state = 'pending'
                      AND (NOT $4 OR t.expires < clock_timestamp())
                    RETURNING t.id, t.queue, t.key, t.handler, t.due, t.created,
                              t.payload, t.max_attempts
                )
                INSERT INTO {s}.outcomes (id, queue, key, handler, outcome, due, created,
                                          finished, attempts, payload, max_attempts)
                SELECT d.id, d.queue, d.key, d.handler, $3, d.due, d.created,
                       clock_timestamp(), 0,
                       CASE WHEN $3 = 'expired' THEN d.payload END,
                       CASE WHEN $3 = 'expired' THEN d.max_attempts END FROM d"
            ),
            &[&self.name(), &tick_key(name, tick), &outcome, &expired_only],
        )?;
        Ok(n > 0)
    }

    /// The top-up under the row's lock (see
    /// [`top_up_schedule`](Queue::top_up_schedule)).
    fn top_up_locked(
        &self,
        tx: &mut Transaction<'_>,
        name: &str,
        row: &Row,
        cal: &Calendar,
    ) -> Result<Option<SystemTime>, Error> {
        if let Some(last) = row.last_tick {
            match self.pending_of(tx, name, last)? {
                Some((due, false)) => return Ok(Some(due)),
                Some((_, true)) => {
                    self.remove_pending(tx, name, last, "expired", true)?;
                }
                None => {}
            }
        }
        let Some(tick) = pick(cal, row.backfill, row.last_tick, row.now) else {
            return Ok(None);
        };
        Ok(self.gated_insert(tx, name, row, cal, tick)?.then_some(tick))
    }

    /// Enqueues `tick` iff it is after the mark, moving the mark to it in
    /// this transaction.
    fn gated_insert(
        &self,
        tx: &mut Transaction<'_>,
        name: &str,
        row: &Row,
        cal: &Calendar,
        tick: SystemTime,
    ) -> Result<bool, Error> {
        if row.last_tick.is_some_and(|last| tick <= last) {
            return Ok(false);
        }
        let moved = tx.execute(
            &format!(
                "UPDATE {}.calendars SET last_tick = $3
                 WHERE queue = $1 AND name = $2 AND (last_tick IS NULL OR last_tick < $3)",
                self.schema()
            ),
            &[&self.name(), &name, &tick],
        )?;
        if moved == 0 {
            return Ok(false);
        }
        let mut task = NewTask::new(tick_key(name, tick), row.handler.clone())
            .at(tick)
            .payload(row.payload.clone())
            .max_attempts(u32::try_from(row.max_attempts).unwrap_or(1));
        if let Some(window) = expiry(cal, row.backfill, tick) {
            task = task.expire_after(window);
        }
        self.schedule(tx, &task)?;
        Ok(true)
    }
}
