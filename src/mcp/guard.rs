//! Who may talk to the loopback socket: every HTTP request (a WebSocket upgrade or a Streamable
//! HTTP call) must name our own address as its `Host`, carry no `Origin` (browsers always send
//! one; terminal agents never do) and present the token. A refusal says which rule failed, for
//! the log and the 4xx body; it never reveals the token. What it turns away is logged through
//! `refusals`, a line per kind per minute.

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse as _, Response};

use super::refusals;
use super::token::AuthToken;

/// Where the token travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenHeader {
    /// A header whose whole value is the token (the WebSocket IDE protocol).
    Plain(&'static str),
    /// `Authorization: Bearer <token>` (the Streamable HTTP companion protocol).
    Bearer,
}

/// The WebSocket IDE protocol's token header.
pub const WS_TOKEN_HEADER: &str = "x-claude-code-ide-authorization";

/// Why a request was turned away.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The request came from a web page (it has an `Origin`).
    #[error("request carries an Origin header ({0}); browsers may not connect")]
    Origin(String),
    /// `Host` is missing or names another address (DNS rebinding).
    #[error("Host {0:?} is not this server's loopback address")]
    Host(String),
    /// No token.
    #[error("no authorization token")]
    NoToken,
    /// A token, but not ours.
    #[error("wrong authorization token")]
    WrongToken,
    /// The token, but every connection slot of the port is taken.
    #[error("{0} connections are open already (the most a port takes)")]
    Full(usize),
}

impl Refusal {
    /// The HTTP status that goes with it.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::Origin(_) | Self::Host(_) => StatusCode::FORBIDDEN,
            Self::NoToken | Self::WrongToken => StatusCode::UNAUTHORIZED,
            Self::Full(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// Its kind, for the bounded log.
    fn kind(&self) -> &'static str {
        match self {
            Self::Origin(_) => "refused a request (from a web page)",
            Self::Host(_) => "refused a request (for another host)",
            Self::NoToken => "refused a request (no token)",
            Self::WrongToken => "refused a request (wrong token)",
            Self::Full(_) => "refused a connection (every slot is taken)",
        }
    }

    /// The answer to the request it turned away on `port`, logged (bounded).
    pub fn answer(self, port: u16) -> Response {
        refusals::refused(self.kind(), port, &self);
        (self.status(), self.to_string()).into_response()
    }
}

/// Checks one request's headers against the rules, for a server listening on 127.0.0.1:`port`.
pub fn check(
    headers: &HeaderMap,
    port: u16,
    token: &AuthToken,
    carrier: TokenHeader,
) -> Result<(), Refusal> {
    check_with(headers, port, carrier, |offered| {
        token.matches(offered).then_some(())
    })
}

/// Checks the `Origin` and `Host` rules, then hands the offered token to `accept` (which
/// compares it in constant time); returns what `accept` found.
pub fn check_with<T>(
    headers: &HeaderMap,
    port: u16,
    carrier: TokenHeader,
    accept: impl FnOnce(&str) -> Option<T>,
) -> Result<T, Refusal> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        return Err(Refusal::Origin(
            String::from_utf8_lossy(origin.as_bytes()).into_owned(),
        ));
    }
    let host = headers
        .get(header::HOST)
        .map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned())
        .unwrap_or_default();
    if !is_our_host(&host, port) {
        return Err(Refusal::Host(host));
    }
    let offered = match carrier {
        TokenHeader::Plain(name) => headers.get(name).map(|v| v.as_bytes()),
        TokenHeader::Bearer => headers
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes())
            .and_then(|v| v.strip_prefix(b"Bearer ")),
    };
    let offered = offered.ok_or(Refusal::NoToken)?;
    let offered = std::str::from_utf8(offered).map_err(|_| Refusal::WrongToken)?;
    accept(offered.trim()).ok_or(Refusal::WrongToken)
}

/// `127.0.0.1:<port>` or `localhost:<port>` (any case).
fn is_our_host(host: &str, port: u16) -> bool {
    let Some((name, host_port)) = host.rsplit_once(':') else {
        return false;
    };
    host_port.parse::<u16>() == Ok(port)
        && (name == "127.0.0.1" || name.eq_ignore_ascii_case("localhost"))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn only_our_host_our_token_and_no_origin_pass() {
        let token = AuthToken::generate().unwrap();
        let ws = TokenHeader::Plain(WS_TOKEN_HEADER);
        let good = [
            ("host", "127.0.0.1:4000"),
            (WS_TOKEN_HEADER, token.as_str()),
        ];
        assert_eq!(check(&headers(&good), 4000, &token, ws), Ok(()));
        let local = [
            ("host", "LocalHost:4000"),
            (WS_TOKEN_HEADER, token.as_str()),
        ];
        assert_eq!(check(&headers(&local), 4000, &token, ws), Ok(()));

        let other_port = [
            ("host", "127.0.0.1:4001"),
            (WS_TOKEN_HEADER, token.as_str()),
        ];
        assert!(matches!(
            check(&headers(&other_port), 4000, &token, ws),
            Err(Refusal::Host(_))
        ));
        let rebinding = [
            ("host", "evil.example:4000"),
            (WS_TOKEN_HEADER, token.as_str()),
        ];
        assert!(matches!(
            check(&headers(&rebinding), 4000, &token, ws),
            Err(Refusal::Host(_))
        ));
        let mut with_origin = good.to_vec();
        with_origin.push(("origin", "https://evil.example"));
        let refusal = check(&headers(&with_origin), 4000, &token, ws).unwrap_err();
        assert_eq!(refusal.status(), StatusCode::FORBIDDEN);
        assert_eq!(
            check(&headers(&[("host", "127.0.0.1:4000")]), 4000, &token, ws),
            Err(Refusal::NoToken)
        );
        let wrong = [("host", "127.0.0.1:4000"), (WS_TOKEN_HEADER, "0123")];
        let refusal = check(&headers(&wrong), 4000, &token, ws).unwrap_err();
        assert_eq!(refusal, Refusal::WrongToken);
        assert_eq!(refusal.status(), StatusCode::UNAUTHORIZED);
    }

    #[test]
    fn bearer_tokens_need_the_scheme() {
        let token = AuthToken::generate().unwrap();
        let bearer = format!("Bearer {}", token.as_str());
        let good = [("host", "localhost:9"), ("authorization", bearer.as_str())];
        assert_eq!(
            check(&headers(&good), 9, &token, TokenHeader::Bearer),
            Ok(())
        );
        let bare = [("host", "localhost:9"), ("authorization", token.as_str())];
        assert_eq!(
            check(&headers(&bare), 9, &token, TokenHeader::Bearer),
            Err(Refusal::NoToken)
        );
    }
}
