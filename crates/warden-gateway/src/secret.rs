//! Unguessable values and authenticated state: random bytes from the kernel, session ids,
//! a constant-time comparison for bearer tokens, and the signed `requestState` a
//! 2026-07-28 client echoes back after answering an approval question.
//!
//! The `requestState` binds the approval to the exact call (the tool as the client names
//! it and a hash of its arguments), to the client it was issued to, and to a deadline; it
//! is signed with HMAC-SHA256 under a key drawn at start, and each one is accepted once. A
//! tampered, expired, replayed or foreign state is refused. The same envelope carries an
//! upstream server's own `requestState` back to it when the server asked the client for
//! input ([`Issued::Continuation`]): the client never sees or changes the server's state,
//! and a continuation cannot be moved to another call or client, or replayed.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Fills `buffer` from the kernel's random source.
pub fn random_bytes(buffer: &mut [u8]) -> std::io::Result<()> {
    std::fs::File::open("/dev/urandom")?.read_exact(buffer)
}

/// A new session id: 256 random bits, hex (visible ASCII, as the transport requires).
pub fn session_id() -> std::io::Result<String> {
    let mut bytes = [0u8; 32];
    random_bytes(&mut bytes)?;
    Ok(hex(&bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares two byte strings in time that depends only on their lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut diff = 0u8;
    for (x, y) in a.iter().zip(b) {
        diff |= x ^ y;
    }
    // Read through a volatile-free black box so the loop is not shortened.
    std::hint::black_box(diff) == 0
}

fn hmac(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..32].copy_from_slice(key);
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(message);
    let inner = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner);
    outer.finalize().into()
}

/// The SHA-256 of `value` with object keys in sorted order, hex: the same arguments give
/// the same hash however a client orders them.
pub fn arguments_hash(value: &Value) -> String {
    fn canonical(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    if let Some(inner) = map.get(key) {
                        canonical(inner, out);
                    }
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(value, &mut text);
    hex(&Sha256::digest(text.as_bytes()))
}

/// What a `requestState` Warden issued stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Issued {
    /// Warden's own approval question about the call.
    Approval,
    /// An upstream server asked the client for input about a call Warden had let run; the
    /// retry continues that call.
    Continuation {
        /// The server's own `requestState`, echoed to it unchanged.
        upstream_state: Option<String>,
    },
    /// A 2025-11-25 server asked the client during a call, which waits, parked under `id`
    /// ([`crate::parked`]); the retry carries the answer to it.
    Parked {
        /// The parked call's id.
        id: String,
    },
}

/// Longest upstream `requestState` carried in a continuation.
pub const MAX_UPSTREAM_STATE_BYTES: usize = 64 * 1024;

/// Most approval states outstanding at once; past it new questions are refused.
pub const MAX_OUTSTANDING_STATES: usize = 4096;

/// How long an approval question may stay unanswered.
pub const STATE_LIFETIME: Duration = Duration::from_secs(600);

/// Why a `requestState` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// Not one of ours, or changed.
    #[error("the requestState is not one Warden issued, or it was changed")]
    Tampered,
    /// Issued for another call or another client.
    #[error("the requestState was issued for another call or another client")]
    Foreign,
    /// Too old.
    #[error("the requestState has expired; call the tool again")]
    Expired,
    /// Already used once.
    #[error("the requestState was already used; call the tool again")]
    Replayed,
    /// An upstream server's state too long to carry.
    #[error("the server's requestState is longer than {MAX_UPSTREAM_STATE_BYTES} bytes")]
    TooLong,
    /// Too many questions outstanding.
    #[error(
        "too many approval questions are outstanding ({MAX_OUTSTANDING_STATES}); answer or drop some first"
    )]
    Full,
    /// No random source.
    #[error("no random source: {0}")]
    Random(String),
}

/// Issues and checks signed approval states.
pub struct StateSigner {
    key: [u8; 32],
    /// Nonce to expiry (ms), of states issued and not yet used.
    outstanding: Mutex<HashMap<String, u64>>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl StateSigner {
    /// A signer with a fresh random key.
    pub fn new() -> std::io::Result<StateSigner> {
        let mut key = [0u8; 32];
        random_bytes(&mut key)?;
        Ok(StateSigner {
            key,
            outstanding: Mutex::new(HashMap::new()),
        })
    }

    /// A state for approving `tool` with `arguments`, for `client`.
    pub fn issue(&self, tool: &str, arguments: &Value, client: &str) -> Result<String, StateError> {
        self.issue_as(tool, arguments, client, &Issued::Approval)
    }

    /// A state standing for `what`, about `tool` with `arguments`, for `client`.
    pub fn issue_as(
        &self,
        tool: &str,
        arguments: &Value,
        client: &str,
        what: &Issued,
    ) -> Result<String, StateError> {
        if let Issued::Continuation {
            upstream_state: Some(state),
            ..
        } = what
            && state.len() > MAX_UPSTREAM_STATE_BYTES
        {
            return Err(StateError::TooLong);
        }
        let mut nonce = [0u8; 16];
        random_bytes(&mut nonce).map_err(|e| StateError::Random(e.to_string()))?;
        let nonce = hex(&nonce);
        let now = now_ms();
        let expiry = now.saturating_add(STATE_LIFETIME.as_millis() as u64);
        {
            let mut outstanding = self.outstanding.lock().map_err(|_| StateError::Full)?;
            if outstanding.len() >= MAX_OUTSTANDING_STATES {
                outstanding.retain(|_, until| *until > now);
            }
            if outstanding.len() >= MAX_OUTSTANDING_STATES {
                return Err(StateError::Full);
            }
            outstanding.insert(nonce.clone(), expiry);
        }
        let mut payload = json!({
            "t": tool, "a": arguments_hash(arguments), "c": client, "x": expiry, "n": nonce,
        });
        match what {
            Issued::Approval => {}
            Issued::Continuation { upstream_state } => {
                payload["k"] = json!("continue");
                payload["u"] = json!(upstream_state);
            }
            Issued::Parked { id } => {
                payload["k"] = json!("parked");
                payload["i"] = json!(id);
            }
        }
        let payload = payload.to_string();
        let mac = hmac(&self.key, payload.as_bytes());
        Ok(format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload.as_bytes()),
            URL_SAFE_NO_PAD.encode(mac)
        ))
    }

    /// Checks `state` for `tool` with `arguments` for `client`, uses it up, and says what it
    /// stands for.
    pub fn redeem(
        &self,
        state: &str,
        tool: &str,
        arguments: &Value,
        client: &str,
    ) -> Result<Issued, StateError> {
        let (payload, mac) = state.split_once('.').ok_or(StateError::Tampered)?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| StateError::Tampered)?;
        let mac = URL_SAFE_NO_PAD
            .decode(mac)
            .map_err(|_| StateError::Tampered)?;
        if !constant_time_eq(&hmac(&self.key, &payload), &mac) {
            return Err(StateError::Tampered);
        }
        let payload: Value = serde_json::from_slice(&payload).map_err(|_| StateError::Tampered)?;
        if payload["t"].as_str() != Some(tool)
            || payload["c"].as_str() != Some(client)
            || payload["a"].as_str() != Some(arguments_hash(arguments).as_str())
        {
            return Err(StateError::Foreign);
        }
        let expiry = payload["x"].as_u64().ok_or(StateError::Tampered)?;
        let nonce = payload["n"].as_str().ok_or(StateError::Tampered)?;
        let mut outstanding = self.outstanding.lock().map_err(|_| StateError::Replayed)?;
        if outstanding.remove(nonce).is_none() {
            return Err(StateError::Replayed);
        }
        if expiry <= now_ms() {
            return Err(StateError::Expired);
        }
        Ok(match payload["k"].as_str() {
            None => Issued::Approval,
            Some("continue") => Issued::Continuation {
                upstream_state: payload["u"].as_str().map(str::to_owned),
            },
            Some("parked") => Issued::Parked {
                id: payload["i"]
                    .as_str()
                    .ok_or(StateError::Tampered)?
                    .to_owned(),
            },
            Some(_) => return Err(StateError::Tampered),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_is_accepted_once_for_its_own_call_and_client() {
        let signer = StateSigner::new().unwrap();
        let args = json!({"b": 1, "a": [true, null]});
        let state = signer.issue("s__t", &args, "c1").unwrap();
        // Same arguments in another key order: the same call.
        let reordered = json!({"a": [true, null], "b": 1});
        assert_eq!(
            signer.redeem(&state, "s__t", &reordered, "c1"),
            Ok(Issued::Approval)
        );
        assert_eq!(
            signer.redeem(&state, "s__t", &args, "c1"),
            Err(StateError::Replayed)
        );
    }

    #[test]
    fn tampered_foreign_and_garbage_states_are_refused() {
        let signer = StateSigner::new().unwrap();
        let args = json!({"path": "/etc/passwd"});
        let state = signer.issue("s__t", &args, "c1").unwrap();
        // Another call, another client.
        assert_eq!(
            signer.redeem(&state, "s__t", &json!({"path": "/tmp/x"}), "c1"),
            Err(StateError::Foreign)
        );
        assert_eq!(
            signer.redeem(&state, "s__t", &args, "c2"),
            Err(StateError::Foreign)
        );
        // One character of the payload changed.
        let (payload, mac) = state.split_once('.').unwrap();
        let mut bytes = URL_SAFE_NO_PAD.decode(payload).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 1;
        let forged = format!("{}.{mac}", URL_SAFE_NO_PAD.encode(&bytes));
        assert_eq!(
            signer.redeem(&forged, "s__t", &args, "c1"),
            Err(StateError::Tampered)
        );
        // Signed by another key.
        let other = StateSigner::new().unwrap();
        let theirs = other.issue("s__t", &args, "c1").unwrap();
        assert_eq!(
            signer.redeem(&theirs, "s__t", &args, "c1"),
            Err(StateError::Tampered)
        );
        assert_eq!(
            signer.redeem("garbage", "s__t", &args, "c1"),
            Err(StateError::Tampered)
        );
        // The honest state still works after all that.
        assert_eq!(
            signer.redeem(&state, "s__t", &args, "c1"),
            Ok(Issued::Approval)
        );
    }

    /// A continuation carries the server's state back unchanged, once; the client cannot
    /// change it, nor add to it.
    #[test]
    fn a_continuation_carries_the_servers_state_once_and_unchanged() {
        let signer = StateSigner::new().unwrap();
        let args = json!({});
        let what = Issued::Continuation {
            upstream_state: Some("server-opaque-7".into()),
        };
        let state = signer.issue_as("t", &args, "c1", &what).unwrap();
        assert!(
            !state.contains("server-opaque-7"),
            "encoded, not shown: {state}"
        );
        let tampered = format!("{state}-TAMPERED");
        assert_eq!(
            signer.redeem(&tampered, "t", &args, "c1"),
            Err(StateError::Tampered)
        );
        assert_eq!(signer.redeem(&state, "t", &args, "c1"), Ok(what));
        assert_eq!(
            signer.redeem(&state, "t", &args, "c1"),
            Err(StateError::Replayed)
        );
        let long = Issued::Continuation {
            upstream_state: Some("x".repeat(MAX_UPSTREAM_STATE_BYTES + 1)),
        };
        assert_eq!(
            signer.issue_as("t", &args, "c1", &long),
            Err(StateError::TooLong)
        );
    }

    #[test]
    fn comparison_and_ids() {
        assert!(constant_time_eq(b"token", b"token"));
        assert!(!constant_time_eq(b"token", b"tokem"));
        assert!(!constant_time_eq(b"token", b"token2"));
        let (a, b) = (session_id().unwrap(), session_id().unwrap());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
