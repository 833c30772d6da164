//! The test authorization server's signing keys and the tokens it mints with them.

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair as _, RsaKeyPair};
use serde_json::{Value, json};

/// A 2048-bit RSA key for tests only (ring cannot generate RSA keys).
const RSA_TEST_KEY: &[u8] = include_bytes!("test-rsa-key.pk8");

pub struct Keys {
    rsa: RsaKeyPair,
    ec: EcdsaKeyPair,
    /// A key not in the published set.
    other: EcdsaKeyPair,
    rng: SystemRandom,
}

fn enc(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn generate_ec(rng: &SystemRandom) -> Result<EcdsaKeyPair, String> {
    let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, rng).map_err(|e| e.to_string())?;
    EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), rng).map_err(|e| e.to_string())
}

impl Keys {
    pub fn new() -> Result<Keys, String> {
        let rng = SystemRandom::new();
        Ok(Keys {
            rsa: RsaKeyPair::from_pkcs8(RSA_TEST_KEY).map_err(|e| e.to_string())?,
            ec: generate_ec(&rng)?,
            other: generate_ec(&rng)?,
            rng,
        })
    }

    /// The published key set.
    pub fn jwks(&self) -> Value {
        let rsa: signature::RsaPublicKeyComponents<Vec<u8>> = self.rsa.public().into();
        let point = self.ec.public_key().as_ref();
        json!({"keys": [
            {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256",
             "n": enc(&rsa.n), "e": enc(&rsa.e)},
            {"kty": "EC", "crv": "P-256", "kid": "ec-1", "use": "sig",
             "x": enc(&point[1..33]), "y": enc(&point[33..])},
        ]})
    }

    /// A token with `claims`, signed as `how` says; `None` for an unknown `how`.
    pub fn sign(&self, how: &str, claims: &Value) -> Option<String> {
        let (alg, kid) = match how {
            "rs256" => ("RS256", "rsa-1"),
            "es256" => ("ES256", "ec-1"),
            // The attacker names the published key's id.
            "other-key" => ("ES256", "ec-1"),
            "none" => ("none", "rsa-1"),
            "hs256-pubkey" => ("HS256", "rsa-1"),
            _ => return None,
        };
        let header = json!({"alg": alg, "typ": "at+jwt", "kid": kid});
        let input = format!(
            "{}.{}",
            enc(header.to_string().as_bytes()),
            enc(claims.to_string().as_bytes())
        );
        let signature = match how {
            "rs256" => {
                let mut out = vec![0; self.rsa.public().modulus_len()];
                self.rsa
                    .sign(
                        &signature::RSA_PKCS1_SHA256,
                        &self.rng,
                        input.as_bytes(),
                        &mut out,
                    )
                    .ok()?;
                out
            }
            "es256" => self
                .ec
                .sign(&self.rng, input.as_bytes())
                .ok()?
                .as_ref()
                .to_vec(),
            "other-key" => self
                .other
                .sign(&self.rng, input.as_bytes())
                .ok()?
                .as_ref()
                .to_vec(),
            "none" => Vec::new(),
            // The algorithm-confusion attack: the public key used as an HMAC secret.
            _ => {
                let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, self.rsa.public().as_ref());
                ring::hmac::sign(&key, input.as_bytes()).as_ref().to_vec()
            }
        };
        Some(format!("{input}.{}", enc(&signature)))
    }
}
