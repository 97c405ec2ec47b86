//! The kernel's `copy_to_user`: the fake kernel runs in the calling process,
//! so a response pointer is an address of its own.

/// Copies `bytes` to the caller's address `addr`.
///
/// # Safety
/// `addr` must be valid for writes of `bytes.len()` bytes: a response
/// buffer the caller named in a command, sized by the command's out words.
pub(crate) unsafe fn copy_to_user(addr: u64, bytes: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    // SAFETY: the caller's contract; the source is our own slice, which
    // cannot overlap a buffer the caller handed in for the answer.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as usize as *mut u8, bytes.len()) }
}
