//! Which addresses are not the public Internet: loopback, private, link-local (the cloud
//! metadata service at 169.254.169.254), CGNAT, multicast, unspecified, documentation and
//! the other special-purpose ranges (IANA's registries), for IPv4 and IPv6 alike, including
//! IPv4 addresses written inside IPv6 (mapped, compatible, NAT64, 6to4). One copy for the
//! egress proxy (a sandboxed server's names) and the OAuth client (hosts named in discovery
//! documents).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The special range `ip` lies in, named, or `None` for an ordinary public address.
pub fn special_range(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => special_v4(v4),
        IpAddr::V6(v6) => special_v6(v6),
    }
}

fn special_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    Some(match (a, b, c) {
        (0, _, _) => "this network (0.0.0.0/8)",
        (10, _, _) => "private (10.0.0.0/8)",
        (100, 64..=127, _) => "shared address space, CGNAT (100.64.0.0/10)",
        (127, _, _) => "loopback (127.0.0.0/8)",
        (169, 254, _) => "link-local, cloud metadata (169.254.0.0/16)",
        (172, 16..=31, _) => "private (172.16.0.0/12)",
        (192, 0, 0) => "IETF protocol assignments (192.0.0.0/24)",
        (192, 0, 2) => "documentation (192.0.2.0/24)",
        (192, 88, 99) => "6to4 relay anycast (192.88.99.0/24)",
        (192, 168, _) => "private (192.168.0.0/16)",
        (198, 18..=19, _) => "benchmarking (198.18.0.0/15)",
        (198, 51, 100) => "documentation (198.51.100.0/24)",
        (203, 0, 113) => "documentation (203.0.113.0/24)",
        (224..=239, _, _) => "multicast (224.0.0.0/4)",
        (240..=255, _, _) => "reserved or broadcast (240.0.0.0/4)",
        _ => return None,
    })
}

fn special_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let segments = ip.segments();
    if ip.is_unspecified() {
        return Some("unspecified (::)");
    }
    if ip.is_loopback() {
        return Some("loopback (::1)");
    }
    // IPv4 inside IPv6: judged as the IPv4 address it carries.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(special_v4(v4).unwrap_or("IPv4-mapped (::ffff:0:0/96)"));
    }
    if segments[..6] == [0; 6] {
        return Some("IPv4-compatible (::/96)");
    }
    if segments[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || segments[..2] == [0x64, 0xff9b] {
        return Some("NAT64 (64:ff9b::/96)");
    }
    if segments[0] == 0x2002 {
        return Some("6to4 (2002::/16)");
    }
    if segments[0] == 0x2001 && segments[1] == 0 {
        return Some("Teredo (2001::/32)");
    }
    if segments[0] == 0x2001 && segments[1] == 0xdb8 {
        return Some("documentation (2001:db8::/32)");
    }
    if segments[0] == 0x0100 && segments[1..4] == [0, 0, 0] {
        return Some("discard-only (100::/64)");
    }
    Some(match segments[0] {
        0xfc00..=0xfdff => "unique local, private (fc00::/7)",
        0xfe80..=0xfebf => "link-local (fe80::/10)",
        0xfec0..=0xfeff => "site-local (fec0::/10)",
        0xff00..=0xffff => "multicast (ff00::/8)",
        // Only global unicast (2000::/3) is ordinary.
        0x2000..=0x3fff => return None,
        _ => "reserved (outside 2000::/3)",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(text: &str) -> Option<&'static str> {
        special_range(text.parse().unwrap())
    }

    #[test]
    fn special_ranges_are_named() {
        for (ip, says) in [
            ("127.0.0.1", "loopback"),
            ("127.8.9.10", "loopback"),
            ("169.254.169.254", "metadata"),
            ("10.1.2.3", "private"),
            ("172.20.0.1", "private"),
            ("192.168.1.1", "private"),
            ("100.100.100.200", "CGNAT"),
            ("0.0.0.0", "this network"),
            ("224.0.0.251", "multicast"),
            ("255.255.255.255", "broadcast"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("::ffff:169.254.169.254", "metadata"),
            ("::ffff:127.0.0.1", "loopback"),
            ("fd00:ec2::254", "unique local"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
            ("64:ff9b::a9fe:a9fe", "NAT64"),
            ("2002:a9fe:a9fe::1", "6to4"),
        ] {
            let named = range(ip).unwrap_or_else(|| panic!("{ip} not refused"));
            assert!(named.contains(says), "{ip}: {named}");
        }
    }

    #[test]
    fn public_addresses_pass() {
        for ip in [
            "140.82.112.5",
            "8.8.8.8",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700::1111",
        ] {
            assert_eq!(range(ip), None, "{ip}");
        }
    }
}
