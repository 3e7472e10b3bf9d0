//! The bearer token every request carries when the operator set one (`--token-env`). A browser
//! cannot send a header on a navigation, so a page is opened once with `?token=…`: the server
//! answers with the token in a cookie (`HttpOnly`, `SameSite=Strict`) and the address without
//! it; the cookie then stands for the token on reads (GET) only, never on what changes state.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::Response;

use super::AppState;
use super::responses::with_hint;

/// Every request carries the token when one is set, `/health` and unknown paths included.
pub(super) async fn authenticate(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let Some(expected) = &state.token else {
        return next.run(request).await;
    };
    let reading = request.method() == Method::GET;
    if reading
        && let Some(given) = query_token(request.uri())
        && same_token(given.as_bytes(), expected)
    {
        return into_cookie(&address_without_token(request.uri()), &given);
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        .and_then(bearer_token)
        .or_else(|| reading.then(|| cookie_token(request.headers())).flatten());
    match given {
        Some(given) if same_token(given, expected) => next.run(request).await,
        found => {
            let error = if found.is_some() {
                "the bearer token is wrong"
            } else {
                "this server needs `Authorization: Bearer <token>`"
            };
            let mut response = with_hint(
                StatusCode::UNAUTHORIZED,
                error,
                "Send the token the operator set in the variable named by `rl serve --token-env`",
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}

/// The cookie that stands for the token in a browser.
const COOKIE: &str = "rl_token";

/// `?token=…` of a page's address.
fn query_token(uri: &Uri) -> Option<String> {
    uri.query()?
        .split('&')
        .find_map(token_of)
        .map(percent_decode)
}

/// The token a query's `name=value` pair carries, if it is `token=…`.
fn token_of(pair: &str) -> Option<&str> {
    pair.strip_prefix("token=")
}

/// Where a page opened with `?token=` is sent once the cookie is set: the same address without
/// the token, its other parameters kept (`?compare=…`). The path starts with exactly one `/`:
/// `//host` or `/\host` would send the browser to another site.
fn address_without_token(uri: &Uri) -> String {
    let path = format!("/{}", uri.path().trim_start_matches(['/', '\\']));
    let kept: Vec<&str> = uri
        .query()
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty() && token_of(pair).is_none())
        .collect();
    if kept.is_empty() {
        path
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}

/// `%XX` and `+` undone (a token pasted into an address may be encoded).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'%' if index + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[index + 1..index + 3]).ok();
                if let Some(byte) = hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
                    out.push(byte);
                    index += 3;
                } else {
                    out.push(b'%');
                    index += 1;
                }
            }
            b'+' => {
                out.push(b' ');
                index += 1;
            }
            byte => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A redirect to `address` (the page's, without the token), with the token set as the cookie.
fn into_cookie(address: &str, token: &str) -> Response {
    let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
    let Ok(cookie) = HeaderValue::from_str(&cookie)
        .map_err(|_| ())
        .and_then(|value| {
            // A cookie value is printable ASCII without `;`, `,`, space or quotes.
            token
                .bytes()
                .all(|byte| byte.is_ascii_graphic() && !b";,\"\\".contains(&byte))
                .then_some(value)
                .ok_or(())
        })
    else {
        return with_hint(
            StatusCode::BAD_REQUEST,
            "this token cannot be kept in a browser's cookie",
            "Use a token of printable ASCII without `;`, `,`, quotes or spaces for the pages",
        );
    };
    let mut response = Response::new(axum::body::Body::empty());
    *response.status_mut() = StatusCode::SEE_OTHER;
    let headers = response.headers_mut();
    headers.insert(header::SET_COOKIE, cookie);
    if let Ok(location) = HeaderValue::from_str(address) {
        headers.insert(header::LOCATION, location);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// The token a browser's cookie carries.
fn cookie_token(headers: &axum::http::HeaderMap) -> Option<&[u8]> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .flat_map(|value| value.as_bytes().split(|byte| *byte == b';'))
        .map(<[u8]>::trim_ascii)
        .find_map(|pair| pair.strip_prefix(COOKIE.as_bytes())?.strip_prefix(b"="))
        .filter(|token| !token.is_empty())
}

/// The token of `Bearer <token>` (the scheme in any case).
fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
        .filter(|token| !token.is_empty())
}

/// Compares in a time that depends on the expected token's length only, never on where the
/// given one differs.
fn same_token(given: &[u8], expected: &[u8]) -> bool {
    let mut difference = u8::from(given.len() != expected.len());
    for (index, byte) in expected.iter().enumerate() {
        let other = given.get(index).copied().unwrap_or(0);
        difference |= std::hint::black_box(byte ^ other);
    }
    difference == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same_token(b"abc", b"abc"));
        assert!(!same_token(b"abd", b"abc"));
        assert!(!same_token(b"ab", b"abc"));
        assert!(!same_token(b"abcd", b"abc"));
        assert!(!same_token(b"", b"abc"));
    }

    #[test]
    fn the_redirect_keeps_every_parameter_but_the_token() {
        let after = |uri: &str| address_without_token(&uri.parse().unwrap());
        assert_eq!(after("/runs/5e7a11ce?token=t"), "/runs/5e7a11ce");
        assert_eq!(
            after("/runs/5e7a11ce?compare=ffffffff&token=t"),
            "/runs/5e7a11ce?compare=ffffffff"
        );
        assert_eq!(after("/?a=1&token=t&&b=%20x"), "/?a=1&b=%20x");
        assert_eq!(after("/?tokens=1&token=t"), "/?tokens=1");
        // Never to another site.
        assert_eq!(after("//evil.example/x?token=t"), "/evil.example/x");
        assert_eq!(after("/%5Cevil.example?token=t"), "/%5Cevil.example");
    }

    #[test]
    fn bearer_scheme_is_read_in_any_case() {
        assert_eq!(bearer_token(b"Bearer t0k"), Some(&b"t0k"[..]));
        assert_eq!(bearer_token(b"bearer  t0k "), Some(&b"t0k"[..]));
        assert_eq!(bearer_token(b"Basic t0k"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
    }
}
