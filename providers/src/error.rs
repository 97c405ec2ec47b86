//! The one error type of rverbs: which verb failed, the errno if the kernel
//! gave one, and a sentence that says what to do about it.

use std::borrow::Cow;
use std::fmt;

pub use nix::errno::Errno;

use crate::qp_state::TransitionError;
use crate::wr::{PostError, PostErrorKind, WcError};

/// A failed verb.
///
/// `Display` renders one line: `"<verb>: <message> (<ERRNO>: <strerror>)"`,
/// e.g. `ibv_open_device(rxe0): cannot open /dev/infiniband/uverbs0 (EACCES: Permission denied)`.
///
/// [`kind`](Self::kind) tells who refused: the kernel ([`ErrorKind::Os`]),
/// or rverbs itself before the kernel was asked ([`ErrorKind::Check`],
/// [`ErrorKind::Transition`]).
///
/// One pointer wide (the details are boxed), so that a `Result<()>` of the
/// data path (a CQ arm) comes back in a register, where the unboxed 64
/// bytes went through memory and the caller compared them there. Making
/// an error allocates, as its message mostly did anyway.
#[derive(Clone, PartialEq, Eq)]
pub struct Error(Box<Details>);

#[derive(Clone, PartialEq, Eq)]
struct Details {
    verb: Cow<'static, str>,
    errno: Option<Errno>,
    kind: ErrorKind,
    message: String,
}

const _: () = assert!(size_of::<Error>() == size_of::<usize>());
const _: () = assert!(size_of::<Result<()>>() == size_of::<usize>());

impl fmt::Debug for Error {
    /// As the unboxed struct printed itself.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("verb", &self.0.verb)
            .field("errno", &self.0.errno)
            .field("kind", &self.0.kind)
            .field("message", &self.0.message)
            .finish()
    }
}

/// Who refused a verb, and with what detail.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A syscall failed: the kernel refused the command (or the fd, the
    /// mapping, the socket...). [`Error::errno`] is its answer.
    Os,
    /// rverbs refused the arguments before the kernel saw them (a limit, a
    /// range, a state, a wrong object), or found the kernel's answer
    /// malformed (`EPROTO`). [`Error::errno`] is what libibverbs or the kernel
    /// would have returned, when there is one.
    Check,
    /// A QP modify that the IBTA state table does not allow: an illegal
    /// transition, or missing or forbidden attribute bits. The kernel was
    /// not asked; the errno is `EINVAL`, as the kernel's would be.
    Transition(TransitionError),
    /// A post refused a work request (`From<PostError>`, so `?` works in a
    /// function returning [`Result`]); the errno is libibverbs' for it
    /// (`ENOMEM` for a full queue, the doorbell's, else `EINVAL`).
    Post(PostError),
    /// A completion came back with an error status (`From<WcError>`, from
    /// [`Wc::ok`](crate::wr::Wc::ok)); no errno: the status says why.
    Completion(WcError),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error with an errno from the kernel. The message defaults to a
    /// sentence explaining what that errno means for a uverbs command.
    pub fn os(verb: impl Into<Cow<'static, str>>, errno: Errno) -> Self {
        Error(Box::new(Details {
            verb: verb.into(),
            errno: Some(errno),
            kind: ErrorKind::Os,
            message: fd_limit_message(errno).unwrap_or_else(|| default_explanation(errno).to_owned()),
        }))
    }

    /// A refusal by rverbs' own checks, with the errno the kernel (or
    /// libibverbs) would have given; say why with [`with_message`](Self::with_message).
    pub fn check(verb: impl Into<Cow<'static, str>>, errno: Errno) -> Self {
        let mut e = Error::os(verb, errno);
        e.0.kind = ErrorKind::Check;
        e
    }

    /// An error found by rverbs itself, before or without the kernel, that
    /// has no errno.
    pub fn invalid(verb: impl Into<Cow<'static, str>>, message: impl Into<String>) -> Self {
        Error(Box::new(Details { verb: verb.into(), errno: None, kind: ErrorKind::Check, message: message.into() }))
    }

    /// A QP transition the state table refuses (errno `EINVAL`; the message
    /// names the states and the bits).
    pub fn transition(verb: impl Into<Cow<'static, str>>, e: TransitionError) -> Self {
        let message = e.to_string();
        Error(Box::new(Details {
            verb: verb.into(),
            errno: Some(Errno::EINVAL),
            message,
            kind: ErrorKind::Transition(e),
        }))
    }

    /// Same error with its explanation replaced.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.0.message = message.into();
        self
    }

    /// The verb that failed, in libibverbs terms where one exists (`ibv_open_device`).
    pub fn verb(&self) -> &str {
        &self.0.verb
    }

    /// The errno the kernel returned, if the failure came from it.
    pub fn errno(&self) -> Option<Errno> {
        self.0.errno
    }

    /// Who refused: the kernel, or rverbs' own checks (and which).
    pub fn kind(&self) -> &ErrorKind {
        &self.0.kind
    }

    /// True when the kernel refused (a syscall failed), false when rverbs
    /// refused before asking it.
    pub fn is_os(&self) -> bool {
        self.0.kind == ErrorKind::Os
    }

    /// The refused QP transition, when [`kind`](Self::kind) is [`ErrorKind::Transition`].
    pub fn transition_error(&self) -> Option<&TransitionError> {
        match &self.0.kind {
            ErrorKind::Transition(t) => Some(t),
            _ => None,
        }
    }

    /// The explanation.
    pub fn message(&self) -> &str {
        &self.0.message
    }

    /// True when this verb (or the whole ioctl interface) is not supported by
    /// the kernel or the device: `EOPNOTSUPP`, `EPROTONOSUPPORT`, `ENOTTY`, `ENOSYS`.
    pub fn is_unsupported(&self) -> bool {
        matches!(self.0.errno, Some(Errno::EOPNOTSUPP | Errno::EPROTONOSUPPORT | Errno::ENOTTY | Errno::ENOSYS))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.0.verb, self.0.message)?;
        if let Some(e) = self.0.errno {
            write!(f, " ({e:?}: {})", e.desc())?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

impl From<PostError> for Error {
    /// `?` on a post in a function returning [`Result`]: the refused
    /// request's index and reason in the message, libibverbs' errno.
    fn from(e: PostError) -> Self {
        let errno = match e.kind {
            PostErrorKind::QueueFull => Errno::ENOMEM,
            PostErrorKind::Doorbell(n) => Errno::from_raw(n),
            _ => Errno::EINVAL,
        };
        let kind = if matches!(e.kind, PostErrorKind::Doorbell(_)) { ErrorKind::Os } else { ErrorKind::Post(e) };
        Error(Box::new(Details {
            verb: "ibv_post_send/ibv_post_recv".into(),
            errno: Some(errno),
            kind,
            message: e.to_string(),
        }))
    }
}

impl From<WcError> for Error {
    /// `?` on [`Wc::ok`](crate::wr::Wc::ok) in a function returning [`Result`].
    fn from(e: WcError) -> Self {
        Error(Box::new(Details {
            verb: "ibv_poll_cq".into(),
            errno: None,
            kind: ErrorKind::Completion(e),
            message: e.to_string(),
        }))
    }
}

impl Error {
    /// The refused post, when [`kind`](Self::kind) is [`ErrorKind::Post`].
    pub fn post_error(&self) -> Option<&PostError> {
        match &self.0.kind {
            ErrorKind::Post(p) => Some(p),
            _ => None,
        }
    }

    /// The failed completion, when [`kind`](Self::kind) is [`ErrorKind::Completion`].
    pub fn wc_error(&self) -> Option<&WcError> {
        match &self.0.kind {
            ErrorKind::Completion(w) => Some(w),
            _ => None,
        }
    }
}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        let kind = e.0.errno.map(|n| std::io::Error::from_raw_os_error(n as i32).kind());
        std::io::Error::new(kind.unwrap_or(std::io::ErrorKind::InvalidInput), e)
    }
}

/// Why a call that makes a file descriptor (an `open`, or a command whose
/// kernel object is a file: the async fd, a completion channel) failed with
/// `EMFILE` or `ENFILE`, naming the limit; `None` for other errnos.
pub fn fd_limit_message(e: Errno) -> Option<String> {
    match e {
        Errno::EMFILE => {
            let limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
                .map_or_else(|_| "?".to_owned(), |(soft, _)| soft.to_string());
            Some(format!(
                "this process has as many files open as RLIMIT_NOFILE allows ({limit}): close some, or raise it \
                 (`ulimit -n`)"
            ))
        }
        Errno::ENFILE => Some("the system's table of open files is full (fs.file-max)".to_owned()),
        _ => None,
    }
}

/// What an errno usually means when a uverbs command returns it
/// (`../shared/reference/uverbs-abi.md` §2.3).
fn default_explanation(e: Errno) -> &'static str {
    match e {
        Errno::ENOTTY => "the kernel has no uverbs ioctl interface for this file",
        Errno::EPROTONOSUPPORT => "the kernel does not know this uverbs method or a mandatory attribute of it",
        Errno::EOPNOTSUPP => "the device or kernel does not support this operation",
        Errno::EINVAL => "the kernel rejected the arguments",
        Errno::ENOMEM => "the kernel ran out of memory or a resource limit was hit",
        Errno::EIO => "the device was removed or disassociated; close everything and reopen it",
        Errno::ENODATA => "the GID entry named is empty",
        Errno::EACCES | Errno::EPERM => "permission denied",
        Errno::ENODEV | Errno::ENXIO => "no such device",
        Errno::ENOENT => "not found",
        Errno::EBUSY => "the object is still in use by other objects; destroy those first",
        Errno::ENOSPC => "a command buffer was too small for the kernel",
        Errno::EAGAIN => "try again",
        _ => "the kernel returned an error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn post_and_completion_errors_convert() {
        use crate::wr::{Wc, WcStatus};
        let full = PostError { index: 2, kind: PostErrorKind::QueueFull };
        let e = Error::from(full);
        assert_eq!((e.errno(), e.post_error(), e.is_os()), (Some(Errno::ENOMEM), Some(&full), false));
        assert!(
            e.to_string().starts_with("ibv_post_send/ibv_post_recv: work request 2 refused: the queue is full"),
            "{e}"
        );
        let sge = Error::from(PostError { index: 0, kind: PostErrorKind::TooManySge { given: 5, max: 4 } });
        assert_eq!(sge.errno(), Some(Errno::EINVAL));
        let bell = Error::from(PostError { index: 1, kind: PostErrorKind::Doorbell(Errno::EBADF as i32) });
        assert_eq!((bell.errno(), bell.is_os()), (Some(Errno::EBADF), true));
        let wc = WcError(Wc { wr_id: 7, status: WcStatus::REM_ACCESS_ERR, qp_num: 0x11, ..Wc::default() });
        let e = Error::from(wc);
        assert_eq!((e.errno(), e.wc_error(), e.verb()), (None, Some(&wc), "ibv_poll_cq"));
        assert!(e.to_string().contains("work request 7 on QP 0x11 completed with"), "{e}");
        // `?` in a function returning Result.
        fn f() -> Result<()> {
            Err(PostError { index: 0, kind: PostErrorKind::BadState })?;
            Ok(())
        }
        assert!(matches!(f().unwrap_err().kind(), ErrorKind::Post(_)));
    }

    #[test]
    fn display_names_verb_errno_and_meaning() {
        let e = Error::os("ibv_alloc_pd", Errno::EINVAL);
        assert_eq!(e.to_string(), "ibv_alloc_pd: the kernel rejected the arguments (EINVAL: Invalid argument)");
        let e = Error::invalid("ibv_open_device", "no device named foo");
        assert_eq!(e.to_string(), "ibv_open_device: no device named foo");
        assert!(Error::os("x", Errno::EPROTONOSUPPORT).is_unsupported());
    }

    #[test]
    fn kind_tells_the_kernel_from_our_checks() {
        assert_eq!(Error::os("ibv_alloc_pd", Errno::ENOMEM).kind(), &ErrorKind::Os);
        let c = Error::check("ibv_create_cq", Errno::EINVAL).with_message("CQ depth 0 is outside 1..=16");
        assert_eq!(c.kind(), &ErrorKind::Check);
        assert_eq!(c.errno(), Some(Errno::EINVAL));
        assert!(!c.is_os());
        assert_eq!(c.to_string(), "ibv_create_cq: CQ depth 0 is outside 1..=16 (EINVAL: Invalid argument)");
        assert_eq!(Error::invalid("x", "y").kind(), &ErrorKind::Check);
    }
}
