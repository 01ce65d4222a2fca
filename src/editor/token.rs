//! The secret an agent must present to agentls's MCP servers: 128 random bits, compared in
//! constant time, never shown in `Debug` output.

use std::fmt;

use subtle::ConstantTimeEq as _;

/// A fresh random token, as 32 lowercase hex digits.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthToken(String);

impl AuthToken {
    /// 128 bits from the operating system's random source.
    pub fn generate() -> std::io::Result<Self> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(std::io::Error::other)?;
        Ok(Self(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// The token as it goes into discovery files and environments.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `offered` is this token. Takes the same time wherever the first difference is.
    pub fn matches(&self, offered: &str) -> bool {
        bool::from(self.0.as_bytes().ct_eq(offered.as_bytes()))
    }
}

impl fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AuthToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_fresh_hex_and_match_only_themselves() {
        let a = AuthToken::generate().unwrap();
        let b = AuthToken::generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().chars().all(|c| c.is_ascii_hexdigit()));
        assert!(a.matches(a.as_str()));
        assert!(!a.matches(b.as_str()));
        assert!(!a.matches(""));
        assert!(!a.matches(&a.as_str()[..31]));
        assert!(!format!("{a:?}").contains(a.as_str()));
    }
}
