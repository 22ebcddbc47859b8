//! An actor's directory (one small object per actor): the rule of the
//! per-minute send limit. The shell keeps the actor's sends of the last
//! minute and asks this rule whether one more may go.

/// The window of the per-minute send limit.
pub const WINDOW_MS: i64 = 60_000;

/// Whether one more send may go, with `count` sends in the window (the
/// oldest at `oldest`) and at most `limit` a minute: `Err(seconds)` to wait
/// until the oldest leaves the window (at least one).
pub fn admit(count: i64, oldest: Option<i64>, limit: i64, now: i64) -> Result<(), i64> {
    if count < limit {
        return Ok(());
    }
    let retry_ms = oldest.map_or(WINDOW_MS, |o| o + WINDOW_MS - now).max(1_000);
    Err((retry_ms + 999) / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sliding_minute() {
        assert_eq!(admit(1, Some(0), 2, 10), Ok(()));
        assert_eq!(admit(2, Some(0), 2, 10_000), Err(50));
        assert_eq!(admit(2, Some(0), 2, 59_900), Err(1), "at least a second");
        assert_eq!(admit(5, None, 2, 0), Err(60));
    }
}
