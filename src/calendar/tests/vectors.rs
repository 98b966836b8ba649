//! The daylight-saving vectors of five zones, computed independently of
//! jiff and croner (with Python's `zoneinfo`). The unit tests hold the
//! next-tick function to them; `tests/calendar.rs` includes this file by
//! path and holds a pool on a manual clock to the same instants, so the
//! two can never disagree about what is expected.

/// The ticks of `expr` in `zone` after `from` up to `until`: `ticks` are
/// all of them (RFC 3339), and the next one lies after `until`.
pub struct Vector {
    pub expr: &'static str,
    pub zone: &'static str,
    pub from: &'static str,
    pub until: &'static str,
    pub ticks: &'static [&'static str],
}

/// A fixed time in New York's spring-forward gap runs at the end of the
/// gap, and the next day's tick is not moved by it.
pub const NEW_YORK_SPRING_FIXED: Vector = Vector {
    expr: "30 2 * * *",
    zone: "America/New_York",
    from: "2026-03-07T00:00Z",
    until: "2026-03-09T12:00Z",
    ticks: &[
        "2026-03-07T07:30Z",
        "2026-03-08T07:00Z",
        "2026-03-09T06:30Z",
    ],
};

/// An interval through New York's spring-forward keeps the real spacing.
pub const NEW_YORK_SPRING_INTERVAL: Vector = Vector {
    expr: "*/15 * * * *",
    zone: "America/New_York",
    from: "2026-03-08T06:20Z",
    until: "2026-03-08T07:20Z",
    ticks: &[
        "2026-03-08T06:30Z",
        "2026-03-08T06:45Z",
        "2026-03-08T07:00Z",
        "2026-03-08T07:15Z",
    ],
};

/// Two fixed times resolving to one instant run once: 02:00 lies in the
/// gap and moves to 03:00, which is the other time.
pub const NEW_YORK_SPRING_TWO_TIMES_ONE_INSTANT: Vector = Vector {
    expr: "0 2,3 * * *",
    zone: "America/New_York",
    from: "2026-03-08T00:00Z",
    until: "2026-03-09T06:30Z",
    ticks: &["2026-03-08T07:00Z", "2026-03-09T06:00Z"],
};

/// A fixed time in New York's fall-back fold runs at its first occurrence
/// only.
pub const NEW_YORK_FALL_FIXED: Vector = Vector {
    expr: "30 1 * * *",
    zone: "America/New_York",
    from: "2026-10-31T00:00Z",
    until: "2026-11-02T12:00Z",
    ticks: &[
        "2026-10-31T05:30Z",
        "2026-11-01T05:30Z",
        "2026-11-02T06:30Z",
    ],
};

/// An interval through New York's fall-back fold runs both passes in order.
pub const NEW_YORK_FALL_INTERVAL: Vector = Vector {
    expr: "*/15 * * * *",
    zone: "America/New_York",
    from: "2026-11-01T05:20Z",
    until: "2026-11-01T07:05Z",
    ticks: &[
        "2026-11-01T05:30Z",
        "2026-11-01T05:45Z",
        "2026-11-01T06:00Z",
        "2026-11-01T06:15Z",
        "2026-11-01T06:30Z",
        "2026-11-01T06:45Z",
        "2026-11-01T07:00Z",
    ],
};

/// Berlin's spring-forward and fall-back.
pub const BERLIN: [Vector; 2] = [
    Vector {
        expr: "30 2 * * *",
        zone: "Europe/Berlin",
        from: "2026-03-28T00:00Z",
        until: "2026-03-30T12:00Z",
        ticks: &[
            "2026-03-28T01:30Z",
            "2026-03-29T01:00Z",
            "2026-03-30T00:30Z",
        ],
    },
    Vector {
        expr: "30 2 * * *",
        zone: "Europe/Berlin",
        from: "2026-10-24T00:00Z",
        until: "2026-10-26T12:00Z",
        ticks: &[
            "2026-10-24T00:30Z",
            "2026-10-25T00:30Z",
            "2026-10-26T01:30Z",
        ],
    },
];

/// Sydney's fall-back (April) and spring-forward (October).
pub const SYDNEY: [Vector; 2] = [
    Vector {
        expr: "30 2 * * *",
        zone: "Australia/Sydney",
        from: "2026-04-03T00:00Z",
        until: "2026-04-05T20:00Z",
        ticks: &[
            "2026-04-03T15:30Z",
            "2026-04-04T15:30Z",
            "2026-04-05T16:30Z",
        ],
    },
    Vector {
        expr: "30 2 * * *",
        zone: "Australia/Sydney",
        from: "2026-10-02T00:00Z",
        until: "2026-10-04T20:00Z",
        ticks: &[
            "2026-10-02T16:30Z",
            "2026-10-03T16:00Z",
            "2026-10-04T15:30Z",
        ],
    },
];

/// Lord Howe's half-hour shifts: a fixed time and an interval through its
/// fold, and a fixed time in its gap.
pub const LORD_HOWE: [Vector; 3] = [
    Vector {
        expr: "45 1 * * *",
        zone: "Australia/Lord_Howe",
        from: "2026-04-03T00:00Z",
        until: "2026-04-05T20:00Z",
        ticks: &[
            "2026-04-03T14:45Z",
            "2026-04-04T14:45Z",
            "2026-04-05T15:15Z",
        ],
    },
    Vector {
        expr: "*/15 * * * *",
        zone: "Australia/Lord_Howe",
        from: "2026-04-04T14:20Z",
        until: "2026-04-04T15:35Z",
        ticks: &[
            "2026-04-04T14:30Z",
            "2026-04-04T14:45Z",
            "2026-04-04T15:00Z",
            "2026-04-04T15:15Z",
            "2026-04-04T15:30Z",
        ],
    },
    Vector {
        expr: "15 2 * * *",
        zone: "Australia/Lord_Howe",
        from: "2026-10-02T00:00Z",
        until: "2026-10-04T20:00Z",
        ticks: &[
            "2026-10-02T15:45Z",
            "2026-10-03T15:30Z",
            "2026-10-04T15:15Z",
        ],
    },
];

/// Santiago springs forward at midnight: the missing midnight runs at
/// 01:00.
pub const SANTIAGO: Vector = Vector {
    expr: "@daily",
    zone: "America/Santiago",
    from: "2026-09-05T00:00Z",
    until: "2026-09-07T12:00Z",
    ticks: &[
        "2026-09-05T04:00Z",
        "2026-09-06T04:00Z",
        "2026-09-07T03:00Z",
    ],
};
