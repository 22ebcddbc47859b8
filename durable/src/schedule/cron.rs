//! Five-field cron expressions, in UTC: `minute hour day-of-month month
//! day-of-week`, each `*`, a number, a range `a-b`, a step `*/n` or
//! `a-b/n`, or a list of those (`1,15,30-40/5`); months and days may be
//! named (`JAN`, `MON`), Sunday is 0 or 7. When both days are restricted a
//! time matches either (Vixie cron's rule). Time is given, never read:
//! [`Cron::next_after`] takes a time and answers the next match after it.

/// A parsed expression: the allowed values of each field as bit sets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Day-of-month and day-of-week were both restricted (not `*`).
    either_day: bool,
}

const MONTHS: [&str; 12] = ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

impl Cron {
    /// Parses an expression; the error says which field is wrong.
    pub fn parse(expr: &str) -> Result<Cron, String> {
        let fields: Vec<&str> = expr.split_whitespace().collect();
        if fields.len() != 5 {
            return Err(format!(
                "a cron expression has five fields (minute hour day month weekday), not {}",
                fields.len()
            ));
        }
        let minutes = field(fields[0], 0, 59, &[], "minute")?;
        let hours = field(fields[1], 0, 23, &[], "hour")? as u32;
        let days = field(fields[2], 1, 31, &[], "day of month")? as u32;
        let months = field(fields[3], 1, 12, &MONTHS, "month")? as u16;
        let mut weekdays = field(fields[4], 0, 7, &DAYS, "day of week")?;
        if weekdays & (1 << 7) != 0 {
            weekdays |= 1;
        }
        let weekdays = (weekdays & 0x7f) as u8;
        let either_day = !fields[2].starts_with('*') && !fields[4].starts_with('*');
        Ok(Cron { minutes, hours, days, months, weekdays, either_day })
    }

    /// The first whole minute strictly after `after_ms` (Unix ms, UTC) that
    /// the expression matches, within the next eight years (`None`: no
    /// such day, `0 0 31 2 *`).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        let mut t = after_ms.div_euclid(60_000) * 60_000 + 60_000;
        let limit = after_ms + 8 * 366 * 86_400_000;
        while t <= limit {
            let (days, in_day) = (t.div_euclid(86_400_000), t.rem_euclid(86_400_000));
            let (_, month, day) = civil(days);
            let weekday = (days + 4).rem_euclid(7) as u32; // 1970-01-01 was a Thursday
            if self.months & (1 << month) == 0 {
                t = (days + i64::from(days_in_month_from(days)) - i64::from(day) + 1) * 86_400_000;
                continue;
            }
            if !self.day_matches(day, weekday) {
                t = (days + 1) * 86_400_000;
                continue;
            }
            let (hour, minute) = ((in_day / 3_600_000) as u32, ((in_day / 60_000) % 60) as u32);
            if self.hours & (1 << hour) == 0 {
                t = days * 86_400_000 + i64::from(hour + 1) * 3_600_000;
                continue;
            }
            if self.minutes & (1 << minute) == 0 {
                t += 60_000;
                continue;
            }
            return Some(t);
        }
        None
    }

    fn day_matches(&self, day: u32, weekday: u32) -> bool {
        let (d, w) = (self.days & (1 << day) != 0, self.weekdays & (1 << weekday) != 0);
        if self.either_day {
            d || w
        } else {
            d && w
        }
    }
}

/// One field: the bits of its allowed values in `lo..=hi`.
fn field(raw: &str, lo: u32, hi: u32, names: &[&str], what: &str) -> Result<u64, String> {
    let bad = || format!("the {what} field `{raw}` is not a cron field ({lo}-{hi}, `*`, ranges, steps, lists)");
    let value = |s: &str| -> Result<u32, String> {
        let upper = s.to_ascii_uppercase();
        if let Some(i) = names.iter().position(|n| *n == upper) {
            return Ok(i as u32 + if names.len() == 12 { 1 } else { 0 });
        }
        s.parse::<u32>().ok().filter(|v| (lo..=hi).contains(v)).ok_or_else(bad)
    };
    let mut bits = 0u64;
    for part in raw.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (r, s.parse::<u32>().ok().filter(|s| *s >= 1).ok_or_else(bad)?),
            None => (part, 1),
        };
        let (from, to) = match range {
            "*" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                // `5/15`: from 5 to the top, every 15.
                None if part.contains('/') => (value(r)?, hi),
                None => (value(r)?, value(r)?),
            },
        };
        if from > to {
            return Err(bad());
        }
        let mut v = from;
        while v <= to {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok(bits)
}

/// The civil date (year, month 1-12, day 1-31) of a day count since
/// 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The number of days in the month holding day count `days`.
fn days_in_month_from(days: i64) -> u32 {
    let (year, month, _) = civil(days);
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Minute by minute: the definition `next_after` must agree with.
    fn brute(c: &Cron, after: i64, horizon_minutes: i64) -> Option<i64> {
        let mut t = after.div_euclid(60_000) * 60_000 + 60_000;
        for _ in 0..horizon_minutes {
            let days = t.div_euclid(86_400_000);
            let in_day = t.rem_euclid(86_400_000);
            let (_, month, day) = civil(days);
            let weekday = (days + 4).rem_euclid(7) as u32;
            let (hour, minute) = ((in_day / 3_600_000) as u32, ((in_day / 60_000) % 60) as u32);
            if c.months & (1 << month) != 0
                && c.day_matches(day, weekday)
                && c.hours & (1 << hour) != 0
                && c.minutes & (1 << minute) != 0
            {
                return Some(t);
            }
            t += 60_000;
        }
        None
    }

    #[test]
    fn known_times() {
        // 2026-12-05T13:24:10Z is a Saturday.
        let now = 1_796_477_050_000;
        assert_eq!(civil(now / 86_400_000), (2026, 12, 5));
        let at = |e: &str| Cron::parse(e).unwrap().next_after(now).unwrap();
        assert_eq!(at("* * * * *"), 1_796_477_100_000, "the next whole minute");
        assert_eq!(at("0 * * * *"), 1_796_479_200_000, "14:00");
        assert_eq!(at("30 9 * * MON"), 1_796_635_800_000, "Monday 2026-12-07 09:30");
        assert_eq!(at("0 0 1 JAN *"), 1_798_761_600_000, "2027-01-01");
        assert_eq!(at("0 12 29 2 *"), 1_835_438_400_000, "2028-02-29 12:00");
        assert!(Cron::parse("0 0 31 2 *").unwrap().next_after(now).is_none());
    }

    #[test]
    fn bad_expressions_say_which_field() {
        for (e, field) in [
            ("* * *", "five fields"),
            ("60 * * * *", "minute"),
            ("* 24 * * *", "hour"),
            ("* * 0 * *", "day of month"),
            ("* * * 13 *", "month"),
            ("* * * * 8", "day of week"),
            ("*/0 * * * *", "minute"),
            ("5-1 * * * *", "minute"),
            ("x * * * *", "minute"),
        ] {
            let err = Cron::parse(e).unwrap_err();
            assert!(err.contains(field), "{e}: {err}");
        }
    }

    proptest! {
        #[test]
        fn the_next_time_is_the_first_minute_that_matches(
            minute in prop_oneof![Just("*".to_string()), (0u32..60).prop_map(|m| m.to_string()), (1u32..30).prop_map(|s| format!("*/{s}"))],
            hour in prop_oneof![Just("*".to_string()), (0u32..24).prop_map(|h| h.to_string()), (0u32..12).prop_map(|h| format!("{h}-{}", h + 6))],
            day in prop_oneof![Just("*".to_string()), (1u32..32).prop_map(|d| d.to_string())],
            month in prop_oneof![Just("*".to_string()), (1u32..13).prop_map(|m| m.to_string())],
            weekday in prop_oneof![Just("*".to_string()), (0u32..8).prop_map(|w| w.to_string()), Just("MON-FRI".to_string())],
            after in 0i64..4_102_444_800_000,
        ) {
            let expr = format!("{minute} {hour} {day} {month} {weekday}");
            let c = Cron::parse(&expr).unwrap();
            // Brute force within two years (a month-and-day pair may be rarer).
            let horizon = 2 * 366 * 24 * 60;
            match (c.next_after(after), brute(&c, after, horizon)) {
                (Some(a), Some(b)) => prop_assert_eq!(a, b, "{}", expr),
                (got, None) => prop_assert!(got.is_none_or(|t| t > after + horizon * 60_000), "{}", expr),
                (None, Some(b)) => prop_assert!(false, "{} missed {}", expr, b),
            }
        }
    }
}
