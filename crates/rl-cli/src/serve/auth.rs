//! The bearer token every request carries when the operator set one (`--token-env`).

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
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
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .map(HeaderValue::as_bytes)
        .and_then(bearer_token);
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
    fn bearer_scheme_is_read_in_any_case() {
        assert_eq!(bearer_token(b"Bearer t0k"), Some(&b"t0k"[..]));
        assert_eq!(bearer_token(b"bearer  t0k "), Some(&b"t0k"[..]));
        assert_eq!(bearer_token(b"Basic t0k"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
    }
}
