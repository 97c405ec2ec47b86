//! Reading `strace -f -y` output: one [`Call`] per syscall, with the paths
//! strace shows for file descriptors (`4</dev/infiniband/uverbs0>`).

/// One syscall.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub pid: u32,
    pub name: String,
    /// Everything between the parentheses, as strace printed it.
    pub args: String,
    /// What follows ` = ` (`0`, `32`, `-1 EAGAIN (...)`, `4</dev/...>`, `?`).
    pub ret: String,
}

impl Call {
    /// True when the call returned an error (`-1 ERRNO ...`).
    pub fn failed(&self) -> bool {
        self.ret.starts_with("-1 ")
    }

    /// The errno name of a failed call (`EAGAIN`).
    pub fn errno(&self) -> Option<&str> {
        self.ret.strip_prefix("-1 ")?.split_whitespace().next()
    }

    /// The path strace shows for the first argument's fd (`write(4</x>, ...)`).
    pub fn fd_path(&self) -> Option<&str> {
        fd_paths(&self.args)
            .into_iter()
            .next()
            .filter(|_| self.args.split(',').next().is_some_and(|a| a.trim().starts_with(|c: char| c.is_ascii_digit())))
    }

    /// True when any fd argument is `path` (mmap's fd is its 5th).
    pub fn mentions_fd(&self, pred: impl Fn(&str) -> bool) -> bool {
        fd_paths(&self.args).into_iter().any(pred)
    }

    /// The returned fd's path (`openat(...) = 4</dev/infiniband/uverbs0>`).
    pub fn ret_path(&self) -> Option<&str> {
        fd_paths(&self.ret).into_iter().next()
    }

    /// The first quoted string argument (`openat(AT_FDCWD</tmp>, "/x", ...)`).
    pub fn quoted(&self) -> Option<&str> {
        let start = self.args.find('"')? + 1;
        let len = self.args[start..].find('"')?;
        Some(&self.args[start..start + len])
    }

    /// The `n`-th comma-separated argument, trimmed (naive: fine for the
    /// scalar arguments of mmap/munmap).
    pub fn arg(&self, n: usize) -> Option<&str> {
        self.args.split(", ").nth(n).map(str::trim)
    }
}

/// Every `N<path>` in `s`, in order.
fn fd_paths(s: &str) -> Vec<&str> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'<' && i > 0 && b[i - 1].is_ascii_digit() {
            // The digits must start a token.
            let mut j = i - 1;
            while j > 0 && b[j - 1].is_ascii_digit() {
                j -= 1;
            }
            let starts_token = j == 0 || matches!(b[j - 1], b'(' | b' ' | b'[' | b'{' | b'=');
            if let Some(end) = s[i + 1..].find('>') {
                if starts_token {
                    out.push(&s[i + 1..i + 1 + end]);
                }
                i += end + 1;
                continue;
            }
        }
        i += 1;
    }
    out
}

/// Parses the lines of an `strace -f -o FILE` log. Signal and exit lines
/// are skipped; a call split by `<unfinished ...>` / `<... resumed>` is
/// put back together (at the position of its start).
pub fn parse(lines: &[String]) -> Vec<Call> {
    let mut calls: Vec<Call> = Vec::new();
    // pid -> index in `calls` of its unfinished call.
    let mut pending: Vec<(u32, usize)> = Vec::new();
    for raw in lines {
        let line = raw.trim_end();
        let (pid, rest) = match line.split_once(char::is_whitespace) {
            Some((p, r)) if p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty() => {
                (p.parse().unwrap_or(0), r.trim_start())
            }
            _ => (0, line),
        };
        if rest.starts_with("---") || rest.starts_with("+++") || rest.is_empty() {
            continue;
        }
        if let Some(r) = rest.strip_prefix("<... ") {
            // `<... NAME resumed>ARGS) = RET`
            let Some((_, tail)) = r.split_once("resumed>") else { continue };
            if let Some(pos) = pending.iter().position(|(p, _)| *p == pid) {
                let (_, idx) = pending.remove(pos);
                let (more, ret) = split_ret(tail);
                let c = &mut calls[idx];
                c.args.push_str(more);
                c.ret = ret.to_owned();
            }
            continue;
        }
        let Some(open) = rest.find('(') else { continue };
        let name = rest[..open].to_owned();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let body = &rest[open + 1..];
        if let Some(args) = body.strip_suffix(" <unfinished ...>") {
            pending.push((pid, calls.len()));
            calls.push(Call { pid, name, args: args.to_owned(), ret: String::new() });
            continue;
        }
        let (args, ret) = split_ret(body);
        calls.push(Call { pid, name, args: args.to_owned(), ret: ret.to_owned() });
    }
    calls
}

/// `ARGS) = RET` -> (ARGS, RET), at the last `) = `.
fn split_ret(s: &str) -> (&str, &str) {
    match s.rfind(") = ") {
        Some(i) => (&s[..i], s[i + 4..].trim()),
        None => (s.trim_end_matches(')'), ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(String::from).collect()
    }

    #[test]
    fn parses_calls_and_fd_paths() {
        let calls = parse(&lines(
            r#"161   openat(AT_FDCWD</tmp>, "/dev/infiniband/uverbs0", O_RDWR|O_CLOEXEC) = 4</dev/infiniband/uverbs0>
161   ioctl(4</dev/infiniband/uverbs0>, RDMA_VERBS_IOCTL, 0x7ffd74a3ed38) = 0
161   mmap(NULL, 69632, PROT_READ|PROT_WRITE, MAP_SHARED, 4</dev/infiniband/uverbs0>, 0x1000) = 0x7f1c5b58d000
161   write(4</dev/infiniband/uverbs0>, ""..., 32) = 32
161   read(6<anon_inode:[infinibandevent]>, 0x7ffd, 8) = -1 EAGAIN (Resource temporarily unavailable)
161   statx(AT_FDCWD</tmp>, "/rverbs-demo-mark/data-path-begin", AT_STATX_SYNC_AS_STAT, STATX_ALL, 0x7ffd) = -1 ENOENT (No such file or directory)
161   poll([{fd=6<anon_inode:[infinibandevent]>, events=POLLIN}], 1, 10000 <unfinished ...>
162   write(1<pipe:[5]>, "x", 1) = 1
161   <... poll resumed>) = 1 ([{fd=6, revents=POLLIN}])
161   +++ exited with 0 +++"#,
        ));
        assert_eq!(calls.len(), 8);
        assert_eq!(calls[0].quoted(), Some("/dev/infiniband/uverbs0"));
        assert_eq!(calls[0].ret_path(), Some("/dev/infiniband/uverbs0"));
        assert_eq!(calls[1].fd_path(), Some("/dev/infiniband/uverbs0"));
        assert_eq!(calls[1].args, "4</dev/infiniband/uverbs0>, RDMA_VERBS_IOCTL, 0x7ffd74a3ed38");
        assert_eq!(calls[2].fd_path(), None);
        assert!(calls[2].mentions_fd(|p| p.starts_with("/dev/infiniband/")));
        assert_eq!(calls[2].ret, "0x7f1c5b58d000");
        assert_eq!(calls[2].arg(1), Some("69632"));
        assert_eq!(calls[4].errno(), Some("EAGAIN"));
        assert_eq!(calls[4].fd_path(), Some("anon_inode:[infinibandevent]"));
        assert!(calls[5].failed());
        assert_eq!(calls[6].name, "poll");
        assert_eq!(calls[6].ret, "1 ([{fd=6, revents=POLLIN}])");
        assert_eq!(calls[7].pid, 162);
    }
}
