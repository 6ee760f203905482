//! Addresses in the JSON report are strings (`"0x7f3a…"`): 64-bit values do not survive as
//! JSON numbers in JavaScript dashboards.

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Serialize, Serializer};
use std::borrow::Cow;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Hex(pub u64);

impl Serialize for Hex {
    /// `{:#x}`'s text, made on the stack: a report writes thousands of addresses, and the
    /// formatting machinery (`collect_str`) cost ~700 instructions each.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; 18];
        s.serialize_str(self.text(&mut buf))
    }
}

impl Hex {
    /// `format!("{:#x}", self.0)` written into `buf`.
    fn text(self, buf: &mut [u8; 18]) -> &str {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let digits = (64 - self.0.leading_zeros()).div_ceil(4).max(1) as usize;
        buf[0] = b'0';
        buf[1] = b'x';
        for i in 0..digits {
            buf[1 + digits - i] = DIGITS[((self.0 >> (4 * i)) & 0xf) as usize];
        }
        // Only ASCII digits were written.
        std::str::from_utf8(&buf[..2 + digits]).unwrap_or("0x0")
    }
}

impl JsonSchema for Hex {
    fn schema_name() -> Cow<'static, str> {
        "Address".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "string",
            "pattern": "^0x[0-9a-f]+$",
            "description": "A 64-bit address or value, as lower-case hex with a 0x prefix."
        })
    }
}

impl std::fmt::LowerHex for Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::LowerHex::fmt(&self.0, f)
    }
}

impl std::fmt::Display for Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::Hex;

    #[test]
    fn the_text_is_lower_hex_with_its_prefix() {
        for v in [0, 1, 0xf, 0x10, 0xdead_beef, 0x7f3a_0000_1000, u64::MAX, 1 << 63, 0x0123_4567_89ab_cdef] {
            let mut buf = [0u8; 18];
            assert_eq!(Hex(v).text(&mut buf), format!("{v:#x}"));
            assert_eq!(serde_json::to_string(&Hex(v)).unwrap(), format!("\"{v:#x}\""));
        }
    }
}
