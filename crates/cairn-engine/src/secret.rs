//! Comparing a presented secret (a bearer token, a feed's token line) with the configured one.

/// True when `presented` equals `token`, compared in time that depends only on their lengths,
/// so the comparison does not reveal how many leading bytes matched.
pub fn same_secret(presented: &str, token: &str) -> bool {
    presented.len() == token.len()
        && presented
            .bytes()
            .zip(token.bytes())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}
