//! Parsing and printing one parameter's value, with Redis 7.2's rules and error texts (the
//! reasons after `CONFIG SET failed (possibly related to argument 'x') - `, and the last line of
//! a fatal config-file error).
//!
//! Every value is kept as the canonical string `CONFIG GET` prints (memory in bytes, enums in
//! lower case, `save` pairs joined by spaces …); `parse` turns the words of a config line or a
//! CONFIG SET value into that string.

use super::table::{Def, Kind, ENUM_SYNONYMS};
use super::ConfigError;

/// Parses a byte count as Redis's `memtoull`: digits then an optional unit — `b`, `k` = 1000,
/// `kb` = 1024, `m`, `mb`, `g`, `gb`, any case — and nothing else (no sign, no spaces). Its
/// quirks are kept, since CONFIG SET replies depend on them: no digits reads as 0 (`""`,
/// `kb`), too many digits saturate at 2^64 − 1, and the unit multiplies with wrap-around.
pub fn parse_memory(s: &str) -> Option<u64> {
    let digits = s.bytes().take_while(|c| c.is_ascii_digit()).count();
    let mul: u64 = match s[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return None,
    };
    if digits >= 128 {
        return None;
    }
    let n = if digits == 0 { 0 } else { s[..digits].parse::<u64>().unwrap_or(u64::MAX) };
    Some(n.wrapping_mul(mul))
}

/// Formats bytes as CONFIG REWRITE does: `Ngb`/`Nmb`/`Nkb` when exactly divisible.
pub fn format_memory(v: u64) -> String {
    for (u, m) in [("gb", 1u64 << 30), ("mb", 1 << 20), ("kb", 1 << 10)] {
        if v != 0 && v.is_multiple_of(m) {
            return format!("{}{u}", v / m);
        }
    }
    v.to_string()
}

fn range_err(min: i128, max: i128) -> ConfigError {
    ConfigError::BadValue(format!("argument must be between {min} and {max} inclusive").into())
}

fn one<'a>(args: &[&'a str]) -> Result<&'a str, ConfigError> {
    match args {
        [v] => Ok(v),
        _ => Err(ConfigError::BadValue("wrong number of arguments".into())),
    }
}

/// Redis's `string2ll` for config integers: optional `-`, digits, no leading zeros.
fn strict_int(s: &str) -> Option<i128> {
    crate::protocol::parse_i64(s.as_bytes()).map(|v| v as i128).or_else(|| {
        // Unsigned parameters above i64::MAX (maxmemory's bound is u64::MAX).
        (!s.is_empty() && !s.starts_with('0') && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok().map(|v| v as i128))
            .flatten()
    })
}

/// Turns the words of a value into its canonical form. `current` is the value now (output
/// limits change only the classes named).
pub fn parse(def: &Def, args: &[&str], current: &str) -> Result<String, ConfigError> {
    match def.kind {
        Kind::Bool => match one(args)?.to_ascii_lowercase().as_str() {
            v @ ("yes" | "no") => Ok(v.into()),
            _ => Err(ConfigError::BadValue("argument must be 'yes' or 'no'".into())),
        },
        Kind::Int { min, max } => {
            let v = strict_int(one(args)?)
                .ok_or(ConfigError::BadValue("argument couldn't be parsed into an integer".into()))?;
            if v < min || v > max {
                return Err(range_err(min, max));
            }
            // What Redis's apply step does to the value, visible in CONFIG GET.
            let v = match def.name {
                "hz" => v.clamp(1, 500),
                _ => v,
            };
            Ok(v.to_string())
        }
        Kind::Memory { min, max } => {
            let u = parse_memory(one(args)?).ok_or(ConfigError::BadValue("argument must be a memory value".into()))?;
            // A signed parameter sees the unsigned result as Redis's C cast does.
            let v = if max <= i64::MAX as i128 { u as i64 as i128 } else { u as i128 };
            if v < min || v > max {
                return Err(range_err(min, max));
            }
            // Redis raises a backlog below 16 KB to 16 KB.
            let v = if def.name == "repl-backlog-size" { v.max(16 * 1024) } else { v };
            Ok(v.to_string())
        }
        Kind::MemoryOrPercent { max } => {
            let a = one(args)?;
            if let Some(u) = parse_memory(a) {
                // Signed: 2^64 − 1 reads as −1, that is 1%.
                let v = u as i64;
                if v as i128 > max {
                    return Err(range_err(-100, max));
                }
                return Ok(if v < 0 { format!("{}%", -v) } else { v.to_string() });
            }
            let bad = || ConfigError::BadValue("argument must be a memory or percent value".into());
            let p = a.strip_suffix('%').ok_or_else(bad)?;
            if p.is_empty() || !p.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            match p.parse::<u64>() {
                Ok(0) => Ok("0".into()),
                Ok(n) if n <= 100 => Ok(format!("{n}%")),
                _ => Err(ConfigError::BadValue("percentage argument must be less or equal to 100".into())),
            }
        }
        Kind::Octal { max } => {
            let a = one(args)?;
            let v = i64::from_str_radix(a, 8)
                .map_err(|_| ConfigError::BadValue("argument couldn't be parsed as an octal number".into()))?;
            if !(0..=max).contains(&v) {
                return Err(ConfigError::BadValue(format!("argument must be between 0 and {max:o} inclusive").into()));
            }
            Ok(format!("{v:o}"))
        }
        Kind::Str | Kind::Dir => {
            let v = one(args)?;
            check_string(def.name, v)?;
            Ok(v.to_string())
        }
        Kind::Enum(names) => {
            let l = one(args)?.to_ascii_lowercase();
            if !names.contains(&l.as_str()) {
                return Err(ConfigError::BadValue(
                    format!("argument(s) must be one of the following: {}", names.join(", ")).into(),
                ));
            }
            let canon = ENUM_SYNONYMS.iter().find(|(n, syn, _)| *n == def.name && *syn == l).map(|s| s.2);
            Ok(canon.map(String::from).unwrap_or(l))
        }
        Kind::Flags(names) => {
            // None, or an empty one, names no flag (the loader splits a lone argument holding
            // several, `--shutdown-on-sigint "now force"`).
            let mut set = vec![false; names.len()];
            if args.is_empty() {
                return Err(ConfigError::BadValue(
                    format!("argument(s) must be one of the following: {}", names.join(", ")).into(),
                ));
            }
            for a in args {
                let l = a.to_ascii_lowercase();
                let i = names.iter().position(|n| *n == l).ok_or_else(|| {
                    ConfigError::BadValue(
                        format!("argument(s) must be one of the following: {}", names.join(", ")).into(),
                    )
                })?;
                set[i] = true;
            }
            if def.name.starts_with("shutdown-on-") && set[1] && set[2] {
                return Err(ConfigError::BadValue(
                    "shutdown options SAVE and NOSAVE can't be used simultaneously".into(),
                ));
            }
            // Index 0 is the empty set's name ("default").
            let on: Vec<&str> = names.iter().zip(&set).skip(1).filter(|(_, s)| **s).map(|(n, _)| *n).collect();
            Ok(if on.is_empty() { names[0].to_string() } else { on.join(" ") })
        }
        Kind::Save => {
            // `save ""`, or a bare `save` line: no save points.
            if args.is_empty() || args == [""] {
                return Ok(String::new());
            }
            let bad = || ConfigError::BadValue("Invalid save parameters".into());
            if !args.len().is_multiple_of(2) {
                return Err(bad());
            }
            let mut out = Vec::new();
            for pair in args.chunks(2) {
                let secs = pair[0].trim_start().parse::<i64>().map_err(|_| bad())?;
                let changes = pair[1].trim_start().parse::<i64>().map_err(|_| bad())?;
                if secs < 1 || changes < 0 {
                    return Err(bad());
                }
                out.push(format!("{secs} {changes}"));
            }
            Ok(out.join(" "))
        }
        Kind::OutputLimits => {
            // One quoted argument may hold the class and its three limits, as Redis splits it.
            let split: Vec<&str>;
            let args = if args.len() == 1 {
                split = args[0].split(' ').collect();
                &split[..]
            } else {
                args
            };
            parse_output_limits(args, current)
        }
        Kind::Events => events_canonical(one(args)?),
        Kind::OomValues => {
            // One quoted argument holds all three (`"0 200 800"`), as CONFIG SET gives them.
            let split: Vec<&str>;
            let args = if args.len() == 1 {
                split = args[0].split_whitespace().collect();
                &split[..]
            } else {
                args
            };
            if args.len() != 3 {
                return Err(ConfigError::BadValue("wrong number of arguments".into()));
            }
            let mut out = Vec::new();
            for a in args {
                match a.parse::<i64>() {
                    Ok(v) if (-2000..=2000).contains(&v) => out.push(v.to_string()),
                    _ => {
                        return Err(ConfigError::BadValue(
                            "Invalid oom-score-adj-values, elements must be between -2000 and 2000.".into(),
                        ))
                    }
                }
            }
            Ok(out.join(" "))
        }
        Kind::Bind => {
            if args.len() > 16 {
                return Err(ConfigError::BadValue("Too many bind addresses specified.".into()));
            }
            if args == [""] {
                return Ok(String::new());
            }
            Ok(args.join(" "))
        }
        Kind::Replicaof => {
            if args.len() != 2 {
                return Err(ConfigError::BadValue("wrong number of arguments".into()));
            }
            if args[0].eq_ignore_ascii_case("no") && args[1].eq_ignore_ascii_case("one") {
                return Ok(String::new());
            }
            match args[1].parse::<u16>() {
                Ok(_) if args[1].bytes().all(|c| c.is_ascii_digit()) => Ok(format!("{} {}", args[0], args[1])),
                _ => Err(ConfigError::BadValue("Invalid master port".into())),
            }
        }
        Kind::Percentiles => {
            if args == [""] {
                return Ok(String::new());
            }
            let mut out = Vec::new();
            for a in args {
                let v: f64 = a.parse().map_err(|_| {
                    ConfigError::BadValue("Invalid latency-tracking-info-percentiles parameters".into())
                })?;
                if !(0.0..=100.0).contains(&v) {
                    return Err(ConfigError::BadValue(
                        "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into(),
                    ));
                }
                out.push(format_percentile(v));
            }
            Ok(out.join(" "))
        }
    }
}

/// The validations Redis applies to particular string parameters.
fn check_string(name: &str, v: &str) -> Result<(), ConfigError> {
    match name {
        "cluster-announce-hostname" => {
            if v.len() >= 256 {
                return Err(ConfigError::BadValue("Hostnames must be less than 256 characters".into()));
            }
            if !v.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.') {
                return Err(ConfigError::BadValue(
                    "Hostnames may only contain alphanumeric characters, hyphens or dots".into(),
                ));
            }
        }
        "cluster-announce-human-nodename" if v.bytes().any(|c| b"!#$%&()*+:;<>?@[]^{|}~".contains(&c)) => {
            return Err(ConfigError::BadValue("Announced human node name contained invalid character".into()));
        }
        _ => {}
    }
    Ok(())
}

/// `%f` with trailing zeros (and a trailing point) removed, as Redis prints percentiles.
pub fn format_percentile(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The classes of `client-output-buffer-limit`, in the order CONFIG GET prints them.
const CLASSES: [&str; 3] = ["normal", "slave", "pubsub"];

/// Parses `<class> <hard> <soft> <seconds>` groups over the current limits.
fn parse_output_limits(args: &[&str], current: &str) -> Result<String, ConfigError> {
    if args == [""] {
        return Ok(current.to_string());
    }
    if args.is_empty() || !args.len().is_multiple_of(4) {
        return Err(ConfigError::BadValue("Wrong number of arguments in buffer limit configuration.".into()));
    }
    let mut limits: Vec<[u64; 3]> = output_limits(current);
    for g in args.chunks(4) {
        let class = match g[0].to_ascii_lowercase().as_str() {
            "normal" => 0,
            "slave" | "replica" => 1,
            "pubsub" => 2,
            _ => {
                return Err(ConfigError::BadValue(
                    "Invalid client class specified in buffer limit configuration.".into(),
                ))
            }
        };
        let bad = || {
            ConfigError::BadValue("Error in hard, soft or soft_seconds setting in buffer limit configuration.".into())
        };
        let hard = parse_memory(g[1]).ok_or_else(bad)?;
        let soft = parse_memory(g[2]).ok_or_else(bad)?;
        let secs = g[3].parse::<u64>().map_err(|_| bad())?;
        limits[class] = [hard, soft, secs];
    }
    Ok(format_output_limits(&limits))
}

/// The canonical `client-output-buffer-limit` value as (hard, soft, seconds) per class.
pub fn output_limits(v: &str) -> Vec<[u64; 3]> {
    let w: Vec<u64> = v.split(' ').filter_map(|t| t.parse().ok()).collect();
    (0..3)
        .map(|c| {
            [
                w.get(c * 3).copied().unwrap_or(0),
                w.get(c * 3 + 1).copied().unwrap_or(0),
                w.get(c * 3 + 2).copied().unwrap_or(0),
            ]
        })
        .collect()
}

fn format_output_limits(l: &[[u64; 3]]) -> String {
    CLASSES.iter().zip(l).map(|(c, [h, s, t])| format!("{c} {h} {s} {t}")).collect::<Vec<_>>().join(" ")
}

/// `notify-keyspace-events` in Redis's canonical order: `A` when all of `g$lshzxetd` are on
/// (and then, as in Redis, `n` is not printed though it stays on), else the classes present
/// in the order `g$lshzxetdn`; then `K`, `E`, `m`.
fn events_canonical(v: &str) -> Result<String, ConfigError> {
    const ALL: &str = "g$lshzxetd";
    let mut on = std::collections::BTreeSet::new();
    for c in v.chars() {
        match c {
            'A' => on.extend(ALL.chars()),
            'g' | '$' | 'l' | 's' | 'h' | 'z' | 'x' | 'e' | 't' | 'd' | 'n' | 'K' | 'E' | 'm' => {
                on.insert(c);
            }
            _ => return Err(ConfigError::BadValue("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".into())),
        }
    }
    let mut out = String::new();
    if ALL.chars().all(|c| on.contains(&c)) {
        out.push('A');
        // Stored, so the flag stays on; `Config::value_of` hides it as Redis prints it.
        if on.contains(&'n') {
            out.push('n');
        }
    } else {
        out.extend("g$lshzxetdn".chars().filter(|c| on.contains(c)));
    }
    out.extend("KEm".chars().filter(|c| on.contains(c)));
    Ok(out)
}

/// A value as a config-file line writes it (CONFIG REWRITE): memory with units, strings quoted.
pub fn rewrite_words(def: &Def, value: &str) -> Vec<String> {
    match def.kind {
        Kind::Memory { .. } | Kind::MemoryOrPercent { .. } => {
            vec![value.parse::<u64>().map(format_memory).unwrap_or_else(|_| value.to_string())]
        }
        Kind::Str | Kind::Dir | Kind::Events => vec![quote(value)],
        Kind::Save | Kind::Percentiles | Kind::Bind if value.is_empty() => vec!["\"\"".into()],
        _ => vec![value.to_string()],
    }
}

/// Quotes a value for a config line, C-style, as Redis's `sdscatrepr`.
pub fn quote(a: &str) -> String {
    let mut s = String::from("\"");
    for c in a.chars() {
        match c {
            '"' => s.push_str("\\\""),
            '\\' => s.push_str("\\\\"),
            '\n' => s.push_str("\\n"),
            '\r' => s.push_str("\\r"),
            '\t' => s.push_str("\\t"),
            c => s.push(c),
        }
    }
    s.push('"');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("1k"), Some(1000));
        assert_eq!(parse_memory("1KB"), Some(1024));
        assert_eq!(parse_memory("2gb"), Some(2 << 30));
        assert_eq!(parse_memory("010"), Some(10));
        for bad in ["-1", "+1", "1.5mb", " 1", "1tb", "0x10"] {
            assert_eq!(parse_memory(bad), None, "{bad}");
        }
        // Redis's quirks: no digits is 0, too many saturate.
        assert_eq!(parse_memory(""), Some(0));
        assert_eq!(parse_memory("kb"), Some(0));
        assert_eq!(parse_memory("99999999999999999999"), Some(u64::MAX));
        assert_eq!(format_memory(3 << 30), "3gb");
        assert_eq!(format_memory(1_000_000), "1000000");
    }

    #[test]
    fn events_order() {
        assert_eq!(events_canonical("KEA").unwrap(), "AKE");
        assert_eq!(events_canonical("Elx").unwrap(), "lxE");
        assert_eq!(events_canonical("nK$").unwrap(), "$nK");
        // Stored with `n` (the flag stays on); CONFIG GET prints `A` (Config::value_of).
        assert_eq!(events_canonical("An").unwrap(), "An");
        assert_eq!(events_canonical("KEAn").unwrap(), "AnKE");
        assert!(events_canonical("Q").is_err());
    }

    #[test]
    fn percentiles_print_like_redis() {
        assert_eq!(format_percentile(99.9), "99.9");
        assert_eq!(format_percentile(50.0), "50");
    }
}
