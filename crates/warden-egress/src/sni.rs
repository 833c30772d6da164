//! The server name (SNI) of a TLS ClientHello, read before a tunnel forwards any byte.
//!
//! A `CONNECT` names a host, and the allowlist is checked against it; a client that then
//! starts TLS for another name (domain fronting, or a tunnel reused for a host the list
//! does not hold) is refused. Only the first TLS record is read, and it must hold the whole
//! ClientHello (every common client sends it in one record; a hello split over several is
//! refused rather than half-checked).

/// The largest TLS record (2^14 bytes of payload plus the 5-byte header, with the 256
/// bytes of expansion TLS 1.2 allowed).
pub const MAX_RECORD: usize = 5 + (1 << 14) + 256;

/// What the first bytes of a tunnel hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hello {
    /// More bytes are needed: at least this many in all.
    Incomplete(usize),
    /// A ClientHello, with its server name if it sent one (lower case, no trailing dot).
    ClientHello(Option<String>),
    /// Not a TLS ClientHello in one record; the reason.
    Invalid(&'static str),
}

/// Parses the ClientHello at the start of `bytes`.
pub fn parse_client_hello(bytes: &[u8]) -> Hello {
    if bytes.len() < 5 {
        return Hello::Incomplete(5);
    }
    if bytes[0] != 22 {
        return Hello::Invalid("the tunnel did not start with a TLS handshake record");
    }
    if bytes[1] != 3 {
        return Hello::Invalid("the record's version is not TLS");
    }
    let length = usize::from(u16::from_be_bytes([bytes[3], bytes[4]]));
    if 5 + length > MAX_RECORD {
        return Hello::Invalid("the TLS record is longer than TLS allows");
    }
    if bytes.len() < 5 + length {
        return Hello::Incomplete(5 + length);
    }
    let record = &bytes[5..5 + length];
    match client_hello(record) {
        Some(name) => Hello::ClientHello(name),
        None => Hello::Invalid("the first TLS record is not one whole, well-formed ClientHello"),
    }
}

/// A cursor over a byte slice that never reads past its end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2)
            .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }
    fn u24(&mut self) -> Option<usize> {
        self.take(3)
            .map(|b| (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]))
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// The server name of the ClientHello handshake message in `record`: `Some(None)` when it
/// has no `server_name` extension, `None` when it is malformed.
fn client_hello(record: &[u8]) -> Option<Option<String>> {
    let mut r = Reader(record);
    if r.u8()? != 1 {
        return None; // not a ClientHello
    }
    let length = r.u24()?;
    let mut hello = Reader(r.take(length)?);
    hello.take(2)?; // legacy_version
    hello.take(32)?; // random
    hello.vec8()?; // session id
    hello.vec16()?; // cipher suites
    hello.vec8()?; // compression methods
    if hello.0.is_empty() {
        return Some(None); // no extensions at all
    }
    let mut extensions = Reader(hello.vec16()?);
    let mut found = None;
    while !extensions.0.is_empty() {
        let kind = extensions.u16()?;
        let body = extensions.vec16()?;
        if kind != 0 {
            continue;
        }
        if found.is_some() {
            return None; // two server_name extensions
        }
        let mut list = Reader(Reader(body).vec16()?);
        let mut name = None;
        while !list.0.is_empty() {
            let name_type = list.u8()?;
            let value = list.vec16()?;
            if name_type == 0 {
                if name.is_some() {
                    return None; // two host names
                }
                let text = std::str::from_utf8(value).ok()?;
                if text.is_empty() || !text.is_ascii() {
                    return None;
                }
                let lower = text.to_ascii_lowercase();
                name = Some(lower.strip_suffix('.').unwrap_or(&lower).to_owned());
            }
        }
        found = Some(name?);
    }
    Some(found)
}

/// A ClientHello record naming `server_name` (or none), for tests and benchmarks.
pub fn client_hello_record(server_name: Option<&str>) -> Vec<u8> {
    let mut extensions = Vec::new();
    if let Some(name) = server_name {
        let name = name.as_bytes();
        let mut list = vec![0u8];
        list.extend_from_slice(&(name.len() as u16).to_be_bytes());
        list.extend_from_slice(name);
        let mut body = (list.len() as u16).to_be_bytes().to_vec();
        body.extend_from_slice(&list);
        extensions.extend_from_slice(&0u16.to_be_bytes());
        extensions.extend_from_slice(&(body.len() as u16).to_be_bytes());
        extensions.extend_from_slice(&body);
    }
    // Another extension (supported_versions: TLS 1.3), so the name is not alone.
    extensions.extend_from_slice(&[0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04]);
    let mut hello = vec![0x03, 0x03];
    hello.extend_from_slice(&[7u8; 32]);
    hello.push(0); // session id
    hello.extend_from_slice(&[0x00, 0x02, 0x13, 0x01]); // one cipher suite
    hello.extend_from_slice(&[0x01, 0x00]); // null compression
    hello.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    hello.extend_from_slice(&extensions);
    let mut handshake = vec![1u8];
    handshake.extend_from_slice(&(hello.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&hello);
    let mut record = vec![22u8, 3, 1];
    record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
    record.extend_from_slice(&handshake);
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_name_is_read() {
        let record = client_hello_record(Some("API.Example.test."));
        assert_eq!(
            parse_client_hello(&record),
            Hello::ClientHello(Some("api.example.test".into()))
        );
        assert_eq!(
            parse_client_hello(&client_hello_record(None)),
            Hello::ClientHello(None)
        );
    }

    #[test]
    fn partial_and_broken_hellos_are_told_apart() {
        let record = client_hello_record(Some("a.test"));
        assert_eq!(parse_client_hello(&record[..3]), Hello::Incomplete(5));
        assert_eq!(
            parse_client_hello(&record[..10]),
            Hello::Incomplete(record.len())
        );
        assert!(matches!(
            parse_client_hello(b"GET / HTTP/1.1\r\n\r\n"),
            Hello::Invalid(_)
        ));
        // Every truncation of the body inside a well-sized record is malformed, never a panic.
        for cut in 6..record.len() {
            let mut broken = record[..cut].to_vec();
            let len = (cut - 5) as u16;
            broken[3..5].copy_from_slice(&len.to_be_bytes());
            let _ = parse_client_hello(&broken);
        }
    }
}
