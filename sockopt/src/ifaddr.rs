//! The node's interface addresses (`getifaddrs(3)`): the BGP speaker needs
//! them to pick next hops of the other address family (an IPv6 next hop for
//! IPv6 routes sent over an IPv4 session) and the link-local address of the
//! interface towards an on-link IPv6 peer (RFC 2545 §3).

use std::io;
use std::net::IpAddr;

/// One address of one interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceAddress {
    pub interface: String,
    pub address: IpAddr,
    pub prefix_len: u8,
}

impl InterfaceAddress {
    /// True when `other` is in this address's subnet.
    pub fn contains(&self, other: IpAddr) -> bool {
        match (self.address, other) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix_len.min(32)))
                    .unwrap_or(0);
                u32::from(a) & mask == u32::from(b) & mask
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix_len.min(128)))
                    .unwrap_or(0);
                u128::from(a) & mask == u128::from(b) & mask
            }
            _ => false,
        }
    }
}

fn prefix_len(mask: Option<IpAddr>) -> u8 {
    match mask {
        Some(IpAddr::V4(m)) => u32::from(m).count_ones() as u8,
        Some(IpAddr::V6(m)) => u128::from(m).count_ones() as u8,
        None => 0,
    }
}

/// Every IPv4 and IPv6 address on every interface.
pub fn interface_addresses() -> io::Result<Vec<InterfaceAddress>> {
    Ok(crate::sys::getifaddrs()?
        .into_iter()
        .map(|a| InterfaceAddress {
            interface: a.name,
            prefix_len: prefix_len(a.netmask),
            address: a.address,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_listed() {
        let list = interface_addresses().unwrap();
        let lo = list
            .iter()
            .find(|a| a.address == IpAddr::from([127, 0, 0, 1]))
            .expect("127.0.0.1 on some interface");
        assert_eq!(lo.prefix_len, 8);
        assert!(lo.contains("127.1.2.3".parse().unwrap()));
        assert!(!lo.contains("10.0.0.1".parse().unwrap()));
    }
}
