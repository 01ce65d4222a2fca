//! `file://` URIs as plain strings, for the protocols that carry them as such (ACP resources,
//! the IDE tools of terminal agents). The LSP host uses its own `Uri` type instead.

use std::path::{Path, PathBuf};

/// The `file://` URI of an absolute path, percent-encoding what URIs may not hold.
pub fn from_path(path: &Path) -> String {
    let mut uri = String::from("file://");
    for byte in path.to_string_lossy().bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'.' | b'_' | b'~' => {
                uri.push(byte as char);
            }
            _ => uri.push_str(&format!("%{byte:02X}")),
        }
    }
    uri
}

/// The path of a `file://` URI, percent-decoded; `None` for anything else.
pub fn to_path(uri: &str) -> Option<PathBuf> {
    let encoded = uri.strip_prefix("file://")?.as_bytes();
    let mut bytes = Vec::with_capacity(encoded.len());
    let mut i = 0;
    while i < encoded.len() {
        let decoded = (encoded[i] == b'%')
            .then(|| std::str::from_utf8(encoded.get(i + 1..i + 3)?).ok())
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match decoded {
            Some(byte) => {
                bytes.push(byte);
                i += 3;
            }
            None => {
                bytes.push(encoded[i]);
                i += 1;
            }
        }
    }
    Some(PathBuf::from(String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip_with_spaces_percent_signs_and_unicode() {
        let path = Path::new("/ws/a b/100%/漢字.rs");
        let uri = from_path(path);
        assert_eq!(uri, "file:///ws/a%20b/100%25/%E6%BC%A2%E5%AD%97.rs");
        assert_eq!(to_path(&uri).unwrap(), path);
        assert_eq!(to_path("untitled:1"), None);
        assert_eq!(to_path("file:///a%2").unwrap(), Path::new("/a%2"));
    }
}
