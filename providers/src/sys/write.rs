//! The legacy `write()` framing of uverbs commands (`ib_uverbs_cmd_hdr`, and
//! `ib_uverbs_ex_cmd_hdr` for extended commands), used only when the kernel
//! has no ioctl path (`uverbs-abi.md` §3.1).
//!
//! Non-EX: `hdr(8) | core request | driver request`; `in_words` counts 4-byte
//! words *including* the header; the core request of a command with a
//! response starts with a `u64 response` pointer to `core resp | driver resp`;
//! `out_words` is that response buffer's size in 4-byte words.
//!
//! EX: `hdr(8) | ex_hdr(16) | core request | driver request`; every size is
//! in 8-byte words and excludes the 24 header bytes; the response pointer is
//! in `ex_hdr`.

use rverbs_uapi::ib_user_verbs::{ib_uverbs_cmd_hdr, ib_uverbs_ex_cmd_hdr, IB_USER_VERBS_CMD_FLAG_EXTENDED};
use zerocopy::IntoBytes;

/// Pads `v` with zeros to a multiple of `n` bytes.
fn pad_to(v: &mut Vec<u8>, n: usize) {
    let rem = v.len() % n;
    if rem != 0 {
        v.resize(v.len() + n - rem, 0);
    }
}

/// Builds a non-extended write frame. When `resp_len > 0` the first 8 bytes
/// of `core_in` are the `response` field and are set to `resp_ptr`.
pub fn frame(command: u32, core_in: &[u8], drv_in: &[u8], resp_ptr: u64, resp_len: usize) -> Vec<u8> {
    let mut body = Vec::with_capacity(core_in.len() + drv_in.len() + 4);
    body.extend_from_slice(core_in);
    if resp_len > 0 && body.len() >= 8 {
        body[..8].copy_from_slice(&resp_ptr.to_ne_bytes());
    }
    body.extend_from_slice(drv_in);
    pad_to(&mut body, 4);
    let hdr = ib_uverbs_cmd_hdr { command, in_words: ((8 + body.len()) / 4) as u16, out_words: (resp_len / 4) as u16 };
    let mut buf = hdr.as_bytes().to_vec();
    buf.extend_from_slice(&body);
    buf
}

/// Builds an extended write frame. `core_out_len`/`drv_out_len` must be
/// multiples of 8 (the kernel counts them in 8-byte words).
pub fn frame_ex(
    command: u32,
    core_in: &[u8],
    drv_in: &[u8],
    resp_ptr: u64,
    core_out_len: usize,
    drv_out_len: usize,
) -> Vec<u8> {
    let mut core = core_in.to_vec();
    pad_to(&mut core, 8);
    let mut drv = drv_in.to_vec();
    pad_to(&mut drv, 8);
    let hdr = ib_uverbs_cmd_hdr {
        command: IB_USER_VERBS_CMD_FLAG_EXTENDED | command,
        in_words: (core.len() / 8) as u16,
        out_words: (core_out_len / 8) as u16,
    };
    let ex = ib_uverbs_ex_cmd_hdr {
        response: if core_out_len + drv_out_len > 0 { resp_ptr } else { 0 },
        provider_in_words: (drv.len() / 8) as u16,
        provider_out_words: (drv_out_len / 8) as u16,
        cmd_hdr_reserved: 0,
    };
    let mut buf = hdr.as_bytes().to_vec();
    buf.extend_from_slice(ex.as_bytes());
    buf.extend_from_slice(&core);
    buf.extend_from_slice(&drv);
    buf
}

/// The 32-byte `POST_SEND` doorbell frame of rxe: header `{28, in_words 8,
/// out_words 1}` then `ib_uverbs_post_send {response, qp_handle, wr_count 0,
/// sge_count 0, wqe_size 128}`. Built on the stack: this is the data path.
#[inline]
pub fn post_send_doorbell_frame(qp_handle: u32, resp_ptr: u64) -> [u8; 32] {
    let mut f = [0u8; 32];
    f[0..4].copy_from_slice(&rverbs_uapi::ib_user_verbs::IB_USER_VERBS_CMD_POST_SEND.to_ne_bytes());
    f[4..6].copy_from_slice(&8u16.to_ne_bytes());
    f[6..8].copy_from_slice(&1u16.to_ne_bytes());
    f[8..16].copy_from_slice(&resp_ptr.to_ne_bytes());
    f[16..20].copy_from_slice(&qp_handle.to_ne_bytes());
    // wr_count and sge_count stay 0.
    f[28..32].copy_from_slice(&128u32.to_ne_bytes());
    f
}

#[cfg(test)]
mod tests {
    /// rxe's doorbell, byte for byte (providers.md §A.4).
    #[test]
    fn post_send_doorbell() {
        let f = super::post_send_doorbell_frame(7, 0x1122_3344_5566_7788);
        let mut want = vec![28, 0, 0, 0, 8, 0, 1, 0];
        want.extend_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        want.extend_from_slice(&[7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 128, 0, 0, 0]);
        assert_eq!(f.to_vec(), want);
    }

    use super::*;

    /// ALLOC_PD for rxe (`uverbs-abi.md` §3.4): 16 bytes,
    /// `{command 3, in_words 4, out_words 1}{response}`.
    #[test]
    fn alloc_pd_rxe() {
        let b = frame(3, &[0xff; 8], &[], 0x1122_3344_5566_7788, 4);
        assert_eq!(b, [3, 0, 0, 0, 4, 0, 1, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11]);
    }

    /// MODIFY_QP has no response: 8 + 112 = 120 bytes, in_words 30, out_words 0,
    /// and the body is passed through untouched.
    #[test]
    fn modify_qp_no_response() {
        let core: Vec<u8> = (0..112u8).collect();
        let b = frame(26, &core, &[], 0xdead, 0);
        assert_eq!(b.len(), 120);
        assert_eq!(&b[..8], &[26, 0, 0, 0, 30, 0, 0, 0]);
        assert_eq!(&b[8..], &core[..]);
    }

    /// Driver data follows the core struct; odd sizes are padded to words.
    #[test]
    fn udata_follows_core() {
        let b = frame(18, &[0; 32], &[1, 2, 3, 4, 5, 6], 8, 8 + 4);
        assert_eq!(b.len(), 8 + 32 + 8);
        assert_eq!(&b[..8], &[18, 0, 0, 0, 12, 0, 3, 0]);
        assert_eq!(&b[8..16], &8u64.to_ne_bytes());
        assert_eq!(&b[40..48], &[1, 2, 3, 4, 5, 6, 0, 0]);
    }

    /// EX QUERY_DEVICE: 8-byte request (comp_mask, reserved), 304-byte response.
    #[test]
    fn ex_query_device() {
        let b = frame_ex(1, &[0; 8], &[], 0x1000, 304, 0);
        assert_eq!(b.len(), 8 + 16 + 8);
        // command 0x80000001, in_words 1, out_words 38
        assert_eq!(&b[..8], &[1, 0, 0, 0x80, 1, 0, 38, 0]);
        assert_eq!(&b[8..16], &0x1000u64.to_ne_bytes());
        assert_eq!(&b[16..24], &[0; 8]); // provider words, reserved
        assert_eq!(&b[24..], &[0; 8]);
    }
}
