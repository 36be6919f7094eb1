//! Dates: Java-style formats (`yyyy-MM-dd`, `dd.MM.yyyy`, optional time fields, quoted
//! literals), proleptic Gregorian calendar arithmetic (days from and to civil dates, leap
//! years, ISO weekdays and weeks). Used by date hierarchies, microaggregation of dates and type
//! detection.

/// One element of a date format.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A numeric field with a minimum and maximum number of digits.
    Field(Field, usize, usize),
    /// Literal text.
    Literal(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Year,
    Month,
    Day,
    Hour,
    Minute,
    Second,
}

/// A compiled date format such as `dd.MM.yyyy` (see the module documentation for the syntax).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DateFormat {
    tokens: Vec<Token>,
}

/// A calendar date (proleptic Gregorian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date {
    /// Year (0–9999).
    pub year: i64,
    /// Month (1–12).
    pub month: u32,
    /// Day of the month (1–31).
    pub day: u32,
}

/// A date with an optional time of day (seconds since midnight; 0 without time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct DateTime {
    /// The date.
    pub date: Date,
    /// Seconds since midnight.
    pub seconds: u32,
}

/// Appends the quoted literal starting with the quote at `chars[i]` to `literal` (`''` is a
/// single quote, inside quotes or not); returns the index after it.
fn quoted_literal(
    pattern: &str,
    chars: &[char],
    i: usize,
    literal: &mut String,
) -> std::result::Result<usize, String> {
    if chars.get(i + 1) == Some(&'\'') {
        literal.push('\'');
        return Ok(i + 2);
    }
    let mut j = i + 1;
    loop {
        match chars.get(j) {
            None => {
                return Err(format!("date format '{pattern}' has an unterminated quote"));
            }
            Some('\'') if chars.get(j + 1) == Some(&'\'') => {
                literal.push('\'');
                j += 2;
            }
            Some('\'') => break,
            Some(&ch) => {
                literal.push(ch);
                j += 1;
            }
        }
    }
    Ok(j + 1)
}

impl DateFormat {
    /// Compiles a pattern; the error message names the offending part.
    pub fn parse(pattern: &str) -> std::result::Result<DateFormat, String> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens: Vec<Token> = Vec::new();
        let mut literal = String::new();
        let mut seen: Vec<Field> = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c == '\'' {
                i = quoted_literal(pattern, &chars, i, &mut literal)?;
                continue;
            }
            if !c.is_ascii_alphabetic() {
                literal.push(c);
                i += 1;
                continue;
            }
            let mut run = 1;
            while chars.get(i + run) == Some(&c) {
                run += 1;
            }
            let field = match (c, run) {
                ('y', 4) => Token::Field(Field::Year, 4, 4),
                ('M', 1 | 2) => Token::Field(Field::Month, run, 2),
                ('d', 1 | 2) => Token::Field(Field::Day, run, 2),
                ('H', 1 | 2) => Token::Field(Field::Hour, run, 2),
                ('m', 1 | 2) => Token::Field(Field::Minute, run, 2),
                ('s', 1 | 2) => Token::Field(Field::Second, run, 2),
                _ => {
                    let part: String = std::iter::repeat_n(c, run).collect();
                    return Err(format!(
                        "date format '{pattern}': unsupported pattern '{part}'; supported: yyyy, MM, M, dd, d, HH, H, mm, m, ss, s, other characters literally and 'quoted text'"
                    ));
                }
            };
            let Token::Field(f, _, _) = field else {
                unreachable!("fields only")
            };
            if seen.contains(&f) {
                return Err(format!(
                    "date format '{pattern}' contains '{c}' more than once"
                ));
            }
            seen.push(f);
            if !literal.is_empty() {
                tokens.push(Token::Literal(std::mem::take(&mut literal)));
            }
            tokens.push(field);
            i += run;
        }
        if !literal.is_empty() {
            tokens.push(Token::Literal(literal));
        }
        for (f, name) in [
            (Field::Year, "yyyy"),
            (Field::Month, "MM"),
            (Field::Day, "dd"),
        ] {
            if !seen.contains(&f) {
                return Err(format!(
                    "date format '{pattern}' has no {name}: expected a year (yyyy), a month (MM) and a day (dd)"
                ));
            }
        }
        Ok(DateFormat { tokens })
    }

    /// True if the format includes a time of day.
    pub fn has_time(&self) -> bool {
        self.tokens.iter().any(|t| {
            matches!(
                t,
                Token::Field(Field::Hour | Field::Minute | Field::Second, _, _)
            )
        })
    }

    /// Writes a date/time in this format (numeric fields zero-padded to their minimal width).
    pub fn format(&self, value: &DateTime) -> String {
        let mut out = String::new();
        for token in &self.tokens {
            match token {
                Token::Literal(l) => out.push_str(l),
                Token::Field(f, min, _) => {
                    let v: i64 = match f {
                        Field::Year => value.date.year,
                        Field::Month => value.date.month as i64,
                        Field::Day => value.date.day as i64,
                        Field::Hour => (value.seconds / 3600) as i64,
                        Field::Minute => (value.seconds / 60 % 60) as i64,
                        Field::Second => (value.seconds % 60) as i64,
                    };
                    out.push_str(&format!("{v:0min$}"));
                }
            }
        }
        out
    }

    /// Parses `text` (surrounding whitespace ignored); `None` if it does not match or is not a
    /// valid date/time.
    pub fn parse_date(&self, text: &str) -> Option<DateTime> {
        let b = text.trim().as_bytes();
        let mut pos = 0;
        let (mut year, mut month, mut day) = (0i64, 0u32, 0u32);
        let (mut hour, mut minute, mut second) = (0u32, 0u32, 0u32);
        for token in &self.tokens {
            match token {
                Token::Literal(l) => {
                    let l = l.as_bytes();
                    if !b[pos..].starts_with(l) {
                        return None;
                    }
                    pos += l.len();
                }
                Token::Field(f, min, max) => {
                    let mut v: u32 = 0;
                    let mut k = 0;
                    while k < *max && pos + k < b.len() && b[pos + k].is_ascii_digit() {
                        v = v * 10 + (b[pos + k] - b'0') as u32;
                        k += 1;
                    }
                    if k < *min {
                        return None;
                    }
                    pos += k;
                    match f {
                        Field::Year => year = v as i64,
                        Field::Month => month = v,
                        Field::Day => day = v,
                        Field::Hour => hour = v,
                        Field::Minute => minute = v,
                        Field::Second => second = v,
                    }
                }
            }
        }
        if pos != b.len()
            || !(1..=12).contains(&month)
            || day == 0
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return None;
        }
        Some(DateTime {
            date: Date { year, month, day },
            seconds: hour * 3600 + minute * 60 + second,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Calendar arithmetic (proleptic Gregorian; day 0 = 1970-01-01)

/// True for Gregorian leap years.
pub fn is_leap_year(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// Days in `month` (1–12) of `year`.
pub fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap_year(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Days since 1970-01-01 of a civil date. Counts in 400-year cycles (146097 days) of years
/// that start on March 1st, so that the leap day is the last day of a year.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let cycle = y.div_euclid(400);
    let year_of_cycle = y - cycle * 400; // 0..=399
    let march_month = (month as i64 + 9) % 12; // March = 0 … February = 11
    // Days before the month in a March-based year: 31,30,31,30,31 repeats every 5 months,
    // i.e. 153 days; (153·m + 2) / 5 reproduces the cumulative lengths.
    let day_of_year = (153 * march_month + 2) / 5 + day as i64 - 1;
    let day_of_cycle = year_of_cycle * 365 + year_of_cycle / 4 - year_of_cycle / 100 + day_of_year;
    // 719468 = days from 0000-03-01 to 1970-01-01.
    cycle * 146097 + day_of_cycle - 719468
}

/// Civil date of a day number (inverse of [`days_from_civil`]).
pub fn civil_from_days(days: i64) -> Date {
    let z = days + 719468;
    let cycle = z.div_euclid(146097);
    let day_of_cycle = z - cycle * 146097; // 0..=146096
    // Remove the leap days that precede this day in the cycle, then divide by 365.
    let year_of_cycle =
        (day_of_cycle - day_of_cycle / 1460 + day_of_cycle / 36524 - day_of_cycle / 146096) / 365;
    let day_of_year =
        day_of_cycle - (365 * year_of_cycle + year_of_cycle / 4 - year_of_cycle / 100);
    let march_month = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * march_month + 2) / 5 + 1) as u32;
    let month = if march_month < 10 {
        march_month + 3
    } else {
        march_month - 9
    } as u32;
    let year = year_of_cycle + cycle * 400 + if month <= 2 { 1 } else { 0 };
    Date { year, month, day }
}

/// ISO weekday of a day number: 0 = Monday … 6 = Sunday (1970-01-01 was a Thursday).
pub fn weekday(days: i64) -> i64 {
    (days + 3).rem_euclid(7)
}

/// ISO 8601 week of a day number: (week-based year, week 1–53, day number of its Monday).
/// A week belongs to the year that contains its Thursday.
pub fn iso_week(days: i64) -> (i64, u32, i64) {
    let monday = days - weekday(days);
    let thursday = monday + 3;
    let year = civil_from_days(thursday).year;
    let week = (thursday - days_from_civil(year, 1, 1)) / 7 + 1;
    (year, week as u32, monday)
}
