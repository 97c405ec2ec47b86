//! Address handles (`ibv_ah`): where a UD send goes.

use rverbs_providers::cmd::ah as cmd;
use rverbs_providers::driver::Provider;
use rverbs_providers::rxe;
use rverbs_providers::{Errno, Error, Result};
use tracing::debug;

use crate::qp::{check_av, AhAttr};
use crate::{ProtectionDomain, UdDest};

/// An address handle for UD sends. The kernel resolved the destination MAC
/// when it was created (RoCE); the provider keeps what the kernel answered
/// (rxe: the AH number its work requests carry).
///
/// ```no_run
/// use rverbs::{AhAttr, GlobalRoute};
/// let ctx = rverbs::devices()?[0].open()?;
/// let pd = ctx.alloc_pd()?;
/// let sgid_index = ctx.default_sgid_index(1)?;
/// let dgid = ctx.query_gid(1, sgid_index.into())?.unwrap().gid;   // loopback
/// let ah = pd.create_ah(&AhAttr {
///     port_num: 1,
///     grh: Some(GlobalRoute { dgid, sgid_index, hop_limit: 64, ..Default::default() }),
///     ..Default::default()
/// })?;
/// # Ok::<(), rverbs::Error>(())
/// ```
#[derive(Debug)]
pub struct AddressHandle {
    pd: ProtectionDomain,
    handle: u32,
    attr: AhAttr,
    ah_num: u32,
    live: bool,
}

impl ProtectionDomain {
    /// Creates an address handle (`IB_USER_VERBS_CMD_CREATE_AH` through
    /// `INVOKE_WRITE`, `ibv_create_ah`).
    ///
    /// # Errors
    /// A GID index that does not exist, a RoCE address without GRH, a
    /// destination the kernel cannot resolve ("cannot reach GID ...").
    #[doc(alias = "ibv_create_ah")]
    pub fn create_ah(&self, attr: &AhAttr) -> Result<AddressHandle> {
        const VERB: &str = "ibv_create_ah";
        let ctx = self.context();
        let _span = tracing::debug_span!("ibv_create_ah").entered();
        check_av(ctx, attr, attr.port_num, VERB)?;
        let kattr = attr.to_dest();
        let ah_attr = rverbs_uapi::ib_user_verbs::ib_uverbs_ah_attr {
            grh: rverbs_uapi::ib_user_verbs::ib_uverbs_global_route {
                dgid: kattr.dgid,
                flow_label: kattr.flow_label,
                sgid_index: kattr.sgid_index,
                hop_limit: kattr.hop_limit,
                traffic_class: kattr.traffic_class,
                reserved: 0,
            },
            dlid: kattr.dlid,
            sl: kattr.sl,
            src_path_bits: kattr.src_path_bits,
            static_rate: kattr.static_rate,
            is_global: kattr.is_global,
            port_num: kattr.port_num,
            reserved: 0,
        };
        let mut drv_out = [0u8; rxe::AH_RESP_LEN];
        let handle = cmd::create_ah(ctx.fd(), self.handle(), &ah_attr, 0, &mut drv_out).map_err(|e| {
            let err = Error::os(VERB, e);
            match (e, attr.grh) {
                (Errno::ETIMEDOUT | Errno::ENETUNREACH | Errno::EHOSTUNREACH | Errno::ENODATA, Some(g)) => err
                    .with_message(format!("cannot reach GID {} from sgid index {}", g.dgid, g.sgid_index)),
                _ => err,
            }
        })?;
        let ah_num = match ctx.provider() {
            Some(Provider::Rxe) => rxe::ah_num(&drv_out)?,
            _ => 0,
        };
        debug!(handle, ah_num, "AH created");
        Ok(AddressHandle { pd: self.clone(), handle, attr: *attr, ah_num, live: true })
    }
}

impl AddressHandle {
    /// The PD it lives in.
    pub fn pd(&self) -> &ProtectionDomain {
        &self.pd
    }
    /// The kernel handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }
    /// The address it was created with.
    pub fn attr(&self) -> &AhAttr {
        &self.attr
    }
    /// rxe's AH number (0 when the kernel gave none or on other providers).
    pub fn ah_num(&self) -> u32 {
        self.ah_num
    }

    /// The destination of a UD send through this AH to QP `remote_qpn`
    /// with Q_Key `remote_qkey`.
    pub fn ud_dest(&self, remote_qpn: u32, remote_qkey: u32) -> UdDest {
        UdDest { ah_num: self.ah_num, remote_qpn, remote_qkey }
    }

    fn destroy_inner(&mut self) -> Result<()> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        cmd::destroy_ah(self.pd.context().fd(), self.handle)?;
        debug!(handle = self.handle, "AH destroyed");
        Ok(())
    }

    /// Destroys the AH now (`UVERBS_METHOD_AH_DESTROY`, `ibv_destroy_ah`).
    #[doc(alias = "ibv_destroy_ah")]
    pub fn destroy(mut self) -> Result<()> {
        self.destroy_inner()
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        if let Err(e) = self.destroy_inner() {
            tracing::warn!(handle = self.handle, error = %e, "AH destroy failed");
        }
    }
}
