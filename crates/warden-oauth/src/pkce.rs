//! PKCE (RFC 7636) with `S256` only, and the random `state`: both from the operating
//! system's random source, base64url without padding.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::error::OAuthError;

/// One authorization's PKCE pair.
pub struct Pkce {
    /// The secret sent to the token endpoint (43 characters).
    pub verifier: String,
    /// `BASE64URL(SHA256(verifier))`, sent to the authorization endpoint.
    pub challenge: String,
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pkce(..)")
    }
}

impl Pkce {
    /// A fresh pair.
    pub fn new() -> Result<Pkce, OAuthError> {
        let verifier = random_text(32)?;
        let challenge = s256(&verifier);
        Ok(Pkce {
            verifier,
            challenge,
        })
    }
}

/// The S256 challenge of `verifier`.
pub fn s256(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// `bytes` random bytes as base64url text (a `state`, a verifier).
pub fn random_text(bytes: usize) -> Result<String, OAuthError> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer)
        .map_err(|error| OAuthError::Store(format!("no randomness from the OS: {error}")))?;
    Ok(URL_SAFE_NO_PAD.encode(buffer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_the_rfc_7636_example() {
        // RFC 7636, appendix B.
        assert_eq!(
            s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn verifiers_are_fresh_and_long_enough() {
        let a = Pkce::new().unwrap();
        let b = Pkce::new().unwrap();
        assert_ne!(a.verifier, b.verifier);
        assert_eq!(a.verifier.len(), 43);
        assert!(
            a.verifier
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
        assert_eq!(a.challenge, s256(&a.verifier));
    }
}
