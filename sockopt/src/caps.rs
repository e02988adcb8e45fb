//! Capabilities raised by one thread for one operation.
//!
//! holdfast runs as an unprivileged user. A feature that needs a
//! capability (unnumbered peering sends and receives Neighbor Discovery
//! messages on a raw ICMPv6 socket: `CAP_NET_RAW`) gets it from the
//! binary's file capabilities in the *permitted* set only (`setcap
//! cap_net_raw+p`, no effective bit): no thread holds it in its effective
//! set until the one that opens the socket raises it, for as long as the
//! [`Raised`] guard lives, and lowers it again. A process that was not
//! given the capability (the default DaemonSet drops every capability and
//! sets no_new_privs, under which file capabilities grant nothing) runs
//! exactly as before; only the feature fails, saying what it needs.

use std::io;
use std::marker::PhantomData;

use crate::sys::{capget, capset};

/// The capabilities holdfast may ask for (linux/capability.h numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Capability {
    /// `CAP_NET_BIND_SERVICE` (10): bind a port below 1024.
    NetBindService = 10,
    /// `CAP_NET_RAW` (13): open a raw socket.
    NetRaw = 13,
}

impl Capability {
    /// The name the kernel, `setcap` and Kubernetes use (without `CAP_`
    /// for Kubernetes).
    pub fn name(self) -> &'static str {
        match self {
            Capability::NetBindService => "CAP_NET_BIND_SERVICE",
            Capability::NetRaw => "CAP_NET_RAW",
        }
    }

    fn bit(self) -> (usize, u32) {
        let n = self as u32;
        ((n / 32) as usize, 1 << (n % 32))
    }
}

/// Whether the calling thread holds `cap` in its effective set (whether an
/// operation that needs it would be allowed now).
pub fn is_effective(cap: Capability) -> io::Result<bool> {
    let (word, bit) = cap.bit();
    Ok(capget()?[word].effective & bit != 0)
}

/// `cap` held in the calling thread's effective set until dropped; lowered
/// again then if the thread did not hold it before. Not `Send`: a thread's
/// capabilities are its own, and the guard must be dropped where it was
/// made.
#[must_use = "the capability is lowered again when the guard is dropped"]
pub struct Raised {
    cap: Capability,
    lower: bool,
    _thread: PhantomData<*const ()>,
}

/// Raises `cap` into the calling thread's effective set. Fails with
/// `PermissionDenied` when the thread does not have it in its permitted
/// set (the binary has no such file capability, or the container's
/// bounding set or no_new_privs withheld it).
pub fn raise(cap: Capability) -> io::Result<Raised> {
    let (word, bit) = cap.bit();
    let mut sets = capget()?;
    if sets[word].effective & bit != 0 {
        return Ok(Raised {
            cap,
            lower: false,
            _thread: PhantomData,
        });
    }
    if sets[word].permitted & bit == 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not in this process's permitted set", cap.name()),
        ));
    }
    sets[word].effective |= bit;
    capset(&sets)?;
    Ok(Raised {
        cap,
        lower: true,
        _thread: PhantomData,
    })
}

impl Drop for Raised {
    fn drop(&mut self) {
        if !self.lower {
            return;
        }
        let (word, bit) = self.cap.bit();
        // Lowering an effective capability cannot be refused by the
        // kernel; a failed capget leaves nothing to lower.
        if let Ok(mut sets) = capget() {
            sets[word].effective &= !bit;
            let _ = capset(&sets);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a fresh thread, so that the sets changed in it are that
    /// thread's only.
    fn on_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().expect("the thread")
    }

    #[test]
    fn raised_for_the_guard_s_life_and_on_this_thread_only() {
        // Needs a thread that has NET_RAW permitted but not effective: as
        // root (which the test suite runs as), lower it first.
        on_thread(|| {
            let (word, bit) = Capability::NetRaw.bit();
            let mut sets = capget().expect("capget");
            assert!(
                sets[word].permitted & bit != 0,
                "this test needs CAP_NET_RAW in its permitted set: run it as root"
            );
            sets[word].effective &= !bit;
            capset(&sets).expect("capset");
            assert!(!is_effective(Capability::NetRaw).unwrap());
            // A thread that exists already (a new one would inherit this
            // thread's sets as they are when it starts).
            let (ask, asked) = std::sync::mpsc::channel::<()>();
            let (tell, told) = std::sync::mpsc::channel();
            let other = std::thread::spawn(move || {
                asked.recv().unwrap();
                tell.send(is_effective(Capability::NetRaw).unwrap())
                    .unwrap();
            });
            {
                let _raised = raise(Capability::NetRaw).expect("raise");
                assert!(is_effective(Capability::NetRaw).unwrap());
                ask.send(()).unwrap();
                assert!(
                    !told.recv().unwrap(),
                    "a capability raised by one thread reached another"
                );
                other.join().unwrap();
            }
            assert!(
                !is_effective(Capability::NetRaw).unwrap(),
                "still effective after the guard was dropped"
            );
            // Held before: a guard leaves it held.
            let mut sets = capget().unwrap();
            sets[word].effective |= bit;
            capset(&sets).unwrap();
            drop(raise(Capability::NetRaw).unwrap());
            assert!(is_effective(Capability::NetRaw).unwrap());
        });
    }

    #[test]
    fn not_permitted_is_refused_with_its_name() {
        on_thread(|| {
            let (word, bit) = Capability::NetRaw.bit();
            let mut sets = capget().expect("capget");
            sets[word].effective &= !bit;
            sets[word].permitted &= !bit;
            capset(&sets).expect("capset");
            let e = raise(Capability::NetRaw).err().expect("refused");
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
            assert!(e.to_string().contains("CAP_NET_RAW"), "{e}");
        });
    }
}
