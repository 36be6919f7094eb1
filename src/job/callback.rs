//! The callback-URL policy of jobs: an `http` URL whose host is public — checked when a job is
//! submitted ([`check_url`]) and again for every resolved address at delivery ([`is_public`]),
//! unless the server allows private addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// True for globally routable unicast addresses; false for loopback, private (RFC 1918, unique
/// local), link-local, carrier-grade NAT, unspecified, multicast, broadcast, documentation,
/// benchmarking and reserved ranges, and IPv6 forms embedding such an IPv4 address.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_broadcast()
        || ip.is_documentation()
        || a == 0
        || a >= 240
        || (a == 100 && (64..128).contains(&b))
        || (a == 198 && (b == 18 || b == 19))
        || (a == 192 && b == 0 && c == 0))
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    let seg = ip.segments();
    // NAT64 (64:ff9b::/96) embeds an IPv4 address in the last 32 bits.
    if seg[0] == 0x64 && seg[1] == 0xff9b && seg[2..6].iter().all(|&s| s == 0) {
        let [.., a, b, c, d] = ip.octets();
        return is_public_v4(Ipv4Addr::new(a, b, c, d));
    }
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (seg[0] & 0xfe00) == 0xfc00 // unique local
        || (seg[0] & 0xffc0) == 0xfe80 // link-local
        || (seg[0] & 0xffc0) == 0xfec0 // site-local (deprecated)
        || (seg[0] == 0x2001 && seg[1] == 0x0db8) // documentation
        || seg[..6].iter().all(|&s| s == 0)) // IPv4-compatible (deprecated)
}

/// Checks a callback URL when a job is submitted: an `http` URL with a host; unless
/// `allow_private`, not `localhost` nor a literal non-public address (names are checked again
/// when they are resolved at delivery). The error says what is wrong.
pub fn check_url(url: &str, allow_private: bool) -> Result<reqwest::Url, String> {
    let parsed =
        reqwest::Url::parse(url).map_err(|_| format!("not an http or https URL: '{url}'"))?;
    match parsed.scheme() {
        "http" | "https" => {}
        _ => return Err(format!("not an http or https URL: '{url}'")),
    }
    let Some(host) = parsed.host_str() else {
        return Err(format!("not an http or https URL: '{url}'"));
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let private = match host.parse::<IpAddr>() {
        Ok(ip) => !is_public(ip),
        Err(_) => {
            let d = host.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
    };
    if private && !allow_private {
        return Err(format!(
            "'{url}' points to a loopback or private address; callbacks go to public addresses \
             only unless the server runs with DEID_WEBHOOK_ALLOW_PRIVATE=true"
        ));
    }
    Ok(parsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_and_non_public_addresses() {
        for ip in [
            "8.8.8.8",
            "1.1.1.1",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "198.18.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
            "2001:db8::1",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn callback_urls_are_checked() {
        assert!(check_url("http://hooks.example.com/x", false).is_ok());
        assert!(check_url("http://8.8.8.8:8080/x", false).is_ok());
        for url in [
            "http://127.0.0.1:9/x",
            "http://localhost/x",
            "http://api.localhost/x",
            "http://[::1]/x",
            "http://169.254.169.254/latest/meta-data",
            "http://10.0.0.5/",
        ] {
            let err = check_url(url, false).unwrap_err();
            assert!(err.contains("private"), "{url}: {err}");
            assert!(check_url(url, true).is_ok(), "{url}");
        }
        // https callbacks are delivered with rustls (tests/service/flow.rs).
        assert!(check_url("https://hooks.example.com/x", false).is_ok());
        assert!(check_url("https://127.0.0.1:8443/x", false).is_err());
        assert!(
            check_url("ftp://example.com", true)
                .unwrap_err()
                .contains("not an http or https URL")
        );
        assert!(
            check_url("nonsense", true)
                .unwrap_err()
                .contains("not an http or https URL")
        );
    }
}
