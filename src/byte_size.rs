//! Sizes as people write them on a command line (`--max-memory 4G`, `--memory-limit 1GiB`): one
//! parser for the CLI and the bench, so both read a size alike.

/// A size as people write it: bytes, or with a suffix K, M, G, T (powers of 1024; `KiB`, `MB`…
/// alike). Fractions are taken (`1.5G`); zero, negative and past-u64 sizes are refused.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit() && c != '.').unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let value: f64 = number.parse().map_err(|_| format!("{text:?} is not a size (say 4G, 512M or a number of bytes)"))?;
    let shift = match unit.trim().to_ascii_uppercase().trim_end_matches("IB").trim_end_matches('B') {
        "" => 0,
        "K" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (K, M, G or T)")),
    };
    let bytes = value * (1u64 << shift) as f64;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(format!("{text:?} is not a size knot can use"));
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_people_write_are_read_in_powers_of_1024() {
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("4GiB"), Ok(4 << 30));
        assert_eq!(parse_size("512m"), Ok(512 << 20));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size(" 4096 "), Ok(4096));
    }

    #[test]
    fn a_size_knot_cannot_use_is_refused_with_the_text_named() {
        for bad in ["", "G", "4X", "0", "0.1", "99999999999T", "-1G"] {
            let e = parse_size(bad).expect_err(bad);
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
    }
}
