//! Syscalls of one straced run, the doorbells apart.

use std::collections::BTreeMap;

use crate::strace::Call;

/// Syscalls of one straced run: all, the rxe doorbells (`write()` on the
/// uverbs fd), and the rest by kind.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Syscalls {
    pub total: usize,
    pub doorbells: usize,
    pub by_name: BTreeMap<String, usize>,
}

impl Syscalls {
    pub fn of(calls: &[Call]) -> Syscalls {
        let mut s = Syscalls { total: calls.len(), ..Default::default() };
        for c in calls {
            let dev = c.fd_path().is_some_and(|p| p.starts_with("/dev/infiniband/"));
            if c.name == "write" && dev {
                s.doorbells += 1;
            } else {
                *s.by_name.entry(c.name.clone()).or_default() += 1;
            }
        }
        s
    }

    pub fn others(&self) -> usize {
        self.total - self.doorbells
    }
}

#[cfg(test)]
mod tests {
    use super::super::lines;
    use super::*;
    use crate::strace;

    #[test]
    fn counts_doorbells_apart() {
        let calls = strace::parse(&lines(
            "1 write(4</dev/infiniband/uverbs0>, \"\"..., 32) = 32\n1 write(1</dev/pts/0>, \"x\", 1) = 1\n1 ioctl(4</dev/infiniband/uverbs0>, RDMA_VERBS_IOCTL, 0x1) = 0\n",
        ));
        let s = Syscalls::of(&calls);
        assert_eq!((s.total, s.doorbells, s.others()), (3, 1, 2));
        assert_eq!(s.by_name.get("ioctl"), Some(&1));
    }
}
