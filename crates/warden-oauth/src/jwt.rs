//! JWT access tokens as `warden serve` checks them: the compact JWS form (RFC 7515) and
//! the signature check with one key of the issuer's JSON Web Key Set (RFC 7517).
//!
//! Only asymmetric algorithms are accepted: `RS256`, `ES256` and `EdDSA` (Ed25519), checked
//! with `ring`. `none` and the HMAC family (`HS256`, ...) are refused while the header is
//! read, before any key is looked at: with HMAC the issuer's *public* key would serve as a
//! shared secret, and anyone could sign (the algorithm-confusion attack). A header naming
//! critical extensions (`crit`) is refused too, since none is understood. A key is used
//! only for the algorithm it can serve (an RSA key for `RS256`, a P-256 key for `ES256`,
//! an Ed25519 key for `EdDSA`), and only when its own `alg`, if it names one, agrees.
//!
//! What the claims mean (issuer, audience, time, scopes) is judged by [`crate::resource`].

use base64::Engine as _;
use ring::signature::{self, UnparsedPublicKey};
use serde_json::{Map, Value};

use crate::error::excerpt;

/// The longest token read (a header line of 8 KiB is already generous).
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// The most keys kept from one key set.
pub const MAX_KEYS: usize = 64;

/// A signature algorithm Warden accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alg {
    /// RSASSA-PKCS1-v1_5 with SHA-256 (keys of 2048 to 8192 bits).
    Rs256,
    /// ECDSA on P-256 with SHA-256 (the fixed-length `r || s` signature of JWS).
    Es256,
    /// Ed25519.
    EdDsa,
}

impl Alg {
    /// The JOSE name.
    pub fn as_str(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Es256 => "ES256",
            Alg::EdDsa => "EdDSA",
        }
    }

    fn parse(name: &str) -> Result<Alg, TokenError> {
        match name {
            "RS256" => Ok(Alg::Rs256),
            "ES256" => Ok(Alg::Es256),
            "EdDSA" | "Ed25519" => Ok(Alg::EdDsa),
            other if other.eq_ignore_ascii_case("none") => Err(TokenError::new(
                "it is unsigned (alg `none`); Warden accepts only signed tokens",
            )),
            other if other.starts_with("HS") => Err(TokenError::new(format!(
                "it is signed with a shared secret (alg `{}`); Warden accepts only the \
                 issuer's public-key signatures (RS256, ES256, EdDSA)",
                excerpt(other.as_bytes())
            ))),
            other => Err(TokenError::new(format!(
                "its algorithm `{}` is not accepted (RS256, ES256, EdDSA)",
                excerpt(other.as_bytes())
            ))),
        }
    }
}

/// Why a token is not a valid signed JWT. Never carries the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct TokenError {
    /// What is wrong, in a phrase.
    pub reason: String,
}

impl TokenError {
    fn new(reason: impl Into<String>) -> TokenError {
        TokenError {
            reason: reason.into(),
        }
    }
}

/// A decoded JWS whose signature is not checked yet.
#[derive(Debug, Clone)]
pub struct Jwt {
    /// The header's algorithm.
    pub alg: Alg,
    /// The header's key id, if any.
    pub kid: Option<String>,
    /// The header's `typ`, if any.
    pub typ: Option<String>,
    /// The claims (a JSON object).
    pub claims: Map<String, Value>,
    signing_input: String,
    signature: Vec<u8>,
}

/// True when `token` has the shape of a compact JWS (three base64url parts): such a token
/// is checked as a JWT; anything else is opaque (introspected, where configured).
pub fn looks_like_jwt(token: &str) -> bool {
    let parts: Vec<&str> = token.split('.').collect();
    parts.len() == 3
        && parts[..2].iter().all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

fn b64(part: &str, what: &str) -> Result<Vec<u8>, TokenError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| TokenError::new(format!("its {what} is not base64url")))
}

fn object(bytes: &[u8], what: &str) -> Result<Map<String, Value>, TokenError> {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        _ => Err(TokenError::new(format!("its {what} is not a JSON object"))),
    }
}

/// Decodes a compact JWS: the header (algorithm checked), the claims, the signature.
pub fn decode(token: &str) -> Result<Jwt, TokenError> {
    if token.len() > MAX_TOKEN_BYTES {
        return Err(TokenError::new(format!(
            "it is longer than {MAX_TOKEN_BYTES} bytes"
        )));
    }
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenError::new("it is not a signed JWT (three parts)"));
    };
    let header = object(&b64(header, "header")?, "header")?;
    let alg = header
        .get("alg")
        .and_then(Value::as_str)
        .ok_or_else(|| TokenError::new("its header names no `alg`"))?;
    let alg = Alg::parse(alg)?;
    if header.contains_key("crit") {
        return Err(TokenError::new(
            "its header names critical extensions (`crit`) Warden does not understand",
        ));
    }
    let claims = object(&b64(payload, "payload")?, "payload")?;
    let signature = b64(signature, "signature")?;
    if signature.is_empty() {
        return Err(TokenError::new("its signature is empty"));
    }
    let signing_input_len = token.len() - signature_part_len(token);
    Ok(Jwt {
        alg,
        kid: header.get("kid").and_then(Value::as_str).map(str::to_owned),
        typ: header.get("typ").and_then(Value::as_str).map(str::to_owned),
        claims,
        signing_input: token[..signing_input_len].to_owned(),
        signature,
    })
}

/// The length of the signature part with its dot.
fn signature_part_len(token: &str) -> usize {
    token.rfind('.').map_or(0, |dot| token.len() - dot)
}

/// One public key of an issuer's key set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    /// Its key id, if any.
    pub kid: Option<String>,
    /// The algorithm the set names for it, if any.
    pub alg: Option<String>,
    material: Material,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Material {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// The uncompressed point `04 || x || y`.
    P256(Vec<u8>),
    Ed25519(Vec<u8>),
}

impl Jwk {
    /// The algorithm this key serves.
    pub fn serves(&self) -> Alg {
        match self.material {
            Material::Rsa { .. } => Alg::Rs256,
            Material::P256(_) => Alg::Es256,
            Material::Ed25519(_) => Alg::EdDsa,
        }
    }

    /// Whether this key may check a token with `kid` and `alg`: the same kind of key, the
    /// key's own `alg` (if named) agreeing, and the same `kid` when the token names one.
    pub fn fits(&self, kid: Option<&str>, alg: Alg) -> bool {
        self.serves() == alg
            && self.alg.as_deref().is_none_or(|named| {
                Alg::parse(named).is_ok_and(|named| named == alg) || named == alg.as_str()
            })
            && kid.is_none_or(|kid| self.kid.as_deref() == Some(kid))
    }

    /// Checks the token's signature with this key.
    pub fn verify(&self, jwt: &Jwt) -> bool {
        if self.serves() != jwt.alg {
            return false;
        }
        let message = jwt.signing_input.as_bytes();
        match &self.material {
            Material::Rsa { n, e } => signature::RsaPublicKeyComponents { n, e }
                .verify(
                    &signature::RSA_PKCS1_2048_8192_SHA256,
                    message,
                    &jwt.signature,
                )
                .is_ok(),
            Material::P256(point) => {
                UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                    .verify(message, &jwt.signature)
                    .is_ok()
            }
            Material::Ed25519(key) => UnparsedPublicKey::new(&signature::ED25519, key)
                .verify(message, &jwt.signature)
                .is_ok(),
        }
    }
}

/// The usable signing keys of a JWKS document (`{"keys": [...]}`): RSA, EC P-256 and OKP
/// Ed25519 keys not marked for another use than `sig`; others are skipped. At most
/// [`MAX_KEYS`].
pub fn parse_jwks(document: &Value) -> Vec<Jwk> {
    let Some(keys) = document.get("keys").and_then(Value::as_array) else {
        return Vec::new();
    };
    keys.iter().filter_map(parse_jwk).take(MAX_KEYS).collect()
}

fn parse_jwk(key: &Value) -> Option<Jwk> {
    let text = |name: &str| key.get(name).and_then(Value::as_str);
    let bytes = |name: &str| {
        text(name).and_then(|value| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(value)
                .ok()
        })
    };
    if text("use").is_some_and(|usage| usage != "sig") {
        return None;
    }
    if let Some(ops) = key.get("key_ops").and_then(Value::as_array)
        && !ops.iter().any(|op| op.as_str() == Some("verify"))
    {
        return None;
    }
    let material = match (text("kty")?, text("crv")) {
        ("RSA", _) => Material::Rsa {
            n: strip_zeros(bytes("n")?),
            e: strip_zeros(bytes("e")?),
        },
        ("EC", Some("P-256")) => {
            let (x, y) = (bytes("x")?, bytes("y")?);
            if x.len() != 32 || y.len() != 32 {
                return None;
            }
            let mut point = Vec::with_capacity(65);
            point.push(4);
            point.extend_from_slice(&x);
            point.extend_from_slice(&y);
            Material::P256(point)
        }
        ("OKP", Some("Ed25519")) => {
            let x = bytes("x")?;
            if x.len() != 32 {
                return None;
            }
            Material::Ed25519(x)
        }
        _ => return None,
    };
    Some(Jwk {
        kid: text("kid").map(str::to_owned),
        alg: text("alg").map(str::to_owned),
        material,
    })
}

/// A big-endian integer without leading zero bytes (ring refuses them).
fn strip_zeros(mut bytes: Vec<u8>) -> Vec<u8> {
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    bytes.drain(..zeros);
    bytes
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, RsaKeyPair};
    use serde_json::json;

    pub(crate) const RSA_TEST_KEY: &[u8] = include_bytes!("../tests/data/test-rsa-key.pk8");

    pub(crate) fn enc(bytes: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
    }

    /// A signer for tests: a key and its JWK.
    pub(crate) enum Signer {
        Rsa(RsaKeyPair),
        Ec(EcdsaKeyPair),
        Ed(Ed25519KeyPair),
    }

    impl Signer {
        pub(crate) fn rsa() -> Signer {
            Signer::Rsa(RsaKeyPair::from_pkcs8(RSA_TEST_KEY).unwrap())
        }

        pub(crate) fn ec() -> Signer {
            let rng = SystemRandom::new();
            let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
            let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
            Signer::Ec(EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap())
        }

        pub(crate) fn ed() -> Signer {
            let pkcs8 = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new()).unwrap();
            Signer::Ed(Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap())
        }

        pub(crate) fn alg(&self) -> &'static str {
            match self {
                Signer::Rsa(_) => "RS256",
                Signer::Ec(_) => "ES256",
                Signer::Ed(_) => "EdDSA",
            }
        }

        pub(crate) fn jwk(&self, kid: &str) -> Value {
            match self {
                Signer::Rsa(key) => {
                    let parts: signature::RsaPublicKeyComponents<Vec<u8>> = key.public().into();
                    json!({"kty": "RSA", "kid": kid, "n": enc(&parts.n), "e": enc(&parts.e)})
                }
                Signer::Ec(key) => {
                    let point = key.public_key().as_ref();
                    json!({"kty": "EC", "crv": "P-256", "kid": kid,
                           "x": enc(&point[1..33]), "y": enc(&point[33..])})
                }
                Signer::Ed(key) => {
                    json!({"kty": "OKP", "crv": "Ed25519", "kid": kid,
                           "x": enc(key.public_key().as_ref())})
                }
            }
        }

        /// A token of `claims` with the header `typ: at+jwt` and `kid` (none when empty).
        pub(crate) fn sign(&self, kid: &str, claims: &Value) -> String {
            let mut header = json!({"alg": self.alg(), "typ": "at+jwt", "kid": kid});
            if kid.is_empty() {
                header.as_object_mut().unwrap().remove("kid");
            }
            self.sign_with_header(&header, claims)
        }

        pub(crate) fn sign_with_header(&self, header: &Value, claims: &Value) -> String {
            let input = format!(
                "{}.{}",
                enc(header.to_string().as_bytes()),
                enc(claims.to_string().as_bytes())
            );
            let rng = SystemRandom::new();
            let signature = match self {
                Signer::Rsa(key) => {
                    let mut out = vec![0; key.public().modulus_len()];
                    key.sign(
                        &signature::RSA_PKCS1_SHA256,
                        &rng,
                        input.as_bytes(),
                        &mut out,
                    )
                    .unwrap();
                    out
                }
                Signer::Ec(key) => key.sign(&rng, input.as_bytes()).unwrap().as_ref().to_vec(),
                Signer::Ed(key) => key.sign(input.as_bytes()).as_ref().to_vec(),
            };
            format!("{input}.{}", enc(&signature))
        }
    }

    #[test]
    fn each_algorithm_verifies_with_its_key_and_not_with_another() {
        let claims = json!({"sub": "alice"});
        let signers = [Signer::rsa(), Signer::ec(), Signer::ed()];
        let keys: Vec<Jwk> = parse_jwks(&json!({"keys": signers
            .iter()
            .enumerate()
            .map(|(i, s)| s.jwk(&format!("k{i}")))
            .collect::<Vec<_>>()}));
        assert_eq!(keys.len(), 3);
        for (i, signer) in signers.iter().enumerate() {
            let token = signer.sign(&format!("k{i}"), &claims);
            let jwt = decode(&token).unwrap();
            assert_eq!(jwt.claims.get("sub"), Some(&json!("alice")));
            for (j, key) in keys.iter().enumerate() {
                assert_eq!(key.verify(&jwt), i == j, "token {i} with key {j}");
            }
            // A changed claim breaks the signature.
            let mut parts: Vec<&str> = token.split('.').collect();
            let forged = enc(json!({"sub": "mallory"}).to_string().as_bytes());
            parts[1] = &forged;
            let jwt = decode(&parts.join(".")).unwrap();
            assert!(!keys[i].verify(&jwt));
        }
        // Another key of the same kind does not verify.
        let other = Signer::ec();
        let other_key = parse_jwks(&json!({"keys": [other.jwk("k1")]}));
        let jwt = decode(&signers[1].sign("k1", &claims)).unwrap();
        assert!(!other_key[0].verify(&jwt));
    }

    #[test]
    fn unsigned_and_hmac_tokens_are_refused_while_reading_the_header() {
        let body = enc(br#"{"sub":"alice"}"#);
        for (header, word) in [
            (json!({"alg": "none"}), "unsigned"),
            (json!({"alg": "NONE"}), "unsigned"),
            (json!({"alg": "HS256"}), "shared secret"),
            (json!({"alg": "HS512"}), "shared secret"),
            (json!({"alg": "PS256"}), "not accepted"),
            (json!({"typ": "JWT"}), "no `alg`"),
            (json!({"alg": "RS256", "crit": ["exp"]}), "critical"),
        ] {
            let token = format!("{}.{body}.c2ln", enc(header.to_string().as_bytes()));
            let error = decode(&token).unwrap_err();
            assert!(error.reason.contains(word), "{header}: {error}");
        }
        for bad in [
            "",
            "a.b",
            "a.b.c.d",
            "!!.e30.e30",
            "e30.e30.",
            "e30.W10.c2ln",
        ] {
            assert!(decode(bad).is_err(), "{bad:?}");
        }
        assert!(decode(&"a".repeat(MAX_TOKEN_BYTES + 1)).is_err());
    }

    #[test]
    fn keys_are_matched_by_kind_alg_and_kid() {
        let signer = Signer::ec();
        let mut jwk = signer.jwk("one");
        jwk["alg"] = json!("ES256");
        let keys = parse_jwks(&json!({"keys": [
            jwk,
            {"kty": "EC", "crv": "P-384", "x": "AA", "y": "AA"},
            {"kty": "oct", "k": "c2VjcmV0"},
            {"kty": "RSA", "use": "enc", "n": "AQAB", "e": "AQAB"},
        ]}));
        assert_eq!(keys.len(), 1);
        assert!(keys[0].fits(Some("one"), Alg::Es256));
        assert!(keys[0].fits(None, Alg::Es256));
        assert!(!keys[0].fits(Some("two"), Alg::Es256));
        assert!(!keys[0].fits(Some("one"), Alg::Rs256));
        assert!(parse_jwks(&json!({"nokeys": []})).is_empty());
        assert!(looks_like_jwt("eyJ.eyJ.sig"));
        assert!(!looks_like_jwt("opaque-token-123"));
    }
}
