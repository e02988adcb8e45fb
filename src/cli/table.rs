//! Plain text tables and durations for `holdfast status` and `explain`.

/// Column alignment.
#[derive(Clone, Copy, PartialEq)]
pub enum Align {
    Left,
    Right,
}

/// Columns two spaces apart, each as wide as its widest cell, so every
/// row lines up whatever the length of a name; no trailing spaces.
pub fn table(columns: &[(&str, Align)], rows: &[Vec<String>]) -> String {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = columns.iter().map(|(h, _)| width(h)).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(width(cell));
        }
    }
    let mut out = String::new();
    let header: Vec<String> = columns.iter().map(|(h, _)| h.to_string()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, ((_, align), w)) in columns.iter().zip(&widths).enumerate() {
            let cell = row.get(i).map(String::as_str).unwrap_or("");
            if i > 0 {
                line.push_str("  ");
            }
            let pad = " ".repeat(w.saturating_sub(width(cell)));
            match align {
                Align::Left => {
                    line.push_str(cell);
                    line.push_str(&pad);
                }
                Align::Right => {
                    line.push_str(&pad);
                    line.push_str(cell);
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// FRR's Up/Down format (`peer_uptime` in bgpd): `hh:mm:ss` under a day,
/// `XdYYhZZm` under a week, else `XXwYdZZh`.
pub fn up_down(seconds: u64) -> String {
    const DAY: u64 = 86_400;
    const WEEK: u64 = 7 * DAY;
    let (h, m, s) = ((seconds / 3600) % 24, (seconds / 60) % 60, seconds % 60);
    if seconds < DAY {
        format!("{h:02}:{m:02}:{s:02}")
    } else if seconds < WEEK {
        format!("{}d{h:02}h{m:02}m", seconds / DAY)
    } else {
        format!("{:02}w{}d{h:02}h", seconds / WEEK, (seconds % WEEK) / DAY)
    }
}

/// A time left on a timer, rounded up so "0s" means now: `12s`, `1m05s`,
/// `2h03m`.
pub fn time_left(seconds: f64) -> String {
    // `as` saturates (and takes NaN to 0): no input makes this panic.
    let s = seconds.max(0.0).ceil() as u64;
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_frr() {
        assert_eq!(up_down(0), "00:00:00");
        assert_eq!(up_down(3723), "01:02:03");
        assert_eq!(up_down(86_399), "23:59:59");
        assert_eq!(up_down(86_400 + 3600 * 4 + 60 * 5), "1d04h05m");
        assert_eq!(up_down(7 * 86_400 * 3 + 86_400 * 2 + 3600 * 7), "03w2d07h");
        assert_eq!(time_left(11.2), "12s");
        assert_eq!(time_left(0.0), "0s");
        assert_eq!(time_left(-3.0), "0s");
        assert_eq!(time_left(f64::NAN), "0s");
        assert_eq!(time_left(65.0), "1m05s");
        assert_eq!(time_left(7380.0), "2h03m");
        assert!(time_left(f64::INFINITY).ends_with('m'));
    }

    #[test]
    fn columns_line_up() {
        let t = table(
            &[("Name", Align::Left), ("N", Align::Right)],
            &[
                vec!["a".into(), "1".into()],
                vec!["longer".into(), "1000".into()],
            ],
        );
        assert_eq!(t, "Name       N\na          1\nlonger  1000\n");
    }
}
